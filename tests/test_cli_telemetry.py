"""Telemetry, validity and cost columns of real CPU sweeps; the `cost` and `telemetry` commands."""

import pytest
from conftest import run_cli, tiny_case
from specs import build_spec

from accelbench.api import run as run_sweep
from accelbench.cost.compare import cost_comparison
from accelbench.cost.prices import load_prices
from accelbench.store import Store

FAST = tiny_case(batch_sizes="8", images=16, warmup_batches=1, min_timed_batches=3, min_time_s=0.0)


@pytest.fixture(scope="module")
def store_path(tmp_path_factory):
    db = tmp_path_factory.mktemp("tele") / "t.db"
    over = run_sweep(
        build_spec({**FAST, "price_per_hour": 3.6, "kwh_price": 0.5, "telemetry_period_ms": 20}, cuda=False), Store(db)
    )
    listed = run_sweep(build_spec({**FAST, "precisions": "fp32,bf16"}, cuda=False), Store(db))
    return db, over, listed


def test_cpu_case_has_telemetry_validity_and_cost_columns(store_path):
    db, over, listed = store_path
    r = over.records[0]
    assert r["status"] == "ok" and r["telemetry_period_ms"] == 20 and r["telemetry_samples"] >= 1
    assert r["process_cpu_util_pct"] > 0 and r["process_rss_max_bytes"] > 0
    assert r["energy_source"] in ("rapl", "not available") and r["idle_power_source"] == "not available"
    assert r["validity"] and r["validity_checks"] == "spread,cpu,outputs"
    # $3.6/h = $0.001/s: cost of 16 images = 0.001 * 16 / throughput
    assert r["cost_usd"] == pytest.approx(0.001 * 16 / r["throughput_samples_per_s"])
    assert r["cost_per_1000_samples_usd"] == pytest.approx(1.0 / r["throughput_samples_per_s"])
    assert r["price_source"] == "--price-per-hour / config" and r["kwh_price_usd"] == 0.5
    assert len(Store(db).series(r["case_id"], "cpu_t_s")) == r["telemetry_samples"]
    # without an override a CPU run is priced per vCPU of the comparable instance in the list
    vcpu = next(e for e in load_prices() if e.per == "vcpu").usd_per_hour
    env = Store(db).run(listed.run_id)["env"]
    assert listed.records[0]["price_per_hour_usd"] == pytest.approx(vcpu * env["cpu_count"])


def test_cost_comparison_best_rows_and_reprice(store_path):
    db, over, listed = store_path
    rows = cost_comparison(Store(db))
    # one best row per (device, model, precision, mode): fp32 (best of both runs) and bf16
    assert sorted(r["precision"] for r in rows) == ["bf16", "fp32"]
    fp32 = [r for r in over.records + listed.records if r["precision"] == "fp32"]
    best = max(fp32, key=lambda r: r["throughput_samples_per_s"])
    assert next(r for r in rows if r["precision"] == "fp32")["case_id"] == best["case_id"]
    again = cost_comparison(Store(db), over.run_id, price_per_hour=7.2)
    assert again[0]["cost_per_1000_samples_usd"] == pytest.approx(2.0 / over.records[0]["throughput_samples_per_s"])
    assert again[0]["price_source"] == "--price-per-hour / config"


def test_cost_and_telemetry_commands(store_path):
    db, over, _ = store_path
    p = run_cli("cost", "--db", str(db), check=True)
    assert "Cost comparison (all runs; best throughput" in p.stdout and "cifar-resnet20 bs=8 bf16 eager" in p.stdout
    assert "$/1,000 images" in p.stdout and "vCPU x AWS c6i" in p.stdout
    one = run_cli("cost", "--db", str(db), "--run", str(over.run_id), check=True)
    assert f"Cost comparison (run {over.run_id};" in one.stdout and "price: --price-per-hour / config" in one.stdout
    t = run_cli("telemetry", "--db", str(db), check=True)
    assert "CPU proc (%)" in t.stdout and "telemetry" in t.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["run", "--telemetry-period-ms", "3"],
            "invalid telemetry_period_ms 3.0: allowed 0 (sampler off) or 5..60000 ms",
        ),
        (["cost", "--run", "99"], "no run 99"),
    ],
)
def test_bad_input_one_line_error(store_path, tmp_path, args, needle):
    db = tmp_path / "x.db" if args[0] == "run" else store_path[0]
    p = run_cli(*args, "--db", str(db))
    lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr
