"""Replay NVML samples captured on an H200 (tests/data, see benchmarks/telemetry_overhead.py capture)
through the aggregation, energy, validity and storage code. Expected values are recomputed here from
the raw samples, never copied from a run."""

import gzip
import json
import statistics
from pathlib import Path

import pytest

from accelbench.core.validity import assess
from accelbench.store import Store
from accelbench.sweep.derived import SweepContext, derived_columns
from accelbench.telemetry import _columns
from accelbench.telemetry.aggregate import SIGNALS, combine, gpu_record
from accelbench.telemetry.energy import counter_update_s, integrate_power_j
from accelbench.telemetry.sources.cpu import cpu_record

DATA = json.loads(gzip.decompress((Path(__file__).parent / "data" / "nvml_samples_h200.json.gz").read_bytes()))
WINDOWS = DATA["windows"]
LOADS = ["load_10ms", "load_100ms"]


def replay(name, samples=None):
    w = WINDOWS[name]
    c = w["counters"]["gpu0"]
    return gpu_record(samples or w["samples"]["gpu0"], c["begin"], c["end"], w["info"]["gpu0"], w["window_s"])


def test_capture_is_from_a_hopper_gpu_with_every_source():
    assert DATA["device"]["gpu_name"] == "NVIDIA H200"
    for w in WINDOWS.values():
        assert {"gpu0", "cpu"} <= set(w["samples"]) and len(w["samples"]["gpu0"]) >= 10


@pytest.mark.parametrize("name", list(WINDOWS))
def test_min_mean_max_and_energy_match_the_raw_samples(name):
    w, r = WINDOWS[name], replay(name)
    s, c = w["samples"]["gpu0"], w["counters"]["gpu0"]
    for key, prefix, unit in SIGNALS:
        vals = [x[key] for x in s if x.get(key) is not None]
        assert vals, key  # the H200 gives every signal
        assert r[f"{prefix}_min_{unit}"] == min(vals) and r[f"{prefix}_max_{unit}"] == max(vals)
        assert r[f"{prefix}_mean_{unit}"] == pytest.approx(statistics.fmean(vals))
    assert r["energy_source"] == "nvml-counter"
    assert r["energy_j"] == (c["end"]["energy_mj"] - c["begin"]["energy_mj"]) / 1000
    window = c["end"]["t"] - c["begin"]["t"]
    upd = counter_update_s([x["t_s"] for x in s], [x["energy_mj"] for x in s])
    assert r["energy_uncertainty_pct"] == pytest.approx(100 * upd / window)
    assert r["energy_confidence"] == ("ok" if upd / window <= 0.05 else "low")
    assert (
        r["power_source"] == w["info"]["gpu0"]["power_source"] and r["pcie_source"] == w["info"]["gpu0"]["pcie_source"]
    )
    for k, v in c["end"]["gpm_window"].items():
        assert r.get(k, v) == v
    assert r["device_mem_used_bytes"] == max(x["mem_used_bytes"] for x in s)


@pytest.mark.parametrize("name", LOADS)
def test_counter_energy_agrees_with_integrated_instant_power(name):
    s = WINDOWS[name]["samples"]["gpu0"]
    r = replay(name)
    integral = integrate_power_j([x["t_s"] for x in s], [x["power_w"] for x in s])
    # the counter's window is a little longer than the samples' span; compare mean powers
    span = s[-1]["t_s"] - s[0]["t_s"]
    assert r["energy_j"] / r["energy_window_s"] == pytest.approx(integral / span, rel=0.10)


def test_load_draws_more_than_idle_and_nvml_util_overstates_sm_activity():
    idle = replay("idle_100ms")
    for name in LOADS:
        r = replay(name)
        assert r["energy_j"] / r["energy_window_s"] > idle["energy_j"] / idle["energy_window_s"]
        assert r["gpm_sm_util_pct"] > 10 * idle["gpm_sm_util_pct"]
        # "GPU utilisation" = time any kernel ran; GPM SM activity = how many SMs were busy
        assert r["gpu_util_mean_pct"] > r["gpm_sm_util_pct"]
    # the energy counter updates far more slowly than a 10 ms sampler reads it
    s = WINDOWS["load_10ms"]["samples"]["gpu0"]
    period = statistics.median(b["t_s"] - a["t_s"] for a, b in zip(s, s[1:]))
    assert counter_update_s([x["t_s"] for x in s], [x["energy_mj"] for x in s]) > 5 * period


