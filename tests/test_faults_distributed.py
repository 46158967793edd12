"""The fault suite for ``--gpus`` runs: the exit-code contract of single-process runs holds for distributed ones.

Table rows (``fault_harness.Fault``) for faults found before anything runs and for a run whose every case fails
(a rank that crashes is checked on ``test_distributed.py``'s launch of a crashing, a hung and a healthy case);
real-process tests for signals: SIGINT to the process group (a terminal's Ctrl-C), SIGTERM to accelbench,
SIGKILL of its process group, then ``--resume`` (the same run, only the missing cases, one lease). They wait for
states, never for a time (``signal_helpers``).
Each launch is real torchrun + gloo on CPU processes (~10-20 s on a 2-core machine).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, flags, run_cli, tiny_case
from fault_harness import Fault, cases, check, no_run, runs
from signal_helpers import DEADLINE_S, Gate, stored_rows, takes_ctrl_c, wait_for

pytestmark = pytest.mark.slow

CASE = flags(tiny_case(batch_sizes=None, images=8, idle_s=None))
TINY = [*CASE, "--batch-sizes", "2,4", "--db", "{db}"]
# the line names the case held at the gate and the stage its ranks were last in: the gate's or a later one (the gate
# opens once the signal is sent, and rank 0 goes on until the launcher stops it)
AFTER_BUILD = ("the untimed first pass (outputs checked)", "warming up", "the timed window")
INTERRUPTED = (
    "interrupted: 1 finished cases stored in run 1; it stopped in case {case} after \\d+ s; stage: ({stages}), for "
    "\\d+ s; rerun with --resume"
)
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def _failed_run(db: Path, tmp: Path) -> None:
    # one loop for every scenario: each case that failed is an error row and the run completes (interconnect's
    # own "failed" run status is gone)
    assert [r[2] for r in runs(db)] == ["complete"]
    statuses = [r["status"] for r in cases(db)]
    assert statuses and set(statuses) == {"error"}


FAULTS = [
    # typos are found by the launcher before a run exists: exit 2, one line, no ranks started
    Fault(
        "gpus-unknown-model",
        ["run", "--gpus", "2", *TINY, "--model", "nosuchmodel"],
        2,
        "unknown model 'nosuchmodel'",
        no_run,
        one_line=True,
    ),
    Fault(
        "gpus-missing-data",
        ["run", "--gpus", "2", *TINY, "--data", "/nonexistent"],
        2,
        "data '/nonexistent' not found",
        no_run,
        one_line=True,
    ),
    Fault(
        "train-gpus-unknown-model",
        ["train", "--gpus", "2", *TINY, "--model", "nosuchmodel"],
        2,
        "unknown model",
        no_run,
        one_line=True,
    ),
    Fault(
        "scale-unknown-model",
        ["scale", "--gpus", "1,2", *TINY, "--model", "nosuchmodel"],
        2,
        "unknown model",
        no_run,
        one_line=True,
    ),
    Fault(
        "concurrent-missing-data",
        [
            "concurrent",
            "--models",
            "cifar-resnet20,cifar-resnet20",
            "--device",
            "cpu",
            "--data",
            "/nonexistent",
            "--db",
            "{db}",
        ],
        2,
        "data '/nonexistent' not found",
        no_run,
        one_line=True,
    ),
    # a rank that raises (an error row naming the rank, the run complete, exit 1, no traceback shown):
    # test_distributed.py's launch of a crashing, a hung and a healthy case
    # interconnect: a run whose every case fails exits 1. Gloo told to use a network interface that does not exist
    # fails in every rank, every time (a 50 ms timeout, used before, let the smallest ops through on an idle host).
    # One op: each op is a case, and each failed case starts torchrun again on the cases left.
    Fault(
        "interconnect-failed",
        ["interconnect", "--gpus", "2", "--device", "cpu", "--ops", "all_reduce", "--max-bytes", "64K", "--idle-s", "0"]
        + ["--db", "{db}"],
        1,
        "Unable to find address for: nosuchif0",
        _failed_run,
        env={**ONE_THREAD, "GLOO_SOCKET_IFNAME": "nosuchif0"},
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    check(fault, tmp_path)


# real processes and signals ------------------------------------------------------------------------------------
# Each test waits for states (a stored row, a rank waiting at the gate of signal_helpers, the lease), never for a
# fixed time: the gated case cannot finish before the signal, however slow the machine.
GATED = [
    *["--device", "cpu", "--model", "signal_helpers:gated_net", "--images", "8", "--min-timed-batches", "1"],
    *["--idle-s", "0"],
]


def _start(args: list[str], env: dict | None = None) -> subprocess.Popen:
    """accelbench in a session of its own, so that a signal to its process group is a terminal's Ctrl-C."""
    return subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env({**ONE_THREAD, **(env or {})}),
        start_new_session=True,
        preexec_fn=takes_ctrl_c,
    )


def _aggregates(db: Path) -> list[dict]:
    if not stored_rows(db):
        return []
    return [r for r in cases(db) if r.get("aggregate") == 1]


def _values(row: dict) -> dict:
    """A row without its empty cells (columns added later read as None in older rows)."""
    return {k: v for k, v in row.items() if v is not None}


def _lease_pid(db: Path, run_id: int = 1):
    import sqlite3

    if not db.exists():
        return None
    try:
        with sqlite3.connect(db) as con:
            row = con.execute("SELECT lease_pid FROM runs WHERE run_id=?", (run_id,)).fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _descendants(proc: subprocess.Popen) -> list:
    import psutil

    return psutil.Process(proc.pid).children(recursive=True)


def _workers(proc: subprocess.Popen) -> list:
    """The rank processes under ``proc`` (torchrun's children running the worker module)."""
    import psutil

    out = []
    for c in _descendants(proc):
        try:
            argv = c.cmdline()
            if (
                "accelbench.launchers.torchrun.worker" in argv and "torch.distributed.run" not in argv
            ):  # not torchrun's own
                out.append(c)
        except psutil.Error:  # ended meanwhile
            pass
    return out


def _gone(procs: list, timeout: float) -> list:
    """The processes of ``procs`` still running after ``timeout`` s."""
    import psutil

    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


def _named(procs: list) -> list[str]:
    """``pid: command line`` of each of ``procs`` (which of torchrun and the ranks a failure left running)."""
    import psutil

    out = []
    for p in procs:
        try:
            out.append(f"{p.pid}: {' '.join(p.cmdline())[-160:]}")
        except psutil.Error:
            out.append(f"{p.pid}: ended")
    return out


def _kill_left(procs: list) -> None:
    """Clean up after a failed assertion: end what is still running of ``procs`` (these tests' own children)."""
    import psutil

    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass


def _stopped_cleanly(proc: subprocess.Popen, children: list, case: str, stages: tuple[str, ...]) -> tuple[str, str]:
    """``proc`` ended 130 with one line naming where it stopped (``case``: a pattern of the held case's key; one of
    ``stages``), no traceback, and none of ``children`` left running."""
    return _ended_130_with(proc, children, INTERRUPTED.format(case=case, stages="|".join(map(re.escape, stages))))


def _ended_130_with(proc: subprocess.Popen, children: list, pattern: str) -> tuple[str, str]:
    """``proc`` ended 130 with a line of stderr that ``pattern`` matches whole, no traceback, and none of
    ``children`` left running."""
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130, f"exit {proc.returncode}\n{out}\n{err}"
    for word in ("Traceback", "SignalException"):
        assert word not in out + err, out + err
    line = re.compile(pattern)
    assert any(line.fullmatch(text) for text in err.splitlines()), err
    left = _gone(children, 60)  # they stop on the signal: the gated case never ends by itself
    named = _named(left)
    _kill_left(left)
    assert not left, f"ranks or torchrun still running: {named}"
    return out, err


