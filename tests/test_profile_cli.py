"""`accelbench profile` on the CPU, end to end: analytic counts, timing, ceilings cache, store, charts."""

import json
import sqlite3

import pytest
from conftest import run_cli


def test_profile_cpu_end_to_end(tmp_path):
    db, js, charts = tmp_path / "p.db", tmp_path / "p.json", tmp_path / "charts"
    p = run_cli(
        "profile",
        "--model",
        "helpers:tiny_conv_net",
        "--batch-size",
        "4",
        "--step",
        "inference,train",
        "--device",
        "cpu",
        "--timed-steps",
        "3",
        "--db",
        str(db),
        "--json",
        str(js),
        "--charts",
        str(charts),
        check=True,
    )
    assert "Ceilings of" in p.stdout and "measured now" in p.stdout
    assert "ncu skipped: ncu profiles CUDA GPUs only" in p.stdout
    assert "ops FlopCounterMode does not count: aten.relu x1" in p.stdout
    doc = json.loads(js.read_text())
    assert doc["kind"] == "profile" and doc["spec"]["steps"] == ["inference", "train"]
    assert doc["ceilings"]["matmul_flops_per_s"]["fp32"] > 0 and doc["ceilings"]["dram_bytes_per_s"] > 0
    inf, train = doc["results"]
    assert inf["step"] == "inference" and train["step"] == "train"
    assert inf["status"] == "ok" and inf["analytic_flops"] == 4 * 37_888 and inf["params"] == 5_346
    assert train["analytic_forward_flops"] == inf["analytic_flops"] < train["analytic_flops"]
    for r in (inf, train):
        assert r["ncu_status"] == "skipped" and r["kernels"] == []
        assert r["step_time_s"] > 0 and r["steps_timed"] == 3
        assert r["achieved_flops_per_s"] == pytest.approx(r["analytic_flops"] / r["step_time_s"])
        assert r["theoretical_time_s"] == pytest.approx(
            max(r["analytic_flops"] / r["ceiling_flops_per_s"], r["analytic_min_bytes"] / r["ceiling_dram_bytes_per_s"])
        )
        assert r["measured_vs_theoretical"] == pytest.approx(r["step_time_s"] / r["theoretical_time_s"])
        assert r["analytic_bound"] in ("memory", "compute") and r["ceiling_name"] == "fp32"
    assert sorted(f.name for f in charts.iterdir()) == sorted(
        f"tiny_conv_net-{s}-fp32-bs4-eager-model.{e}".replace("tiny", "helpers_tiny")
        for s in ("inference", "train")
        for e in ("png", "svg")
    )
    # a second profile reuses the cached ceilings of this device
    p2 = run_cli(
        "profile",
        "--model",
        "helpers:tiny_conv_net",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--db",
        str(db),
        check=True,
    )
    assert "(cached)" in p2.stdout
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT COUNT(*) FROM ceilings").fetchone()[0] == 1
        assert con.execute("SELECT COUNT(*) FROM cases WHERE workload='profile'").fetchone()[0] == 3


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--step", "eval"], "invalid step 'eval': allowed inference, train"),
        (["--ncu", "maybe"], "invalid ncu 'maybe': allowed auto, on, off"),
        (["--precision", "fp64"], "invalid precision 'fp64'"),
        (["--device", "cuda:7"], "invalid device"),
    ],
)
def test_profile_bad_input_one_line(tmp_path, args, needle):
    p = run_cli("profile", "--model", "helpers:tiny_conv_net", *args, "--db", str(tmp_path / "x.db"))
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr


def test_profile_failed_case_is_a_row_and_ncu_on_cpu_is_reported(tmp_path):
    js = tmp_path / "p.json"
    p = run_cli(
        "profile",
        "--model",
        "helpers:broken_model,helpers:tiny_conv_net",
        "--batch-size",
        "2",
        "--device",
        "cpu",
        "--ncu",
        "on",
        "--timed-steps",
        "1",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(js),
    )
    assert p.returncode == 1 and "1 of 2 cases ended in error" in p.stderr, p.stderr  # the exit-code contract
    broken, tiny = json.loads(js.read_text())["results"]
    assert broken["status"] == "error" and "shape mismatch in layer 3" in broken["error"]
    assert tiny["status"] == "ok" and tiny["ncu_status"] == "error" and "CUDA" in tiny["ncu_error"]


def test_profile_fp8_is_quantized_not_refused(tmp_path):
    """fp8 is profiled as ``run`` quantizes it: where it cannot run (here: no FP8 tensor cores) the row names the
    device's reason, not "measured by accelbench run only"."""
    js = tmp_path / "p.json"
    run_cli(
        "profile",
        "--model",
        "cifar-resnet20",
        "--batch-size",
        "2",
        "--precision",
        "fp8",
        "--ncu",
        "off",
        "--device",
        "cpu",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(js),
    )
    rows = json.loads(js.read_text())["results"]
    assert len(rows) == 1 and rows[0]["status"] == "unsupported"
    assert "compute capability" in rows[0]["error"] and "run only" not in rows[0]["error"]
