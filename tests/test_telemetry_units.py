"""Telemetry arithmetic with exact numbers, the sampler thread, and the CPU path for real."""

import time

import pytest

from accelbench.telemetry import energy as en
from accelbench.telemetry.aggregate import clock_variation, combine, counter_rate, decode_reasons, gpu_record
from accelbench.telemetry.sampler import Sampler
from accelbench.telemetry.sources.cpu import cpu_record
from accelbench.telemetry.sources.rapl import rapl_delta_j, rapl_zones


def test_energy_helpers_exact():
    assert en.counter_energy_j(1_000, 61_000) == 60.0
    assert en.counter_energy_j(5, 4) is None and en.counter_energy_j(None, 4) is None
    # trapezoids: 0.1 * (100 + 200) / 2 + 0.1 * (200 + 300) / 2 = 40 J; a missing power is skipped
    assert en.integrate_power_j([0.0, 0.1, 0.15, 0.2], [100, 200, None, 300]) == pytest.approx(40.0)
    assert en.integrate_power_j([0.0], [100]) is None
    # counter changes 3 times over 0.6 s of samples -> 0.2 s between updates
    assert en.counter_update_s([0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0, 0, 5, 5, 9, 9, 12]) == pytest.approx(0.2)
    assert en.counter_update_s([0, 0.1], [7, 7]) is None
    assert en.confidence(2.0, 0.02) == (pytest.approx(0.01), "ok")
    assert en.confidence(0.25, 0.02) == (pytest.approx(0.08), "low")
    assert en.confidence(2.0, None) == (pytest.approx(0.05), "ok")  # the default 100 ms, exactly at the limit
    assert en.confidence(0.0, 0.02) == (None, "low")


def test_per_sample_and_above_idle_exact():
    out = en.per_sample_columns(100.0, 50, window_s=2.0, idle_power_w=20.0)
    assert out == {"energy_per_sample_j": 2.0, "energy_above_idle_j": 60.0, "energy_above_idle_per_sample_j": 1.2}
    assert en.per_sample_columns(100.0, 50)["energy_above_idle_j"] is None
    assert set(en.per_sample_columns(None, 50).values()) == {None}


def test_counter_rate_handles_a_32_bit_wrap():
    assert counter_rate(1_000, 51_000, 0.1) == pytest.approx(500_000.0)
    # 2**32 - 1000 -> 4000: the counter wrapped; 5000 bytes in 0.01 s
    assert counter_rate(2**32 - 1_000, 4_000, 0.01) == pytest.approx(500_000.0)
    assert counter_rate(None, 5, 0.1) is None and counter_rate(1, 5, 0.0) is None


def test_decode_reasons():
    assert decode_reasons(0x5) == ["gpu_idle", "sw_power_cap"]
    assert decode_reasons(0x40 | 0x800) == ["hw_thermal_slowdown", "bit_0x800"]
    assert decode_reasons(0) == [] and decode_reasons(None) == []


def test_clock_variation_ignores_idle_samples():
    s = [{"sm_clock_mhz": c, "clocks_event_reasons": 0} for c in (1000, 1000, 1100, 1000, 900)]
    s.append({"sm_clock_mhz": 345, "clocks_event_reasons": 0x1})  # idle: excluded
    # sorted 900,1000,1000,1000,1100: p5 = 920, p95 = 1080 (linear), median 1000
    assert clock_variation(s) == pytest.approx(0.16)
    assert clock_variation(s[:1]) is None


SAMPLES = [
    {
        "t_s": 0.0,
        "power_w": 100.0,
        "gpu_util_pct": 50.0,
        "temp_c": 40,
        "sm_clock_mhz": 1980,
        "mem_used_bytes": 1e9,
        "clocks_event_reasons": 0,
        "energy_mj": 1000,
    },
    {
        "t_s": 0.1,
        "power_w": 200.0,
        "gpu_util_pct": 100.0,
        "temp_c": 42,
        "sm_clock_mhz": 1980,
        "mem_used_bytes": 3e9,
        "clocks_event_reasons": 0x4,
        "energy_mj": 1000,
    },
    {
        "t_s": 0.2,
        "power_w": 300.0,
        "gpu_util_pct": 90.0,
        "temp_c": 44,
        "sm_clock_mhz": 1980,
        "mem_used_bytes": 2e9,
        "clocks_event_reasons": 0,
        "energy_mj": 1050,
    },
]
INFO = {"power_source": "instant", "pcie_source": "not available", "gpm_status": "not available: test", "own_pid": 42}