def test_ctrl_c_then_resume_continues_the_same_run(tmp_path: Path) -> None:
    """SIGINT to the process group mid-run: exit 130, one line, ranks stopped, finished case kept, run interrupted.
    ``--resume`` then runs only the missing case in the same run, while a second ``--resume`` finds it leased.

    The batch-4 case waits at the gate, so the signal always finds it running (the batch-2 row stored, a rank
    waiting), and the resumed run holds its lease until the test opens the gate."""
    db = tmp_path / "r.db"
    gate = Gate(tmp_path, batch=4)
    args = ["run", "--gpus", "2", *GATED, "--batch-sizes", "2,4", "--db", str(db)]
    first = _start(args, gate.env())
    wait_for(lambda: _aggregates(db) and gate.reached(), first, label="batch 2 stored, batch 4 at the gate")
    children = _descendants(first)
    gate.signal(lambda: os.killpg(first.pid, signal.SIGINT))
    _stopped_cleanly(first, children, r"\S*\|bs=4\|\S*", AFTER_BUILD)
    assert runs(db) == [(1, "inference-dp", "interrupted")]
    (done,) = _aggregates(db)
    assert done["batch_size"] == 2 and done["status"] == "ok"

    gate.close()
    gate.rearm()
    resumed = _start([*args, "--resume"], gate.env())
    wait_for(lambda: _lease_pid(db) == resumed.pid and gate.reached(), resumed, label="the resumed run at the gate")
    busy = run_cli(*args, "--resume", env=ONE_THREAD)
    assert busy.returncode == 2, busy.stdout + busy.stderr
    assert (
        busy.stderr.splitlines() == [busy.stderr.strip()] and f"run 1 is being run by pid {resumed.pid}" in busy.stderr
    )
    gate.open()
    out, err = resumed.communicate(timeout=DEADLINE_S)
    assert resumed.returncode == 0, out + err
    assert "resumed run 1: 1 cases were already done" in out
    assert runs(db) == [(1, "inference-dp", "complete")]
    aggs = _aggregates(db)
    assert sorted(r["batch_size"] for r in aggs) == [2, 4] and {r["status"] for r in aggs} == {"ok"}
    assert [_values(r) for r in aggs if r["batch_size"] == 2] == [_values(done)]  # not run again
    assert len([r for r in cases(db) if r["aggregate"] == 0]) == 4  # 2 ranks x 2 cases, no leftovers


def test_scale_sigterm_then_resume_continues_at_the_missing_count(tmp_path: Path) -> None:
    """SIGTERM to accelbench alone (``kill``, a batch scheduler) during a scaling study; ``scale --resume`` runs
    the 2-process case only and measures its speed-up against the 1-process row of the same run. The 2-process
    launch waits at the gate until the signal has arrived."""
    db = tmp_path / "s.db"
    gate = Gate(tmp_path, world=2)
    args = ["scale", "--gpus", "1,2", *GATED, "--batch-sizes", "2", "--db", str(db)]
    first = _start(args, gate.env())
    wait_for(lambda: _aggregates(db) and gate.reached(), first, label="1 process stored, 2 at the gate")
    children = _descendants(first)
    gate.signal(lambda: first.send_signal(signal.SIGTERM))
    # the 2-process launch's model waits at the gate in its first forward, right after it is built
    _stopped_cleanly(
        first, children, r"\S*\|bs=2\|\S*", ("building the model", "building the eager forward", *AFTER_BUILD)
    )
    assert runs(db) == [(1, "scale", "interrupted")]
    (one,) = _aggregates(db)
    assert one["world_size"] == 1

    p = run_cli(*args, "--resume", env=ONE_THREAD)  # no gate: runs through
    assert p.returncode == 0, p.stdout + p.stderr
    assert runs(db) == [(1, "scale", "complete")]
    by = {r["world_size"]: r for r in _aggregates(db)}
    assert sorted(by) == [1, 2] and _values(by[1]) == _values(one)
    assert by[2]["status"] == "ok" and by[2]["baseline_case_id"] == one["case_id"]