def test_validity_on_replayed_windows_and_an_injected_power_cap():
    r = replay("load_100ms")
    base = {**r, "latency_spread": 0.01, "telemetry_window_s": WINDOWS["load_100ms"]["window_s"]}
    if r["throttle_samples"] == 0 and (r["sm_clock_variation"] or 0) <= 0.05:
        assert assess(base) == {
            "validity": "ok",
            "validity_reason": None,
            "validity_checks": "spread,throttle,clocks,processes",
        }
    s = [dict(x) for x in WINDOWS["load_100ms"]["samples"]["gpu0"]]
    for x in s[len(s) // 2 :]:
        x["clocks_event_reasons"] |= 0x4  # SW power cap on the second half
    capped = replay("load_100ms", s)
    n_capped = len(s) - len(s) // 2
    assert capped["throttle_samples"] == n_capped and capped["throttle_sample_frac"] == pytest.approx(n_capped / len(s))
    out = assess({**capped, "latency_spread": 0.01})
    assert out["validity"] == "throttled"
    assert (
        f"for {100 * n_capped / len(s):.1f}% of the window" in out["validity_reason"]
        and "sw_power_cap" in out["validity_reason"]
    )


def test_derived_columns_on_a_replayed_case():
    idle = replay("idle_100ms")
    idle_w = idle["energy_j"] / idle["energy_window_s"]
    r = replay("load_100ms")
    rec = {
        **r,
        "status": "ok",
        "samples_timed": 5000,
        "total_time_s": 0.5,
        "images": 1000,
        "latency_spread": 0.01,
        "telemetry_window_s": r["energy_window_s"],
    }
    from accelbench.cost.prices import quote

    price = quote(
        device_type="cuda", device_name=DATA["device"]["gpu_name"], mem_bytes=DATA["device"]["gpu_mem_total_bytes"]
    )
    ctx = SweepContext(device_name="NVIDIA H200", idle={"idle_power_w": idle_w}, price=price, kwh_price_usd=0.25)
    d = derived_columns(rec, ctx)
    assert d["energy_per_sample_j"] == pytest.approx(r["energy_j"] / 5000)
    assert d["energy_above_idle_j"] == pytest.approx(r["energy_j"] - idle_w * r["energy_window_s"])
    assert d["energy_above_idle_per_sample_j"] == pytest.approx(d["energy_above_idle_j"] / 5000)
    assert d["cost_usd"] == pytest.approx(price.usd_per_hour * 0.5 / 3600)
    assert d["cost_per_1000_samples_usd"] == pytest.approx(d["cost_usd"])
    assert d["electricity_cost_per_1000_samples_usd"] == pytest.approx(d["energy_per_sample_j"] * 1000 / 3.6e6 * 0.25)
    assert d["idle_power_w"] == idle_w and d["validity_checks"].startswith("spread")
    assert derived_columns({"status": "oom"}, ctx) == {"device_name": "NVIDIA H200", "idle_power_w": idle_w}


def test_two_replayed_gpus_combine():
    a, b = replay("load_10ms"), replay("idle_100ms")
    c = combine([a, b])
    assert c["energy_j"] == pytest.approx(a["energy_j"] + b["energy_j"])
    assert c["power_mean_w"] == pytest.approx(a["power_mean_w"] + b["power_mean_w"])
    assert c["temp_max_c"] == max(a["temp_max_c"], b["temp_max_c"]) and c["gpus_monitored"] == 2


def test_cpu_side_of_the_capture():
    w = WINDOWS["load_10ms"]
    c = w["counters"]["cpu"]
    r = cpu_record(w["samples"]["cpu"], c["begin"], c["end"])
    wall = c["end"]["t"] - c["begin"]["t"]
    assert r["process_cpu_util_pct"] == pytest.approx(
        100 * (c["end"]["process_cpu_s"] - c["begin"]["process_cpu_s"]) / wall
    )
    assert r["process_rss_max_bytes"] >= max(x["rss_bytes"] for x in w["samples"]["cpu"])


def test_raw_series_are_stored_with_the_case(db):
    s = WINDOWS["load_10ms"]["samples"]["gpu0"]
    series = _columns(s, "nvml_")
    assert len(series["nvml_t_s"]) == len(s) and all(len(v) == len(s) for v in series.values())
    st = Store(db)
    run = st.begin_run("inference", {}, "x", {})
    case = st.add_case(run, {"case_key": "k", "workload": "inference", "status": "ok", **replay("load_10ms")}, series)
    assert st.series(case, "nvml_power_w") == [x["power_w"] for x in s]
    assert st.series(case, "nvml_clocks_event_reasons") == [x["clocks_event_reasons"] for x in s]
    row = st.cases(run).iloc[0]
    assert row["energy_j"] == replay("load_10ms")["energy_j"] and row["energy_source"] == "nvml-counter"