def test_gpu_record_exact():
    begin = {"t": 10.0, "energy_mj": 990, "violation_power_ns": 0, "violation_thermal_ns": 5, "processes": [42]}
    end = {
        "t": 10.25,
        "energy_mj": 1090,
        "violation_power_ns": 50_000_000,
        "violation_thermal_ns": 5,
        "processes": [42, 7],
        "gpm_window": {},
    }
    r = gpu_record(SAMPLES, begin, end, INFO)
    assert (r["power_min_w"], r["power_mean_w"], r["power_max_w"]) == (100.0, 200.0, 300.0)
    assert (r["gpu_util_min_pct"], r["gpu_util_max_pct"]) == (50.0, 100.0) and r["gpu_util_mean_pct"] == pytest.approx(
        80.0
    )
    assert r["temp_max_c"] == 44 and r["device_mem_used_bytes"] == 3e9 and r["device_mem_used_mean_bytes"] == 2e9
    assert r["energy_j"] == 0.1 and r["energy_source"] == "nvml-counter" and r["energy_window_s"] == pytest.approx(0.25)
    # one counter change over 0.2 s of samples -> 0.2 / 0.25 = 80 % uncertainty: low confidence
    assert r["energy_uncertainty_pct"] == pytest.approx(80.0) and r["energy_confidence"] == "low"
    assert r["clocks_event_reasons"] == "sw_power_cap" and r["throttle_samples"] == 1
    assert r["throttle_sample_frac"] == pytest.approx(1 / 3)
    assert r["throttle_power_s"] == pytest.approx(0.05) and r["throttle_thermal_s"] == 0.0
    assert r["sm_clock_variation"] == 0.0 and r["power_source"] == "instant" and r["pcie_source"] == "not available"
    assert r["gpu_processes"] == 2 and r["other_gpu_processes"] == 1
    assert r["gpm_status"] == "not available: test" and r["gpm_sm_util_pct"] is None


def test_gpu_record_falls_back_to_power_integration_and_container_pids():
    begin = {"t": 0.0, "energy_mj": None, "processes": [9001]}
    end = {"t": 0.2, "energy_mj": None, "processes": [9001]}
    r = gpu_record(SAMPLES, begin, end, INFO)
    assert r["energy_source"] == "power-integration" and r["energy_j"] == pytest.approx(40.0)
    assert r["energy_confidence"] == "low"  # 3 samples < 20
    assert r["other_gpu_processes"] == 0  # one PID that is not ours: ours seen through another PID namespace
    r = gpu_record(SAMPLES, {"processes": []}, {"processes": []}, INFO)
    assert r["other_gpu_processes"] is None
    # the measured job's other processes (a launched server, the other ranks) are not "other processes", whether
    # NVML shows their PIDs (same namespace) or host PIDs (a container: counted off)
    two = {"processes": [INFO["own_pid"], 4242]}
    assert gpu_record(SAMPLES, two, two, {**INFO, "job_pids": (4242,)})["other_gpu_processes"] == 0
    hosted = {"processes": [9001, 9002]}
    assert gpu_record(SAMPLES, hosted, hosted, {**INFO, "job_pids": (4242,)})["other_gpu_processes"] == 0
    assert gpu_record(SAMPLES, hosted, hosted, INFO)["other_gpu_processes"] == 1
    r = gpu_record([], {}, {}, INFO)
    assert r["energy_source"] == "not available" and r["power_mean_w"] is None and r["power_source"] == "not available"


def test_combine_sums_power_and_energy_and_keeps_extremes():
    a = {
        "power_mean_w": 300.0,
        "energy_j": 10.0,
        "temp_max_c": 60,
        "gpu_util_mean_pct": 80.0,
        "gpu_util_min_pct": 10.0,
        "power_source": "instant",
        "energy_confidence": "ok",
        "sm_clock_variation": 0.01,
        "other_gpu_processes": 0,
    }
    b = {
        "power_mean_w": 200.0,
        "energy_j": 6.0,
        "temp_max_c": 70,
        "gpu_util_mean_pct": 60.0,
        "gpu_util_min_pct": 5.0,
        "power_source": "instant",
        "energy_confidence": "low",
        "sm_clock_variation": 0.03,
        "other_gpu_processes": 1,
    }
    c = combine([a, b])
    assert c["power_mean_w"] == 500.0 and c["energy_j"] == 16.0 and c["temp_max_c"] == 70
    assert c["gpu_util_mean_pct"] == 70.0 and c["gpu_util_min_pct"] == 5.0 and c["sm_clock_variation"] == 0.03
    assert c["power_source"] == "instant" and c["energy_confidence"] == "low" and c["other_gpu_processes"] == 1
    assert c["gpus_monitored"] == 2
    assert combine([a, {**b, "energy_j": None}])["energy_j"] is None  # a partial sum would understate


class Counting:
    """A real (non-NVML) source: counts its reads; optionally fails on the 3rd."""

    def __init__(self, name, fail_at=None):
        self.name, self.n, self.fail_at = name, 0, fail_at

    def begin(self):
        return {"t": time.perf_counter()}

    def end(self):
        return {"t": time.perf_counter(), "reads": self.n}

    def read(self):
        self.n += 1
        if self.n == self.fail_at:
            raise RuntimeError("sensor gone")
        return {"n": self.n}


def test_sampler_period_last_sample_and_failing_source():
    good, bad = Counting("good"), Counting("bad", fail_at=3)
    with Sampler([good, bad], 0.02) as s:
        time.sleep(0.3)
    rows = s.samples["good"]
    assert 0.3 / 0.02 * 0.6 <= len(rows) <= 0.3 / 0.02 + 2  # ~15 ticks + the closing sample
    assert rows[0]["t_s"] < 0.01 and rows[-1]["t_s"] >= 0.29  # first at start, last at exit
    assert all(b["t_s"] > a["t_s"] for a, b in zip(rows, rows[1:]))
    assert len(s.samples["bad"]) == 2 and s.errors["bad"] == "RuntimeError: sensor gone"
    assert s.counters["good"]["end"]["reads"] == len(rows)


def test_sampler_off_reads_only_counters():
    src = Counting("x")
    with Sampler([src], 0) as s:
        time.sleep(0.01)
    assert s.samples["x"] == [] and s.counters["x"]["begin"] and s.window_s >= 0.01


