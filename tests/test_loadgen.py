"""``accelbench loadgen``: MLPerf's scenarios through the real LoadGen, on the CPU.

Pure parts with exact numbers (LoadGen logs recorded from real tests in ``tests/data/loadgen``, the Server
search, the settings); end to end with a tiny model and 1-second tests: every scenario gives a VALID row
with telemetry, energy and cost columns and its logs beside the store; a missed latency bound is
INVALID with LoadGen's reason (data: exit 0); LoadGen's AccuracyOnly answers agree with ``accelbench run``;
Ctrl-C keeps the finished scenarios and ``--resume`` runs the rest; a missing LoadGen is one line.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, flags, run_cli, tiny_case
from fault_harness import cases, runs
from signal_helpers import DEADLINE_S, Gate, stored_rows, takes_ctrl_c, wait_for

pytest.importorskip("mlperf_loadgen")

DATA = Path(__file__).with_name("data") / "loadgen"
# the tiny case as a loadgen: 64 samples, 0.5 s tests, batches up to 16 (no timed-step count: LoadGen sets the tests).
# Offline's one query is sized from the bare forward time, which for this tiny CPU model underestimates LoadGen's
# per-sample host cost many times over: its test lasts far longer than asked, in proportion to what is asked.
MIN_DURATION_S = 0.5
TINY = flags(
    tiny_case(
        model="helpers:tiny_conv_net",
        batch_sizes=None,
        images=64,
        min_timed_batches=None,
        min_duration_s=MIN_DURATION_S,
        max_batch=16,
    )
)


# --- pure ---------------------------------------------------------------------------------------------
def test_detail_logs_read_back_into_columns():
    from accelbench.scenarios.loadgen.results import read_detail, result_columns

    ms = result_columns(read_detail(DATA / "multistream-valid-detail.txt"), wall_s=2.0)
    assert ms["result_validity"] == "VALID" and ms["invalid_reasons"] is None
    assert (ms["queries"], ms["samples_per_query"], ms["samples_timed"]) == (1622, 8, 12976)
    assert ms["latency_p99_ms"] == ms["figure_of_merit"] == 0.878403 and ms["latency_p50_ms"] == 0.595643
    assert ms["early_stopping_latency_ms"] == 0.999343 and ms["throughput_samples_per_s"] == 12976 / 2.0

    srv = result_columns(read_detail(DATA / "server-invalid-detail.txt"), wall_s=1.0)
    assert srv["invalid_reasons"] == (
        "latency bound not met (p99 2.38 ms > 0.1 ms); early stopping not met (too few "
        "queries for the percentile); LoadGen: Reduce target QPS to improve latency."
    )
    assert (srv["server_target_qps"], srv["server_scheduled_qps"], srv["server_latency_bound_ms"]) == (
        300,
        283.099,
        0.1,
    )
    assert srv["throughput_samples_per_s"] == 282.892 and srv["server_overlatency_queries"] == 288

    off = result_columns(read_detail(DATA / "offline-invalid-detail.txt"), wall_s=1.0)
    assert off["samples_timed"] == 1100 and off["figure_of_merit"] == 188629
    assert off["latency_p99_ms"] is None  # one query spans the whole test: no per-query latency
    assert off["invalid_reasons"].startswith("minimum duration not met; LoadGen: Increase expected QPS")


def test_the_server_search_bisects_to_the_boundary():
    from accelbench.scenarios.loadgen.search import find_peak_qps

    boundary = 700.0  # VALID at or below
    found = find_peak_qps(lambda q: (q <= boundary, q), upper_qps=1000.0, steps=6)
    assert [q for q, _ in found.probes] == [500.0, 750.0, 625.0, 687.5, 718.75, 703.125]
    assert found.best_qps == 687.5 and found.lowest_invalid_qps == 703.125
    every = find_peak_qps(lambda q: (True, q), upper_qps=64.0, steps=3)
    assert every.best_qps == 56.0 and every.lowest_invalid_qps is None  # the capacity bound itself is never probed
    none = find_peak_qps(lambda q: (False, q), upper_qps=8.0, steps=3)
    assert none.best_qps is None and none.lowest_invalid_qps == 1.0
    with pytest.raises(ValueError):
        find_peak_qps(lambda q: (True, q), upper_qps=0.0)


def test_settings_short_tests_and_mlperf_rules():
    import mlperf_loadgen as lg

    from accelbench.scenarios.loadgen.settings import TestPlan, build_settings
    from accelbench.scenarios.loadgen.sut import batch_sizes_built

    ms = build_settings(lg, TestPlan(scenario="MultiStream", min_duration_s=2.0, expected_latency_s=0.004))
    # 2x margins: LoadGen pre-generates min_duration / expected latency queries (Offline: expected QPS x min_duration
    # samples), and a test that runs out of them before its minimum duration is INVALID
    assert (ms.min_duration_ms, ms.min_query_count, ms.multi_stream_expected_latency_ns) == (2000, 662, 2_000_000)
    off = build_settings(lg, TestPlan(scenario="Offline", expected_qps=1000.0))
    assert off.offline_expected_qps == 2000.0
    srv = build_settings(lg, TestPlan(scenario="Server", server_qps=250.0, server_latency_ms=15.0))
    assert (srv.server_target_qps, srv.server_target_latency_ns, srv.server_target_latency_percentile) == (
        250.0,
        15_000_000,
        0.99,
    )
    rules = build_settings(lg, TestPlan(scenario="Offline", mlperf_rules=True, model="resnet50"))
    assert (rules.min_duration_ms, rules.min_query_count) == (600_000, 24576)  # LoadGen's mlperf.conf
    assert batch_sizes_built("Server", 256) == [1, 4, 16, 64, 256] and batch_sizes_built("Server", 100) == [
        1,
        4,
        16,
        64,
        100,
    ]
    assert batch_sizes_built("Offline", 256) == [256] and batch_sizes_built("SingleStream", 1) == [1]


# --- end to end ---------------------------------------------------------------------------------------
def _loadgen(db: Path, *args: str) -> subprocess.CompletedProcess:
    p = run_cli("loadgen", *TINY, "--db", str(db), *args, env={"OMP_NUM_THREADS": "1"})
    assert "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    return p


def test_every_scenario_gives_a_valid_row_with_derived_columns_and_logs(tmp_path: Path):
    db = tmp_path / "lg.db"
    p = _loadgen(db, "--server-target-qps", "300", "--server-latency-ms", "200")
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["loadgen_scenario"]: r for r in cases(db)}
    assert sorted(rows) == ["MultiStream", "Offline", "Server", "SingleStream"]
    assert {r["result_validity"] for r in rows.values()} == {"VALID"}, {
        k: r["invalid_reasons"] for k, r in rows.items()
    }
    assert [rows[s]["batch_size"] for s in ("SingleStream", "MultiStream", "Server", "Offline")] == [1, 8, 16, 16]
    assert rows["MultiStream"]["samples_per_query"] == 8 and rows["MultiStream"]["queries"] >= 662
    assert rows["Server"]["server_target_qps"] == 300 and rows["Server"]["queries"] >= 662
    for _sc, r in rows.items():
        assert r["figure_of_merit"] > 0 and r["samples_timed"] > 0 and r["timed_wall_s"] >= MIN_DURATION_S
        assert r["cost_per_1000_samples_usd"] > 0 and r["validity"] is not None and r["price_per_hour_usd"] > 0
        assert (Path(r["loadgen_log_dir"]) / "mlperf_log_summary.txt").exists()
        assert Path(r["loadgen_log_dir"]).is_relative_to(tmp_path / "lg-loadgen" / "run1")
        assert " @ " in r["loadgen_version"]  # LoadGen's own record of its version and commit, from its log
    assert "Server" in p.stdout and "VALID" in p.stdout


def test_a_missed_latency_bound_is_invalid_with_the_reason_and_the_search_stores_its_probes(tmp_path: Path):
    # a forward that stalls 20 ms every tenth call misses a 5 ms p99 bound at any rate (a bound below what one
    # query takes here is not run at all: tests/test_faults_measure.py)
    db = tmp_path / "lg.db"
    p = _loadgen(
        db,
        "--scenarios",
        "server",
        "--server-latency-ms",
        "5",
        "--server-search-steps",
        "2",
        "--min-query-count",
        "50",
        "--model",
        "measure_helpers:jittery",
    )
    assert p.returncode == 0, p.stdout + p.stderr  # INVALID is a result, not a failure
    probes = [r for r in cases(db) if r["row_type"] == "server-probe"]
    (row,) = [r for r in cases(db) if r["row_type"] is None]
    assert len(probes) == 2 and {r["result_validity"] for r in probes} == {"INVALID"}
    assert row["result_validity"] == "INVALID" and row["server_peak_qps"] is None and row["server_search_probes"] == 2
    assert "latency bound not met" in row["invalid_reasons"] and "> 5 ms" in row["invalid_reasons"]
    assert "INVALID: measure_helpers:jittery bs=16 fp32 eager Server: latency bound not met" in p.stdout
    assert row["server_lowest_invalid_qps"] == pytest.approx(
        probes[-1]["server_target_qps"], rel=1e-3
    )  # logged rounded
    assert probes[-1]["server_target_qps"] < probes[0]["server_target_qps"]
    # the report: the case's row, every probe, LoadGen's reason; `compare` reads the case, not its probes
    md = tmp_path / "lg.md"
    r = run_cli("report", "--db", str(db), "--markdown", str(md))
    assert r.returncode == 0, r.stdout + r.stderr
    text = md.read_text()
    assert "MLPerf LoadGen scenarios" in text and "Server search: every probe" in text
    assert "latency bound not met" in text and text.count("INVALID") >= 3
    from accelbench.core.rundata import load_run
    from accelbench.store import Store

    assert len(load_run(Store(db), 1).cases) == 1


def test_accuracy_mode_agrees_with_run(tmp_path: Path):
    db = tmp_path / "lg.db"
    p = run_cli(
        "loadgen",
        "--model",
        "cifar-resnet20",
        "--device",
        "cpu",
        "--images",
        "64",
        "--idle-s",
        "0",
        "--min-duration-s",
        "0.5",
        "--scenarios",
        "Offline",
        "--max-batch",
        "32",
        "--accuracy",
        "--db",
        str(db),
        env={"OMP_NUM_THREADS": "1"},
    )
    assert p.returncode == 0, p.stdout + p.stderr
    r = run_cli(
        "run",
        "--model",
        "cifar-resnet20",
        "--device",
        "cpu",
        "--images",
        "64",
        "--idle-s",
        "0",
        "--batch-sizes",
        "32",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lg_row, run_row = cases(db, 1)[0], cases(db, 2)[0]
    assert lg_row["accuracy_samples"] == run_row["accuracy_samples"] == 64
    assert lg_row["top1"] == run_row["top1"] and lg_row["top5"] == run_row["top5"] and lg_row["top1"] > 0.5


def test_ctrl_c_keeps_the_finished_scenarios_and_resume_runs_the_rest(tmp_path: Path):
    """End to end: a real process, sent Ctrl-C (SIGINT): exit 130, the finished scenario stored; ``--resume`` runs
    the rest."""
    # MultiStream second, not Offline: Offline's one query is sized from the bare forward time, which for this
    # tiny CPU model underestimates LoadGen's per-sample host cost ~20x (a 45 s test where 2 s are asked for).
    # MultiStream's 8-sample queries wait at the gate (signal_helpers) until the signal has arrived: the Ctrl-C
    # always finds SingleStream stored and MultiStream running, however slow the machine.
    db = tmp_path / "lg.db"
    gate = Gate(tmp_path, batch=2)
    lg = [
        "loadgen",
        "--model",
        "signal_helpers:gated_net",
        *TINY[2:],
        "--scenarios",
        "SingleStream,MultiStream",
        "--db",
        str(db),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", *lg],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env({"OMP_NUM_THREADS": "1", **gate.env()}),
        preexec_fn=takes_ctrl_c,
    )
    wait_for(lambda: stored_rows(db) and gate.reached(), proc, label="SingleStream stored, MultiStream at the gate")
    gate.signal(lambda: proc.send_signal(signal.SIGINT))  # MultiStream then ends its test; the Ctrl-C stops the rest
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in out + err and "rerun with --resume" in err
    assert runs(db) == [(1, "loadgen", "interrupted")] and [r["loadgen_scenario"] for r in cases(db)] == [
        "SingleStream"
    ]
    p = run_cli(*lg, "--resume", env={"OMP_NUM_THREADS": "1"})
    assert p.returncode == 0, p.stdout + p.stderr
    assert runs(db) == [(1, "loadgen", "complete")]
    assert [r["loadgen_scenario"] for r in cases(db)] == ["SingleStream", "MultiStream"]


def test_a_missing_loadgen_is_one_line_naming_the_extra(tmp_path: Path):
    (tmp_path / "mlperf_loadgen.py").write_text("raise ImportError('not installed here')\n")
    path = cli_env()["PYTHONPATH"]
    p = run_cli("loadgen", *TINY, "--db", str(tmp_path / "lg.db"), env={"PYTHONPATH": f"{tmp_path}:{path}"})
    (line,) = p.stderr.strip().splitlines()
    assert p.returncode == 2 and line.startswith("error: mlcommons-loadgen "), p.stdout + p.stderr
    assert line.endswith("accelbench loadgen needs it: pip install 'accelbench[loadgen]'"), line
    assert runs(tmp_path / "lg.db") == []
