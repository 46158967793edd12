"""``--resume`` is idempotent: with nothing unfinished and a complete run of the same settings,
it says which run is complete (id, store) and exits 0 having measured nothing, in one process here and under
``--gpus`` on ``test_distributed.py``'s compiled launch; with no run of these settings at all it starts one and says
so; an interrupted run still continues."""

from __future__ import annotations

from pathlib import Path

from conftest import TINY, run_cli
from fault_harness import cases, runs

ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def test_resume_of_a_complete_run_measures_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    first = run_cli("run", *TINY, "--db", str(db), "--resume", env=ONE_THREAD)
    assert first.returncode == 0, first.stdout + first.stderr
    assert f"--resume: no earlier run of these settings in {db}: ran them as new run 1" in first.stdout, first.stdout
    before = [r["case_id"] for r in cases(db)]
    assert before and runs(db) == [(1, runs(db)[0][1], "complete")]

    again = run_cli("run", *TINY, "--db", str(db), "--resume", env=ONE_THREAD)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"nothing to resume: run 1 in {db} is complete with these settings" in again.stdout, again.stdout
    assert "Traceback" not in again.stderr and not again.stderr.strip(), again.stderr
    assert [r["case_id"] for r in cases(db)] == before  # nothing measured, nothing added
    assert [r[0] for r in runs(db)] == [1]


def test_other_settings_are_a_new_run_not_the_complete_one(tmp_path: Path) -> None:
    """A complete run of other settings is not "already complete": --resume of new settings starts run 2."""
    db = tmp_path / "o.db"
    assert run_cli("run", *TINY, "--db", str(db), env=ONE_THREAD).returncode == 0
    p = run_cli("run", *TINY, "--batch-sizes", "1", "--db", str(db), "--resume", env=ONE_THREAD)
    assert p.returncode == 0 and "ran them as new run 2" in p.stdout, p.stdout + p.stderr
    assert [(r[0], r[2]) for r in runs(db)] == [(1, "complete"), (2, "complete")]


def test_an_interrupted_run_is_still_continued(tmp_path: Path) -> None:
    """An interrupted run (here: marked so, as Ctrl-C leaves it) is continued, not reported complete."""
    import sqlite3

    db = tmp_path / "i.db"
    assert run_cli("run", *TINY, "--batch-sizes", "1,2", "--db", str(db), env=ONE_THREAD).returncode == 0
    with sqlite3.connect(db) as con:  # as a sweep stopped after its first case leaves it
        con.execute("DELETE FROM cases WHERE case_key LIKE '%bs=2|%'")
        con.execute("UPDATE runs SET status='interrupted'")
    p = run_cli("run", *TINY, "--batch-sizes", "1,2", "--db", str(db), "--resume", env=ONE_THREAD)
    assert p.returncode == 0 and "resumed run 1: 1 cases were already done" in p.stdout, p.stdout + p.stderr
    assert runs(db) == [(1, "inference", "complete")] and len(cases(db)) == 2
