"""Fault rows of measurement faults, run as a user would (``python -m accelbench``):

- item 17: absurd LoadGen Server settings are refused before LoadGen starts: a rate of 0, NaN or one whose
  minimum query count would stretch the test far past its duration, a latency bound of 0 (exit 2, one line); a
  rate far above the measured capacity or a latency bound below what one query takes here are ``unsupported``
  rows that never start LoadGen; the Server search never probes a rate whose test would overrun;
- item 18: ``input-pipeline`` on a folder of ordinary photos of different sizes resizes each image as ``run`` and
  ``train`` do, and a case without a model is named by its key, not ``?``.
"""

from __future__ import annotations

import pytest
from fault_harness import Fault, cases, check, no_run

from accelbench.core.errors import ConfigError
from accelbench.scenarios.loadgen import settings as st
from accelbench.scenarios.loadgen.search import find_peak_qps

LOADGEN = [
    "loadgen",
    "--model",
    "helpers:tiny_conv_net",
    "--device",
    "cpu",
    "--images",
    "64",
    "--idle-s",
    "0",
    "--min-duration-s",
    "1",
    "--max-batch",
    "16",
    "--scenarios",
    "server",
    "--db",
    "{db}",
]


def test_server_settings_are_checked_before_anything_runs():
    for qps in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="invalid server_target_qps"):
            st.check_server(qps, 15.0, 2.0, None, False)
    with pytest.raises(ConfigError, match="invalid server_latency_ms 0.0"):
        st.check_server(None, 0.0, 2.0, None, False)
    # 662 queries must fit 4 x 2 s: at least 82.75 queries/s
    assert st.slowest_server_qps(2.0, None) == pytest.approx(662 / 8)
    with pytest.raises(ConfigError, match="at least 82.8 queries/s: the Server test's 662 queries would take 662 s"):
        st.check_server(1.0, 15.0, 2.0, None, False)
    st.check_server(1.0, 15.0, 2.0, None, True)  # MLPerf's own durations: not bounded here
    st.check_server(100.0, 15.0, 2.0, None, False)


def test_a_plan_the_model_cannot_meet_is_not_run():
    forward_s = {1: 0.002, 4: 0.004, 16: 0.010}  # capacity at batch 16: 1,600 queries/s; one query >= 1 ms
    server = st.TestPlan(scenario="Server", min_duration_s=2.0, server_latency_ms=15.0)
    assert st.infeasible(server, forward_s, 16) is None
    tight = st.infeasible(st.TestPlan(scenario="Server", server_latency_ms=0.5), forward_s, 16)
    assert "latency bound 0.5 ms is below the least a query takes here (1 ms" in tight
    fast = st.infeasible(st.TestPlan(scenario="Server", server_qps=1e12, min_duration_s=2.0), forward_s, 16)
    assert (
        "over 4x the capacity measured here (1,600 queries/s at batch 16)" in fast
        and "2,000,000,000,000 queries" in fast
    )
    assert st.infeasible(st.TestPlan(scenario="Server", server_qps=6000.0), forward_s, 16) is None  # under 4x
    # MultiStream: 662 queries of 8 samples at 0.1 s = 66 s, over 4 x 2 s
    slow = st.infeasible(st.TestPlan(scenario="MultiStream", min_duration_s=2.0), {8: 0.1}, 8)
    assert "MultiStream's 662 queries take about 66 s here" in slow
    assert (
        st.infeasible(st.TestPlan(scenario="MultiStream", min_duration_s=2.0, mlperf_rules=True), {8: 0.1}, 8) is None
    )


def test_the_server_search_never_probes_below_its_floor():
    seen = []

    def probe(qps):
        seen.append(qps)
        return False, qps  # never VALID: the search halves down

    found = find_peak_qps(probe, 1000.0, steps=6, lowest_qps=100.0)
    assert seen == [500.0, 250.0, 125.0] and found.floor_reached and found.best_qps is None
    assert find_peak_qps(probe, 100.0, steps=6, lowest_qps=100.0).probes == []


def test_a_case_without_a_model_is_named_by_its_key():
    from accelbench.report.table import case_label

    assert case_label({"case_key": "loader|workers=2", "batch_size": 4}) == "loader|workers=2 bs=4"
    assert case_label({"model": float("nan"), "case_key": "resident"}) == "resident"
    assert case_label({"model": "resnet50", "batch_size": 8, "precision": "fp32"}) == "resnet50 bs=8 fp32"


def _not_run(reason: str):
    def check_store(db, tmp):
        rows = cases(db)
        assert len(rows) == 1, rows  # the case's row; no probe row
        r = rows[0]
        assert r["status"] == "unsupported" and reason in r["error"] and r.get("loadgen_log_dir") is None, r
        assert r["forward_ms_at_batch"] > 0  # what was measured before LoadGen would start
        assert not (tmp / "faults-loadgen").exists()  # LoadGen never ran: no logs

    return check_store


def _photos(tmp):
    """A folder of ordinary photos: two classes, four JPEGs each, of four different sizes."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    for cls in ("cats", "dogs"):
        (tmp / "photos" / cls).mkdir(parents=True)
        for i, (w, h) in enumerate([(64, 48), (30, 50), (40, 40), (20, 15)]):
            Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).save(tmp / "photos" / cls / f"{i}.jpg")
    return {}


def _resized(db, tmp):
    rows = cases(db)
    loaders = [r for r in rows if r["source"] in ("loader", "resident")]
    assert rows and len(loaders) == 3 and all(r["status"] == "ok" for r in rows), rows
    assert all(r["image_size"] == 224 and r["loader_samples_per_s"] > 0 for r in loaders)
    assert all("4 image sizes in the data" in r["transform"] for r in loaders)


FAULTS = [
    Fault(
        "loadgen-server-qps-zero",
        [*LOADGEN, "--server-target-qps", "0"],
        2,
        "invalid server_target_qps 0.0: allowed a finite number of queries/s > 0",
        store=no_run,
        one_line=True,
    ),
    Fault(
        "loadgen-server-qps-nan",
        [*LOADGEN, "--server-target-qps", "nan"],
        2,
        "invalid server_target_qps nan",
        store=no_run,
        one_line=True,
    ),
    Fault(
        "loadgen-server-qps-too-slow-for-the-duration",
        [*LOADGEN, "--server-target-qps", "1"],
        2,
        "at least 166 queries/s: the Server test's 662 queries would take 662 s",
        store=no_run,
        one_line=True,
    ),
    Fault(
        "loadgen-server-latency-zero",
        [*LOADGEN, "--server-latency-ms", "0"],
        2,
        "invalid server_latency_ms 0.0: allowed a finite number of milliseconds > 0",
        store=no_run,
        one_line=True,
    ),
    Fault(
        "loadgen-server-qps-far-above-capacity",
        [*LOADGEN, "--server-target-qps", "1e12"],
        0,
        store=_not_run("over 4x the capacity measured here"),
        stdout="LoadGen would pre-generate 1,000,000,000,000 queries",
    ),
    Fault(
        "loadgen-server-latency-below-one-query",
        [*LOADGEN, "--server-latency-ms", "0.0001"],
        0,
        store=_not_run("below the least a query takes here"),
        stdout="no arrival rate meets it; not run",
    ),
    Fault(
        "input-pipeline-photos-of-different-sizes",
        [
            "input-pipeline",
            "--data",
            "{tmp}/photos",
            "--device",
            "cpu",
            "-b",
            "4",
            "-w",
            "0,2",
            "--min-batches",
            "2",
            "--db",
            "{db}",
        ],
        0,
        setup=_photos,
        store=_resized,
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.id)
def test_fault(fault, tmp_path):
    if fault.args[0] == "loadgen":
        pytest.importorskip("mlperf_loadgen")
    check(fault, tmp_path)