def test_rapl_wraparound_and_zone_discovery(tmp_path):
    assert rapl_delta_j([(900, 999), (10, 100)], [(100, 999), (60, 100)]) == pytest.approx((200 + 50) / 1e6)
    assert rapl_delta_j([(1, 9)], [None]) is None and rapl_delta_j([], []) is None
    # the kernel's powercap layout: package zones intel-rapl:N, sub-zones intel-rapl:N:M are skipped
    for zone, name in (("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "core"), ("intel-rapl:1", "psys")):
        d = tmp_path / zone
        d.mkdir()
        (d / "name").write_text(name + "\n")
        (d / "energy_uj").write_text("123\n")
    assert [z.name for z in rapl_zones(tmp_path)] == ["intel-rapl:0"]


def test_cpu_monitor_real_process_util_rss_and_energy_status():
    import torch

    from accelbench.telemetry import monitor

    a = torch.randn(256, 256)
    with monitor(torch.device("cpu"), 0.01) as mon:
        t0 = time.process_time()
        while time.process_time() - t0 < 0.4:  # 0.4 s of CPU time on this process
            a = (a @ a).tanh_()
    rec, series = mon.record(), mon.series()
    # CPU seconds / wall seconds: this thread alone accounts for >= 0.4 s of CPU time in the window
    assert rec["process_cpu_util_pct"] >= 100 * 0.4 / rec["telemetry_window_s"] * 0.95
    assert 0 < rec["system_cpu_util_pct"] <= 100 and rec["process_rss_max_bytes"] > a.numel() * 4
    assert rec["telemetry_samples"] >= 10 and len(series["cpu_t_s"]) == rec["telemetry_samples"]
    expected = "rapl" if rapl_zones() else "not available"
    assert rec["cpu_energy_source"] == expected and rec["energy_source"] == expected
    assert (rec["energy_j"] is None) == (expected == "not available")


def test_cpu_record_exact():
    b = {"t": 1.0, "process_cpu_s": 2.0, "system_busy_s": 10.0, "system_total_s": 40.0, "rapl": [(0, 10**9)]}
    e = {
        "t": 3.0,
        "process_cpu_s": 5.0,
        "system_busy_s": 13.0,
        "system_total_s": 44.0,
        "rapl": [(50_000_000, 10**9)],
        "rss_bytes": 7.0,
    }
    r = cpu_record([{"rss_bytes": 9.0}], b, e)
    assert r["process_cpu_util_pct"] == 150.0 and r["system_cpu_util_pct"] == 75.0 and r["process_rss_max_bytes"] == 9.0
    assert r["cpu_energy_j"] == 50.0 and r["cpu_power_mean_w"] == 25.0 and r["cpu_energy_source"] == "rapl"
    busy = {**e, "system_busy_s": 10.0 + 4.0 + 4e-9}  # psutil's per-state sums can pass the total by a rounding error
    assert cpu_record([], b, busy)["system_cpu_util_pct"] == 100.0


def test_rapl_source_meters_a_cpu_run_from_the_zone_counters(tmp_path):
    from accelbench.telemetry.sources.rapl import RaplSource

    zone = tmp_path / "intel-rapl:0"
    zone.mkdir()
    (zone / "name").write_text("package-0\n")
    (zone / "max_energy_range_uj").write_text("1000000\n")
    (zone / "energy_uj").write_text("900000\n")
    src = RaplSource(rapl_zones(tmp_path), meters_device=True)
    begin = src.begin()
    (zone / "energy_uj").write_text("400000\n")  # wrapped: 1e6 + 1 - 900000 + 400000 uJ = 0.500001 J
    end = {**src.end(), "t": begin["t"] + 0.5}
    r = src.record([], begin, end, 0.5)
    assert r["cpu_energy_j"] == pytest.approx(0.500001) and r["cpu_power_mean_w"] == pytest.approx(1.000002)
    assert (r["energy_j"], r["energy_source"], r["energy_window_s"], r["energy_confidence"]) == (
        r["cpu_energy_j"],
        "rapl",
        0.5,
        "ok",
    )
    assert "energy_j" not in RaplSource([], meters_device=False).record(
        [], begin, end, 0.5
    )  # a GPU run: NVML meters it


def test_a_registered_source_is_read_by_monitor():
    """The registry is the extension point: a source registered here lands in record() and series()."""
    import types

    import torch

    from accelbench.telemetry import monitor
    from accelbench.telemetry.sources import SOURCES, Source, register

    class CounterSource(Source):
        """Reads a counter off a Python object."""

        name = "toy"

        def __init__(self, obj):
            self.obj = obj

        def begin(self):
            return {"count": self.obj.count}

        def read(self):
            return {"count": float(self.obj.count)}

        def end(self):
            return {"count": self.obj.count}

        def record(self, samples, begin, end, window_s):
            return {"toy_increments": end["count"] - begin["count"]}

    obj = types.SimpleNamespace(count=0)
    register("toy", lambda devices, period_s, pids: [CounterSource(obj)])
    try:
        with monitor(torch.device("cpu"), 0.01) as mon:
            for _ in range(5):
                time.sleep(0.02)
                obj.count += 1
        rec, series = mon.record(), mon.series()
    finally:
        SOURCES.pop("toy")
    assert rec["toy_increments"] == 5 and rec["process_cpu_util_pct"] is not None  # built-in sources still there
    counts = series["toy_count"]
    assert counts[-1] == 5.0 and counts == sorted(counts)  # the last sample is taken at exit
    assert len(series["toy_t_s"]) == len(counts) == rec["telemetry_samples"]
    assert list(SOURCES) == ["nvml", "cpu", "rapl"]
