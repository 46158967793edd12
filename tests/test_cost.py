"""Cost maths with exact numbers, the shipped price list, device matching, the cost comparison."""

import pytest

from accelbench.cost import best_rows, cost_columns, recost
from accelbench.cost.prices import PRICES_FILE, load_prices, match_gpu, quote


def entry(key):
    return next(e for e in load_prices() if e.key == key)


def test_cost_columns_exact():
    c = cost_columns(
        seconds=36.0, samples=1000, usd_per_hour=10.0, price_source="list", energy_per_sample_j=3.6, usd_per_kwh=0.5
    )
    assert c["cost_usd"] == pytest.approx(0.1, abs=1e-15)
    assert c["cost_per_1000_samples_usd"] == pytest.approx(0.1, abs=1e-15)
    # 3.6 J/sample * 1000 samples = 3600 J = 0.001 kWh -> $0.0005
    assert c["electricity_cost_per_1000_samples_usd"] == pytest.approx(0.0005, abs=1e-15)
    assert c["electricity_cost_usd"] == pytest.approx(0.0005, abs=1e-15)
    assert c["price_per_hour_usd"] == 10.0 and c["price_source"] == "list" and c["kwh_price_usd"] == 0.5


def test_unknown_price_is_none_never_zero():
    c = cost_columns(seconds=36.0, samples=1000, usd_per_hour=None, energy_per_sample_j=None, usd_per_kwh=0.3)
    assert c["cost_usd"] is None and c["cost_per_1000_samples_usd"] is None
    assert c["electricity_cost_usd"] is None and c["price_source"].startswith("unknown")
    assert quote(device_type="cuda", device_name="NVIDIA RTX PRO 9000 Imaginary") is None


@pytest.mark.parametrize(
    "name,mem_gib,key",
    [
        ("NVIDIA H100 80GB HBM3", None, "h100"),
        ("NVIDIA H100 PCIe", None, "h100"),
        ("NVIDIA H200", None, "h200"),
        ("NVIDIA H200 NVL", None, "h200"),
        ("NVIDIA A100-SXM4-40GB", None, "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", None, "a100-80gb"),
        ("NVIDIA A100 80GB PCIe", None, "a100-80gb"),
        ("NVIDIA A100-PCIE-40GB", None, "a100-40gb"),
        ("NVIDIA A100", 79.2, "a100-80gb"),
        ("NVIDIA A100", 39.4, "a100-40gb"),
        ("NVIDIA L4", None, "l4"),
        ("Tesla T4", None, "t4"),
        ("Tesla V100-SXM2-16GB", None, "v100"),
        ("Tesla V100-PCIE-32GB", None, "v100"),
        ("Tesla P100-PCIE-16GB", None, "p100"),
        ("NVIDIA GH200 480GB", None, None),
        ("NVIDIA L40S", None, None),
        ("NVIDIA GeForce RTX 4090", None, None),
    ],
)
def test_nvml_names_match_the_right_entry(name, mem_gib, key):
    e = match_gpu(name, mem_gib * 2**30 if mem_gib else None)
    assert (e.key if e else None) == key


def test_price_file_has_every_required_device_with_source_and_date():
    prices = load_prices()
    keys = {e.key for e in prices}
    assert {"h100", "h200", "a100-40gb", "a100-80gb", "l4", "t4", "v100", "p100", "cpu-c6i"} <= keys
    for e in prices:
        assert e.usd_per_hour > 0 and e.source and e.date[:2] == "20" and e.instance
    assert entry("h200").estimate is True and PRICES_FILE.name == "prices.toml"


def test_quote_scales_with_devices_and_override_wins():
    q = quote(device_type="cuda", device_name="NVIDIA H100 80GB HBM3", n_devices=4)
    assert q.usd_per_hour == pytest.approx(4 * entry("h100").usd_per_hour) and "p5.48xlarge" in q.source
    q = quote(device_type="cuda", device_name="unknown", n_devices=2, override_usd_per_hour=2.5)
    assert q.usd_per_hour == 5.0 and q.source == "--price-per-hour / config"
    q = quote(device_type="cpu", device_name="Xeon", vcpus=8)
    assert q.usd_per_hour == pytest.approx(8 * entry("cpu-c6i").usd_per_hour) and q.source.startswith("8 vCPU x ")
    assert quote(device_type="cpu", device_name="Xeon", vcpus=None) is None


def test_best_rows_one_per_device_precision_mode():
    rows = [
        {
            "device_name": "A",
            "model": "m",
            "precision": "fp32",
            "mode": "eager",
            "status": "ok",
            "throughput_samples_per_s": 100.0,
            "batch_size": 1,
        },
        {
            "device_name": "A",
            "model": "m",
            "precision": "fp32",
            "mode": "eager",
            "status": "ok",
            "throughput_samples_per_s": 300.0,
            "batch_size": 8,
        },
        {
            "device_name": "A",
            "model": "m",
            "precision": "fp32",
            "mode": "eager",
            "status": "oom",
            "throughput_samples_per_s": None,
            "batch_size": 64,
        },
        {
            "device_name": "B",
            "model": "m",
            "precision": "fp32",
            "mode": "eager",
            "status": "ok",
            "throughput_samples_per_s": 200.0,
            "batch_size": 8,
        },
        {
            "device_name": "A",
            "model": "m",
            "precision": "amp-bf16",
            "mode": "eager",
            "status": "ok",
            "throughput_samples_per_s": None,
            "batch_size": 8,
        },
    ]
    best = best_rows(rows)
    assert [(r["device_name"], r["batch_size"]) for r in best] == [("A", 8), ("B", 8)]


def test_recost_reprices_a_stored_case():
    rec = {"total_time_s": 7.2, "images": 1000, "energy_per_sample_j": 0.36, "cost_usd": 123.0}
    out = recost(rec, usd_per_hour=5.0, price_source="x", usd_per_kwh=0.1)
    assert out["cost_usd"] == pytest.approx(0.01) and out["cost_per_1000_samples_usd"] == pytest.approx(0.01)
    assert out["electricity_cost_per_1000_samples_usd"] == pytest.approx(0.36 * 1000 / 3.6e6 * 0.1)
    assert rec["cost_usd"] == 123.0  # the input is not modified
