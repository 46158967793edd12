"""The real NVML sampler on a GPU (marker ``gpu``; skipped without CUDA)."""

import time

import pytest

from accelbench.telemetry.energy import integrate_power_j

pytestmark = pytest.mark.gpu


def _busy(seconds: float):
    """Keep the GPU busy with real matmuls for about ``seconds``; return the bytes the tensors hold."""
    import torch

    a = torch.randn(4096, 4096, device="cuda")
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            a = (a @ a).tanh_()
        torch.cuda.synchronize()
    return a.numel() * a.element_size()


def test_sampler_under_load_reads_every_signal():
    import torch

    from accelbench.telemetry import monitor

    dev = torch.device("cuda", 0)
    with monitor(dev, 0.01) as mon:
        held = _busy(1.5)
    rec, raw, series = mon.record(), mon.raw(), mon.series()
    # the 10 ms period is kept: at least half the ideal number of samples
    assert rec["telemetry_samples"] >= 0.5 * rec["telemetry_window_s"] / 0.01
    assert rec["power_min_w"] <= rec["power_mean_w"] <= rec["power_max_w"] and rec["power_min_w"] > 0
    assert rec["power_source"] in ("instant", "average")
    assert rec["gpu_util_mean_pct"] > 50 and rec["device_mem_used_bytes"] >= held
    assert rec["sm_clock_mean_mhz"] > 0 and rec["temp_max_c"] > 0 and rec["clocks_event_reasons"] is not None
    assert rec["energy_source"] == "nvml-counter" and rec["energy_j"] > 0
    # the energy counter agrees with the integral of the instantaneous power samples
    s = raw["samples"]["gpu0"]
    integral = integrate_power_j([x["t_s"] for x in s], [x["power_w"] for x in s])
    assert rec["energy_j"] == pytest.approx(integral, rel=0.15)
    assert rec["gpm_status"] == "ok" or rec["gpm_status"].startswith("not available")
    if rec["gpm_status"] == "ok":
        assert 0 < rec["gpm_sm_util_pct"] <= 100
    assert len(series["nvml_power_w"]) == len(series["nvml_t_s"]) == rec["telemetry_samples"]
    assert rec["other_gpu_processes"] in (None, 0)


def test_idle_power_is_below_loaded_power():
    import torch

    from accelbench.telemetry import measure_idle, monitor

    dev = torch.device("cuda", 0)
    idle = measure_idle(dev, 1.0)
    with monitor(dev, 0.1) as mon:
        _busy(1.0)
    busy = mon.record()
    assert idle["idle_power_source"] == "nvml-counter" and 0 < idle["idle_power_w"]
    assert idle["idle_power_w"] < busy["energy_j"] / busy["energy_window_s"]


def test_sweep_rows_carry_telemetry_energy_validity_cost(db):
    from specs import build_spec

    from accelbench.api import run as run_sweep
    from accelbench.store import Store

    spec = build_spec(
        {
            "model": "cifar-resnet20",
            "batch_sizes": "32",
            "precisions": "fp32,amp-bf16",
            "modes": "eager",
            "images": 256,
            "min_time_s": 1.0,
            "idle_s": 1.0,
            "kwh_price": 0.2,
        },
        cuda=True,
    )
    out = run_sweep(spec, Store(db))
    for r in out.records:
        assert r["status"] == "ok", r.get("error")
        assert r["energy_per_sample_j"] == pytest.approx(r["energy_j"] / r["samples_timed"])
        assert r["validity"] and {"spread", "throttle", "clocks"} <= set(r["validity_checks"].split(","))
        assert r["idle_power_w"] > 0 and r["energy_above_idle_j"] < r["energy_j"]
        assert r["price_per_hour_usd"] is not None and r["cost_per_1000_samples_usd"] > 0
        assert r["electricity_cost_per_1000_samples_usd"] == pytest.approx(
            r["energy_per_sample_j"] * 1000 / 3.6e6 * 0.2
        )
    st = Store(db)
    case = out.records[0]["case_id"]
    assert len(st.series(case, "nvml_power_w")) == out.records[0]["telemetry_samples"]
