import json
import subprocess
import sys

import pytest
from conftest import cli_env, run_cli


def test_run_end_to_end_on_real_images(tmp_path):
    """End to end: a real process (``run`` exits 0 with its table and JSON); then results and export read it back."""
    db, js = tmp_path / "r.db", tmp_path / "r.json"
    p = run_cli(
        "run",
        "--model",
        "cifar-resnet20",
        "--batch-sizes",
        "1,16",
        "--images",
        "64",
        "--device",
        "cpu",
        "--db",
        str(db),
        "--json",
        str(js),
        "--min-timed-batches",
        "4",
        check=True,
        subprocess=True,
    )
    assert "img/s" in p.stdout and "cifar10-test: 64 of 10000 real images" in p.stdout
    doc = json.loads(js.read_text())
    assert doc["env"]["torch"] and doc["env"]["cpu_model"] and "git_commit" in doc["env"]
    assert doc["spec"]["batch_sizes"] == [1, 16] and len(doc["results"]) == 2
    for r in doc["results"]:
        for key in (
            "model",
            "batch_size",
            "precision",
            "mode",
            "device",
            "status",
            "images",
            "total_time_s",
            "throughput_samples_per_s",
            "latency_p50_ms",
            "latency_p99_ms",
            "top1",
            "top5",
        ):
            assert key in r, key
        assert r["status"] == "ok" and r["device"] == "cpu" and r["images"] == 64 and 0.6 < r["top1"] <= 1
    res = run_cli("results", "--db", str(db), check=True)
    assert "cifar10-test" not in res.stderr and "ok" in res.stdout
    csv = run_cli("export", "--db", str(db), "--run", str(doc["run_id"]), "--format", "csv", check=True).stdout
    header = csv.splitlines()[0].split(",")
    assert "latency_p99_ms" in header and len(csv.strip().splitlines()) == 3
    out = tmp_path / "e.json"
    run_cli("export", "--db", str(db), "--format", "json", "--output", str(out), check=True)
    assert json.loads(out.read_text())["run_id"] == doc["run_id"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "--precisions", "fp64"], "invalid precision 'fp64': allowed fp32, tf32"),
        (["run", "--batch-sizes", "8,x"], "invalid batch_sizes"),
        (["run", "--device", "cuda"], "invalid device 'cuda'"),
        (["export", "--format", "xml"], "invalid format 'xml'"),
    ],
)
def test_bad_input_one_line_error(tmp_path, args, needle):
    p = run_cli(*args, "--db", str(tmp_path / "x.db")) if args[0] == "run" else run_cli(*args)
    assert p.returncode == 2
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr


def test_config_file_with_an_unknown_model_is_refused_before_the_run(tmp_path):
    cfg = tmp_path / "s.toml"
    cfg.write_text('model = "nosuchnet"\nbatch_sizes = [2]\nimages = 4\ndevice = "cpu"\n')
    p = run_cli("run", "--config", str(cfg), "--db", str(tmp_path / "c.db"))
    assert p.returncode == 2 and "error: unknown model 'nosuchnet'" in p.stderr, p.stderr


def test_sigterm_stops_a_sweep_like_ctrl_c(tmp_path):
    """End to end: a real process, sent SIGTERM: exit 130, the finished case stored, the run interrupted."""
    # `timeout`, `kill` and batch schedulers send SIGTERM: finished cases stay, the run is marked interrupted. The
    # batch-2 case waits at the gate (signal_helpers) until the signal has arrived: exactly one case is finished.
    import signal
    import sqlite3

    from signal_helpers import DEADLINE_S, Gate, stored_rows, wait_for

    db = tmp_path / "t.db"
    gate = Gate(tmp_path, batch=2)
    cmd = [
        sys.executable,
        "-m",
        "accelbench",
        "run",
        "--model",
        "signal_helpers:gated_net",
        "--batch-sizes",
        "1,2,4,8,16,32",
        "--images",
        "32",
        "--device",
        "cpu",
        "--min-time-s",
        "1",
        "--db",
        str(db),
    ]
    proc = subprocess.Popen(
        cmd,
        env=cli_env({"OMP_NUM_THREADS": "1", **gate.env()}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: stored_rows(db) and gate.reached(), proc, label="batch 1 stored, batch 2 at the gate")
    gate.signal(lambda: proc.send_signal(signal.SIGTERM))
    _, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130 and "interrupted" in err, (proc.returncode, err)
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT status FROM runs").fetchall() == [("interrupted",)]
        assert con.execute("SELECT batch_size FROM cases").fetchall() == [(1,)]


@pytest.mark.parametrize("traceback", [False, True], ids=["one-line", "traceback"])
def test_an_internal_error_is_one_line_and_exit_1(tmp_path, traceback):
    """End to end: a real process whose command meets a bug (``Store.runs`` raises): exit 1 and one line that says
    so and how to see more; ``ACCELBENCH_TRACEBACK=1`` shows the traceback instead."""
    from accelbench.store import Store

    db = tmp_path / "e.db"
    Store(db).close()
    code = (
        "import sys\nfrom accelbench.store import Store\n"
        "def runs(self):\n    raise ZeroDivisionError('a bug')\n"
        f"Store.runs = runs\nfrom accelbench.cli import main\nmain(['results', '--runs', '--db', {str(db)!r}])\n"
    )
    env = cli_env({"ACCELBENCH_TRACEBACK": "1"} if traceback else {})
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 1, p.stderr
    if traceback:
        assert "Traceback (most recent call last)" in p.stderr and "ZeroDivisionError: a bug" in lines[-1], p.stderr
    else:
        assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
        assert lines[0] == (
            "internal error: ZeroDivisionError: a bug (a bug: please report it; ACCELBENCH_TRACEBACK=1 shows the "
            "traceback)"
        ), lines
