"""The fault suite's harness: one table row per fault, run as a user would (``accelbench ...``: in this process
through :func:`conftest.run_cli`, which puts the process's state back after; a row with ``process=True`` in a real
``python -m accelbench``, one of the end-to-end checks of the exit-code contract).

A row names the command, the exit code of the contract (``accelbench.core.errors``), the one-line message
and what must still be in the store afterwards. Placeholders in ``args``: ``{db}`` (a store path in the
test's folder), ``{tmp}`` (the folder). ``setup(tmp)`` prepares files (and may return extra format keys).
"""

from __future__ import annotations

import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import run_cli

TESTS = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Fault:
    """One row of the fault table.

    Attributes:
        id: the test id.
        args: accelbench arguments (``{db}``, ``{tmp}`` and setup's keys are filled in).
        code: expected exit code.
        message: a substring of the one line that explains the outcome (stderr), or None.
        store: ``check(db_path, tmp)`` asserting what the store holds afterwards, or None.
        setup: ``setup(tmp) -> dict | None`` run first; its dict adds format keys for ``args``.
        one_line: stderr must be exactly one line (faults found before anything ran).
        env: extra environment variables.
        stdout: a substring stdout must hold, or None.
        process: end to end: run in a real ``python -m accelbench`` process (not in this one).
    """

    id: str
    args: list[str]
    code: int
    message: str | None = None
    store: Callable | None = None
    setup: Callable | None = None
    one_line: bool = False
    env: dict = field(default_factory=dict)
    stdout: str | None = None
    process: bool = False


def check(fault: Fault, tmp: Path) -> subprocess.CompletedProcess:
    """Run one fault row and assert its exit code, its one line, no traceback, and the store check."""
    keys = {"db": str(tmp / "faults.db"), "tmp": str(tmp)}
    if fault.setup is not None:
        keys.update(fault.setup(tmp) or {})
    args = [a.format(**keys) for a in fault.args]
    p = run_cli(*args, env=fault.env, subprocess=fault.process)
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out
    assert p.returncode == fault.code, f"exit {p.returncode}, expected {fault.code}\n{p.stdout}\n{p.stderr}"
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    if fault.one_line:
        assert len(lines) == 1, p.stderr
    if fault.message is not None:
        hits = [line for line in lines if fault.message in line]
        assert hits, f"{fault.message!r} not on one line of stderr:\n{p.stderr}"
    if fault.stdout is not None:
        # the console wraps long lines at word boundaries: compare the words, not where the lines break
        assert " ".join(fault.stdout.split()) in " ".join(p.stdout.split()), p.stdout
    if fault.store is not None:
        fault.store(Path(keys["db"]), tmp)
    return p


def runs(db: Path) -> list[tuple]:
    """``(run_id, kind, status)`` of every run (an empty list when there is no store file)."""
    if not db.exists():
        return []
    with sqlite3.connect(db) as con:
        try:
            return con.execute("SELECT run_id, kind, status FROM runs ORDER BY run_id").fetchall()
        except sqlite3.OperationalError:
            return []


def cases(db: Path, run_id: int | None = None) -> list[dict]:
    """Every case row as a dict (of one run when given)."""
    with sqlite3.connect(db) as con:
        con.row_factory = sqlite3.Row
        q = "SELECT * FROM cases" + (" WHERE run_id=?" if run_id is not None else "") + " ORDER BY case_id"
        return [dict(r) for r in con.execute(q, (run_id,) if run_id is not None else ())]


def no_run(db: Path, tmp: Path) -> None:
    """Nothing was run: no run row in the store (the file may exist, empty)."""
    assert runs(db) == [], runs(db)


def statuses(db: Path) -> list[str]:
    return [r["status"] for r in cases(db)]