def test_a_stopped_concurrent_study_names_each_jobs_own_case(tmp_path: Path) -> None:
    """Ctrl-C during a ``concurrent`` study whose two jobs (one rank each, in threads of one process) both hold a
    case at the gate: the line names each job's own case and stage, never one job's for the other (where a sweep is,
    is one thread's)."""
    db = tmp_path / "c.db"
    gate = Gate(tmp_path)
    models = "signal_helpers:gated_net,signal_helpers:gated_net_b"
    small = ["--device", "cpu", "--data", "synthetic", "-n", "4", "--min-timed-batches", "1", "--idle-s", "0"]
    p = _start(["concurrent", "--models", models, "-b", "2", *small, "--db", str(db)], gate.env())
    wait_for(lambda: gate.waiting() == 2, p, label="both jobs' ranks at the gate")
    children = _descendants(p)
    gate.signal(lambda: os.killpg(p.pid, signal.SIGINT))
    job = "job {k}: case signal_helpers:{model}\\|\\S* after \\d+ s; stage: [^;]+, for \\d+ s"
    both = "; ".join(job.format(k=k, model=m) for k, m in enumerate(("gated_net", "gated_net_b")))
    _ended_130_with(
        p, children, f"interrupted: 0 finished cases stored in run 1; it stopped in {both}; rerun with --resume"
    )


def test_sigkill_of_the_process_group_stops_every_rank(tmp_path: Path) -> None:
    """``kill -9`` of accelbench's process group: no handler runs, yet torchrun (in its own session) and the ranks
    stop (the tether's parent-death signal), although their case, held at the gate, would never end by itself."""
    db = tmp_path / "k.db"
    gate = Gate(tmp_path)
    p = _start(["run", "--gpus", "2", *GATED, "--batch-sizes", "2", "--db", str(db)], gate.env())
    wait_for(lambda: len(_workers(p)) == 2 and gate.reached(), p, label="both ranks at the gate")
    children = _descendants(p)
    try:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        left = _gone(children, 60)  # the gate stays closed: only the tether can stop them
    finally:
        gate.open()
    named = _named(left)
    _kill_left(left)
    assert not left, f"ranks or torchrun still running after accelbench was killed: {named}"


# A stand-in for torchrun (no torch): it puts its pid where the tether puts torchrun's, starts one "rank" and waits;
# the rank ties itself to it first, as the worker module does.
AGENT = """
import os, subprocess, sys, time
os.environ[sys.argv[1]] = str(os.getpid())
subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[3]])
time.sleep(600)
"""
RANK = """
import sys, time
from pathlib import Path
from accelbench.launchers.torchrun.tether import tie_to_agent
if tie_to_agent():
    Path(sys.argv[1]).touch()
    time.sleep(600)
"""


def test_a_rank_ends_with_its_torchrun_however_torchrun_ends(tmp_path: Path) -> None:
    """The ranks' own tie: torchrun SIGKILLed (no handler runs, so it cannot stop its ranks) takes its rank with
    it. Under the launcher's tie alone, torchrun gets SIGTERM once per thread of the dying accelbench and its
    handler raises on each: a burst of them could end torchrun inside its shutdown, before it signalled the ranks,
    which then ran on."""
    import psutil

    from accelbench.launchers.torchrun.tether import AGENT_PID

    tied = tmp_path / "tied"
    agent = subprocess.Popen([sys.executable, "-c", AGENT, AGENT_PID, RANK, str(tied)], env=cli_env())
    (rank,) = wait_for(lambda: tied.exists() and psutil.Process(agent.pid).children(), agent, label="the rank tied")
    agent.kill()
    agent.wait()
    left = _gone([rank], 60)  # it sleeps for 10 minutes unless the tie ends it
    _kill_left(left)
    assert not left, "the rank outlived its torchrun"
