"""The fault suite: every bad input or fault a user meets gets the documented exit code, one line that
says why, and nothing finished is lost. One parametrised test per row (see ``fault_harness.Fault``)."""

from __future__ import annotations

import os
import re
import sqlite3
import time
from pathlib import Path

import conftest
import pytest
from conftest import cli_env, run_cli
from fault_harness import Fault, cases, check, no_run, runs, statuses

TINY = [*conftest.TINY, "--db", "{db}"]


def _text_file(tmp: Path) -> dict:
    (tmp / "notes.txt").write_text("not a database\n" * 50)
    return {"path": str(tmp / "notes.txt")}


def _foreign_db(tmp: Path) -> dict:
    with sqlite3.connect(tmp / "app.db") as con:
        con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
        con.execute("INSERT INTO users (name) VALUES ('ada')")
    return {"path": str(tmp / "app.db")}


def _foreign_untouched(db: Path, tmp: Path) -> None:
    with sqlite3.connect(tmp / "app.db") as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {"users"}, tables


def _newer_schema(tmp: Path) -> dict:
    from accelbench.store import Store

    with Store(tmp / "new.db") as st:
        st.conn.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
        st.conn.commit()
    return {"path": str(tmp / "new.db")}


def _store_with_one_run(tmp: Path) -> dict:
    from accelbench.store import Store

    with Store(tmp / "one.db") as st:
        st.finish_run(st.begin_run("inference", {}, "h", {}), "complete")
    return {"path": str(tmp / "one.db")}


def _empty_folder(tmp: Path) -> dict:
    (tmp / "empty" / "cats").mkdir(parents=True)
    return {}


