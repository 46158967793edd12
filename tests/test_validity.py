"""Validity flags: exact thresholds and reasons."""

from accelbench.core.validity import assess


def gpu_rec(**kw):
    base = {
        "latency_spread": 0.02,
        "telemetry_window_s": 2.0,
        "throttle_sample_frac": 0.0,
        "throttle_power_s": 0.0,
        "throttle_thermal_s": 0.0,
        "clocks_event_reasons": "none",
        "sm_clock_variation": 0.01,
        "other_gpu_processes": 0,
    }
    return {**base, **kw}


def test_clean_gpu_case_is_ok_and_lists_every_check():
    assert assess(gpu_rec()) == {
        "validity": "ok",
        "validity_reason": None,
        "validity_checks": "spread,throttle,clocks,processes",
    }


def test_cpu_case_checks_only_the_spread():
    assert assess({"latency_spread": 0.051}) == {
        "validity": "latency-spread",
        "validity_reason": "latency spread (IQR/median) 5.1% > 5%",
        "validity_checks": "spread",
    }
    assert assess({"latency_spread": 0.05})["validity"] == "ok"  # the threshold itself passes


def test_power_cap_throttle_from_samples():
    out = assess(gpu_rec(throttle_sample_frac=0.1, clocks_event_reasons="gpu_idle,sw_power_cap"))
    assert out["validity"] == "throttled"
    assert out["validity_reason"] == "clocks limited (sw_power_cap) for 10.0% of the window > 1%"


def test_thermal_violation_time_alone_flags():
    # 0.03 s of 2 s = 1.5 % > 1 %, even though no sample caught the reason bit
    out = assess(gpu_rec(throttle_thermal_s=0.03))
    assert out["validity"] == "throttled"
    assert out["validity_reason"] == "clocks limited (power/thermal violation counters) for 1.5% of the window > 1%"
    assert assess(gpu_rec(throttle_power_s=0.02))["validity"] == "ok"  # exactly 1 %: not above


def test_violation_counter_past_the_window_is_capped_at_the_whole_window():
    # NVML's violation counter advances in steps: 2.116 s of "violation" in a 2 s window was seen on an H200
    out = assess(gpu_rec(throttle_power_s=2.116, clocks_event_reasons="sw_power_cap"))
    assert out["validity"] == "throttled"
    assert "for 100.0% of the window" in out["validity_reason"]


def test_several_flags_join_in_order():
    out = assess(gpu_rec(latency_spread=0.08, sm_clock_variation=0.07, other_gpu_processes=2))
    assert out["validity"] == "latency-spread,clock-variation,other-process"
    assert out["validity_reason"] == (
        "latency spread (IQR/median) 8.0% > 5%; SM clock varied 7.0% (p95-p5)/median > 5%; "
        "2 other compute process(es) on the GPU"
    )


def test_nan_and_missing_inputs_skip_checks():
    nan = float("nan")
    out = assess({"latency_spread": nan, "sm_clock_variation": None, "other_gpu_processes": nan})
    assert out == {"validity": "ok", "validity_reason": None, "validity_checks": "none"}
    assert assess({"step_spread": 0.2}, spread_key="step_spread")["validity"] == "latency-spread"


def test_cpu_contention_above_a_tenth_of_the_host():
    out = assess({"latency_spread": 0.01, "cpu_other_util_pct": 52.4})
    assert out == {
        "validity": "cpu-contention",
        "validity_checks": "spread,cpu",
        "validity_reason": "other processes used 52% of the host's CPU time > 10%",
    }
    assert assess({"cpu_other_util_pct": 10.0})["validity"] == "ok"  # the threshold itself passes


def test_cpu_record_counts_other_processes_not_the_measured_tree():
    from accelbench.telemetry.sources.cpu import cpu_record

    # 2 s of wall on 2 cores = 4 s of CPU time; the host was busy 3 s, the measured tree 1 s: others took 2 s = 50 %
    begin = {"t": 0.0, "process_cpu_s": 0.0, "tree_cpu_s": 0.0, "system_busy_s": 10.0, "system_total_s": 100.0}
    end = {"t": 2.0, "process_cpu_s": 0.8, "tree_cpu_s": 1.0, "system_busy_s": 13.0, "system_total_s": 104.0}
    rec = cpu_record([], begin, end)
    assert rec["cpu_other_util_pct"] == 50.0 and rec["system_cpu_util_pct"] == 75.0
    assert rec["process_cpu_util_pct"] == 40.0
