"""A store another process holds locked, or a disk that fills, mid-sweep: the sweep waits
for the lock (saying so once), and when it cannot write it ends as an interruption (exit 130, the finished cases
kept, ``--resume`` continues), never as "exit 2, run left running, no hint".

The lock is a real second process holding ``BEGIN EXCLUSIVE`` on the file; it is released when the test sees the
sweep's "waiting" line (a state, never a fixed sleep)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import cli_env, flags, run_cli, tiny_case
from fault_harness import cases, runs

ARGS = ["run", *flags(tiny_case(batch_sizes="1,2,3,4,5,6", images=6))]
LOCKER = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()  # held until the test writes a line
con.execute("COMMIT")
"""


def _sweep(db: Path, wait_s: str) -> subprocess.Popen:
    env = cli_env({"OMP_NUM_THREADS": "1", "ACCELBENCH_STORE_LOCK_WAIT_S": wait_s})
    return subprocess.Popen(
        [sys.executable, "-m", "accelbench", *ARGS, "--db", str(db)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored(db: Path) -> int:
    try:
        with sqlite3.connect(db, timeout=0.1) as con:
            return con.execute("SELECT COUNT(*) FROM cases").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def _lock_after_first_case(db: Path, proc: subprocess.Popen) -> subprocess.Popen:
    deadline = time.monotonic() + 300
    while proc.poll() is None and not _stored(db):  # a state: the first case's row
        assert time.monotonic() < deadline, "no case stored in 300 s"
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert locker.stdout.readline().strip() == "locked"
    return locker


def test_a_sweep_waits_for_a_locked_store_and_goes_on(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    proc = _sweep(db, "600")
    locker = _lock_after_first_case(db, proc)
    seen = []
    for line in proc.stderr:  # until the sweep says it waits: then the lock is let go
        seen.append(line)
        if line.startswith("waiting: the results store") and "locked by another process" in line:
            break
    else:
        raise AssertionError("no waiting line: " + "".join(seen))
    locker.communicate("release\n", timeout=60)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, "".join(seen) + err
    rows = cases(db)
    assert len(rows) == 6 == len({r["case_key"] for r in rows}) and {r["status"] for r in rows} == {"ok"}
    assert runs(db) == [(1, "inference", "complete")]


def test_a_store_locked_past_the_wait_is_an_interruption_that_resumes(tmp_path: Path) -> None:
    db = tmp_path / "stuck.db"
    proc = _sweep(db, "2")
    locker = _lock_after_first_case(db, proc)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        locker.communicate("release\n", timeout=60)
    assert proc.returncode == 130, out + err
    assert "stayed locked by another process" in err and "rerun with --resume" in err, err
    assert "Traceback" not in err and "internal error" not in err
    done = len(cases(db))
    assert 1 <= done < 6
    # the run could not be marked while locked: it reads as stale (its process is gone) and resumes
    assert runs(db)[0][2] in ("interrupted", "running")
    again = run_cli(*ARGS, "--db", str(db), "--resume", env={"OMP_NUM_THREADS": "1"})
    assert again.returncode == 0 and f"{done} cases were already done" in again.stdout, again.stdout + again.stderr
    assert runs(db) == [(1, "inference", "complete")] and len(cases(db)) == 6


def test_a_full_disk_mid_sweep_is_an_interruption_with_the_rows_kept(tmp_path: Path) -> None:
    """A store whose writes fail as a full disk's do (SQLite's "database or disk is full") after the first case:
    exit 130 as an interruption, the first case kept, the run marked interrupted where the store still can be."""
    script = tmp_path / "full.py"
    script.write_text(
        "import sqlite3, sys\n"
        "from accelbench.store import Store\n"
        "calls = []\n"
        "def add_case(self, run_id, record, series=None, _orig=Store.add_case):\n"
        "    calls.append(1)\n"
        "    if len(calls) > 1:\n"
        "        def full():\n"
        "            raise sqlite3.OperationalError('database or disk is full')\n"
        "        return self._write(full)\n"
        "    return _orig(self, run_id, record, series)\n"
        "Store.add_case = add_case\n"
        "from accelbench.cli import main\n"
        "sys.argv[0] = 'accelbench'\n"
        "main()\n"
    )
    db = tmp_path / "full.db"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    p = subprocess.run(
        [sys.executable, str(script), "run", *flags(tiny_case(batch_sizes="1,2,3", images=6)), "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 130, p.stdout + p.stderr
    assert "its disk is full" in p.stderr and "rerun with --resume" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert [r["status"] for r in cases(db)] == ["ok"] and runs(db) == [(1, "inference", "interrupted")]


def _open_at_the_barrier(path: str, barrier) -> str:
    from accelbench.store import Store

    barrier.wait()
    try:
        Store(path).close()
    except Exception as exc:  # the test reports each process's failure
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def test_processes_creating_one_new_store_at_once_all_open_it(tmp_path):
    """Eight processes released together open one store that does not exist yet (as the ranks of a user's torchrun
    do): each sees it empty or complete, never half-created ("another application's database")."""
    import multiprocessing as mp

    path = str(tmp_path / "new.db")
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(8)
        with ctx.Pool(8) as pool:
            results = pool.starmap(_open_at_the_barrier, [(path, barrier)] * 8)
    assert results == ["ok"] * 8
    (version,) = sqlite3.connect(path).execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert int(version) > 0