def _folder_with_a_bad_image(tmp: Path) -> dict:
    import tarfile

    root = tmp / "imgs"
    with tarfile.open(Path(__file__).resolve().parents[1] / "src/accelbench/assets/cifar10/test.tar.gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()][:6]
        for m in members:
            dest = root / Path(m.name).parent.name / Path(m.name).name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(tar.extractfile(m).read())
    bad = root / "airplane" / "0000_broken.png"
    bad.write_text("this is not a png")
    return {"bad": str(bad)}


def _skipped_one(db: Path, tmp: Path) -> None:
    rows = cases(db)
    assert [r["status"] for r in rows] == ["ok"] and "1 undecodable skipped" in rows[0]["data_description"]


def _bad_toml(tmp: Path) -> dict:
    (tmp / "bad.toml").write_text("model = [unclosed\n")
    (tmp / "typo.toml").write_text('modle = "resnet50"\n')
    return {}


def _rows(expected: list[str]):
    def check_rows(db: Path, tmp: Path) -> None:
        assert statuses(db) == expected, statuses(db)
        assert [r[2] for r in runs(db)] == ["complete"]

    return check_rows


FAULTS = [
    # item 1: a mixed sweep (ok + unsupported) prints its summary; unsupported rows are data: exit 0
    Fault(
        "mixed-sweep-summary",
        ["run", *TINY, "--precisions", "fp32,fp16", "--modes", "eager,cudagraphs"],
        0,
        stdout="run 1 stored in",
        store=_rows(["ok", "unsupported", "ok", "unsupported"]),
    ),
    # a whole-step CUDA graph training mode on a CPU: an unsupported row beside the eager one, exit 0
    Fault(
        "train-graph-mode-on-cpu",
        ["train", *TINY, "--precisions", "fp32", "--modes", "eager,cudagraphs"],
        0,
        stdout="run 1 stored in",
        store=_rows(["ok", "unsupported"]),
    ),
    # item 4: typos are found before anything runs: exit 2, one line, no run
    Fault(
        "unknown-model",
        ["run", *TINY[2:], "--model", "nosuchmodel"],
        2,
        "unknown model 'nosuchmodel'",
        no_run,
        one_line=True,
    ),
    Fault(
        "unknown-factory",
        ["run", *TINY[2:], "--model", "nosuchpkg.mod:factory"],
        2,
        "cannot import model factory 'nosuchpkg.mod:factory'",
        no_run,
        one_line=True,
    ),
    Fault(
        "unknown-timm-model",
        ["run", *TINY[2:], "--model", "timm:nosuchnet"],
        2,
        "unknown timm model 'nosuchnet'",
        no_run,
        one_line=True,
    ),
    Fault(
        "missing-data",
        ["run", *TINY, "--data", "/nonexistent"],
        2,
        "data '/nonexistent' not found",
        no_run,
        one_line=True,
    ),
    Fault(
        "empty-data-folder",
        ["run", *TINY, "--data", "{tmp}/empty"],
        2,
        "no images in",
        no_run,
        _empty_folder,
        one_line=True,
    ),
    Fault(
        "train-unknown-model",
        ["train", "--model", "nosuchmodel", "--device", "cpu", "--db", "{db}"],
        2,
        "unknown model",
        no_run,
        one_line=True,
    ),
    Fault(
        "profile-unknown-model",
        ["profile", "--model", "nosuchmodel", "--device", "cpu", "--db", "{db}"],
        2,
        "unknown model",
        no_run,
        one_line=True,
    ),
    # item 6: one line instead of a traceback
    Fault("device-tpu", ["run", *TINY, "--device", "tpu"], 2, "invalid device 'tpu'", no_run, one_line=True),
    Fault(
        "device-cuda-without-gpu", ["run", *TINY, "--device", "cuda"], 2, "invalid device 'cuda'", no_run, one_line=True
    ),
    Fault(
        "store-is-a-text-file",
        ["run", *TINY[:-1], "{path}"],
        2,
        "is not an accelbench database",
        setup=_text_file,
        one_line=True,
    ),
    Fault("store-is-a-directory", ["run", *TINY[:-1], "{tmp}"], 2, "is a directory", one_line=True),
    Fault(
        "store-in-a-read-only-place",
        ["run", *TINY[:-1], "/proc/accelbench.db"],
        2,
        "cannot open the results store",
        one_line=True,
    ),
    Fault(
        "store-under-a-file",
        ["run", *TINY[:-1], "{path}/sub/accelbench.db"],
        2,
        "is a file, not a folder",
        setup=_text_file,
        one_line=True,
    ),
    Fault(
        "store-of-another-application",
        ["run", *TINY[:-1], "{path}"],
        2,
        "another application's SQLite database",
        _foreign_untouched,
        _foreign_db,
        one_line=True,
    ),
    Fault(
        "store-with-a-newer-schema",
        ["results", "--db", "{path}"],
        2,
        "newer than this accelbench",
        setup=_newer_schema,
        one_line=True,
    ),
    Fault("results-without-a-store", ["results", "--db", "{tmp}/none.db"], 2, "no results store", one_line=True),
    Fault(
        "export-unknown-run",
        ["export", "--run", "99", "--db", "{path}"],
        2,
        "no run 99",
        setup=_store_with_one_run,
        one_line=True,
    ),
    # usage errors: exit 2, one line (end to end: a real process)
    Fault("unknown-flag", ["run", "--no-such-flag"], 2, "No such option", one_line=True, process=True),
    Fault(
        "bad-precision", ["run", *TINY, "--precisions", "fp64"], 2, "invalid precision 'fp64'", no_run, one_line=True
    ),
    Fault(
        "malformed-toml",
        ["run", *TINY, "--config", "{tmp}/bad.toml"],
        2,
        "invalid config",
        no_run,
        _bad_toml,
        one_line=True,
    ),
    Fault(
        "unknown-toml-key",
        ["run", *TINY, "--config", "{tmp}/typo.toml"],
        2,
        "invalid config key 'modle'",
        no_run,
        _bad_toml,
        one_line=True,
    ),
    Fault("version", ["--version"], 0, stdout="accelbench "),
    # item 7: text in brackets survives (rich markup off)
    Fault("models-keeps-brackets", ["models"], 0, stdout="pip install 'accelbench[timm]'"),
    Fault(
        "error-keeps-brackets",
        ["run", *TINY, "--model", "helpers:bracket_error_model"],
        1,
        "[enforce fail at alloc_cpu.cpp:127] data. [timm] kept as written",
        _rows(["error"]),
    ),
    Fault("train-help-keeps-brackets", ["train", "--help"], 0, stdout="[train]"),
    # exit 1: a case error among finished cases; everything stored, the summary counts the failures (end to end: a
    # real process)
    Fault(
        "one-case-fails",
        ["run", *TINY, "--model", "helpers:broken_model,cifar-resnet20"],
        1,
        "1 of 2 cases ended in error",
        _rows(["error", "ok"]),
        process=True,
    ),
    # item 8: CPU out-of-memory is an oom row with its boundary; oom is data: exit 0
    Fault(
        "cpu-oom-boundary",
        ["run", *TINY, "--model", "helpers:cpu_oom_model", "--batch-sizes", "1,2,4,8", "--images", "8"],
        0,
        stdout="largest batch that ran 2, out of memory at 4",
        store=_rows(["ok", "ok", "oom", "skipped"]),
    ),
    # item 10: a broken image is named; --skip-bad-images drops and counts it
    Fault(
        "bad-image-named",
        ["run", *TINY, "--data", "{tmp}/imgs"],
        2,
        "0000_broken.png: not an image file",
        no_run,
        _folder_with_a_bad_image,
        one_line=True,
    ),
    Fault(
        "train-bad-image-named",
        [
            "train",
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--data",
            "{tmp}/imgs",
            "--eval-data",
            "{tmp}/imgs",
            "--db",
            "{db}",
        ],
        2,
        "0000_broken.png: not an image file",
        no_run,
        _folder_with_a_bad_image,
        one_line=True,
    ),
    Fault(
        "bad-image-skipped",
        ["run", *TINY, "--data", "{tmp}/imgs", "--images", "7", "--skip-bad-images"],
        0,
        store=_skipped_one,
        setup=_folder_with_a_bad_image,
    ),
    # the commands and settings added later (loadgen, labels, backends, compare) answer the same way
    Fault(
        "loadgen-unknown-model",
        ["loadgen", "--model", "nosuchmodel", "--device", "cpu", "--db", "{db}"],
        2,
        "unknown model 'nosuchmodel'",
        no_run,
        one_line=True,
    ),
    Fault(
        "loadgen-unknown-scenario",
        ["loadgen", *TINY[:2], "--device", "cpu", "--scenarios", "Batch", "--db", "{db}"],
        2,
        "invalid scenario 'Batch'",
        no_run,
        one_line=True,
    ),
    Fault(
        "unknown-label-space",
        ["run", *TINY, "--label-space", "imagenet-21k"],
        2,
        "invalid label_space 'imagenet-21k'",
        no_run,
        one_line=True,
    ),
    Fault(
        "missing-labels-file",
        ["run", *TINY, "--labels", "{tmp}/none.txt"],
        2,
        "cannot read labels file",
        no_run,
        one_line=True,
    ),
    Fault(
        "unknown-backend", ["run", *TINY, "--modes", "eager,nosuch"], 2, "invalid mode 'nosuch'", no_run, one_line=True
    ),
    Fault(
        "tune-unknown-objective",
        ["tune", *TINY, "--objective", "speed"],
        2,
        "invalid objective 'speed'",
        no_run,
        one_line=True,
    ),
    Fault("tune-zero-budget", ["tune", *TINY, "--budget-s", "0"], 2, "invalid budget_s 0", no_run, one_line=True),
    Fault("tune-unknown-mode", ["tune", *TINY, "--modes", "nosuch"], 2, "invalid mode 'nosuch'", no_run, one_line=True),
    Fault(
        "tune-train-top1",
        ["tune", *TINY, "--workload", "train", "--min-top1-ratio", "0.99"],
        2,
        "invalid min_top1_ratio 0.99",
        no_run,
        one_line=True,
    ),
    Fault(
        "tune-train-untrainable-mode",
        ["tune", *TINY, "--workload", "train", "--modes", "compile-freeze"],
        2,
        "invalid mode 'compile-freeze'",
        no_run,
        one_line=True,
    ),
    Fault(
        "compare-unknown-run",
        ["compare", "1", "99", "--db", "{path}"],
        2,
        "no run 99",
        setup=_store_with_one_run,
        one_line=True,
    ),
    Fault(
        "report-missing-store",
        ["report", "--db", "{path}", "--run", "1", "--run", "{tmp}/none.db:1", "--html", "{tmp}/r.html"],
        2,
        "no results store at",
        setup=_store_with_one_run,
        one_line=True,
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    check(fault, tmp_path)


def test_no_sweep_row_is_lost_to_a_summary_crash(tmp_path: Path) -> None:
    """Item 1 at the library level: the weights note sorts a set holding NaN weights without raising."""
    p = check(FAULTS[0], tmp_path)
    assert "cifar-resnet20: weights resnet20-12fca82f.th" in p.stdout


def test_cpu_contention_is_flagged(tmp_path: Path) -> None:
    """Item 9: a CPU case that shares the host with busy processes is flagged ``cpu-contention``, with the
    other processes' share of the host in the row and the reason named in the notes."""
    import subprocess
    import sys

    import psutil

    db = tmp_path / "busy.db"
    spin = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        # the spinners are on the CPU (a state, not a sleep) before the run starts
        deadline = time.monotonic() + 60
        while not all(psutil.Process(s.pid).cpu_times().user > 0.05 for s in spin):
            assert time.monotonic() < deadline, "the busy processes never ran"
            time.sleep(0.01)
        # a real process: the spinners are this test's children, so an in-process run would count them as its own
        p = run_cli(
            "run",
            *[a.format(db=db) for a in TINY],
            "--min-time-s",
            "1",
            env={"OMP_NUM_THREADS": "1"},
            subprocess=True,
        )
    finally:
        for s in spin:
            s.kill()
            s.wait()
    assert p.returncode == 0, p.stderr
    row = cases(db)[0]
    assert "cpu-contention" in row["validity"] and row["cpu_other_util_pct"] > 10, row["validity"]
    assert (
        "flagged: other processes used > 10% of the host's CPU time: 1 case of cifar-resnet20: bs=2 fp32 eager"
        in p.stdout
    ), p.stdout


def _interrupted_run(db: Path, batch_sizes: str, gate) -> list[str]:
    """Start a sweep of ``signal_helpers:gated_net``, SIGTERM it once its first case is stored and the next one
    waits at ``gate`` (so exactly one case is finished); returns the sweep's arguments."""
    import signal
    import subprocess
    import sys

    from signal_helpers import DEADLINE_S, stored_rows, wait_for

    args = [
        "run",
        *[a.format(db=db) for a in TINY],
        "--model",
        "signal_helpers:gated_net",
        "--batch-sizes",
        batch_sizes,
    ]
    env = cli_env({"OMP_NUM_THREADS": "1", **gate.env()})
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: stored_rows(db) and gate.reached(), proc, label="the first case stored, the next at the gate")
    gate.signal(lambda: proc.send_signal(signal.SIGTERM))
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130 and "rerun with --resume" in err, err
    # where it stopped: the held case, in the step of its first forward (one process: the signal finds it there)
    assert re.search(
        r"it stopped in case \S*\|bs=2\|\S* after \d+ s; stage: the untimed first pass \(outputs checked\), for \d+ s;",
        err,
    ), err
    assert stored_rows(db) == 1
    return args


def test_two_concurrent_resumes_write_one_row_per_case(tmp_path: Path) -> None:
    """Item 5: the first --resume takes the run's lease; the second gets one line and exit 2; one row per case.
    The winner waits at the gate (signal_helpers) until the loser has answered, so the loser always meets a
    live lease, however the two processes are scheduled.

    End to end: real processes (SIGTERM's exit 130 with the finished case stored, then two ``--resume`` at once).
    """
    import subprocess
    import sys

    from signal_helpers import DEADLINE_S, Gate, wait_for

    db = tmp_path / "two.db"
    gate = Gate(tmp_path, batch=2)
    args = _interrupted_run(db, "1,2,3", gate)
    gate.close()
    gate.rearm()
    env = cli_env({"OMP_NUM_THREADS": "1", **gate.env()})
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "accelbench", *args, "--resume"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        wait_for(
            lambda: (
                all(p.poll() is not None for p in procs)
                or (gate.reached() and any(p.poll() is not None for p in procs))
            ),
            label="one resume at the gate, the other ended",
        )
    finally:
        gate.open()
    outs = [p.communicate(timeout=DEADLINE_S) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], [(p.returncode, o[1]) for p, o in zip(procs, outs)]
    loser = next(o for p, o in zip(procs, outs) if p.returncode == 2)
    assert [line for line in loser[1].splitlines() if line.strip()] and "is being run by pid" in loser[1]
    assert "Traceback" not in loser[1]
    assert runs(db) == [(1, "inference", "complete")]
    keys = [r["case_key"] for r in cases(db)]
    assert len(keys) == 3 == len(set(keys))
