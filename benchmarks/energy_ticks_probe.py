"""Probe NVML's total-energy counter on this GPU: its update period and jitter, the lag between the energy a
tick reports and the moment it is published, and how finely a Python thread sees the ticks while a model runs.

Run on a GPU machine: ``python benchmarks/energy_ticks_probe.py`` (about a minute). Prints one JSON document.
"""

from __future__ import annotations

import json
import statistics
import threading
import time

import pynvml
import torch


def poll(h, stop, out, poll_s):
    prev_t = time.perf_counter()
    prev = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    while not stop.is_set():
        t0 = time.perf_counter()
        v = pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
        t1 = time.perf_counter()
        if v != prev:
            out.append((prev_t, t1, v))
        prev, prev_t = v, t0
        if poll_s:
            time.sleep(poll_s)


def watch(h, seconds_or_fn, poll_s=0.0002):
    stop, out = threading.Event(), []
    th = threading.Thread(target=poll, args=(h, stop, out, poll_s), daemon=True)
    th.start()
    marks = seconds_or_fn() if callable(seconds_or_fn) else time.sleep(seconds_or_fn)
    stop.set()
    th.join()
    return out, marks


def step_load(dev, idle_s=0.35, load_s=0.8):
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    time.sleep(idle_s)
    ts = time.perf_counter()
    while time.perf_counter() - ts < load_s:
        for _ in range(4):
            a @ a
        torch.cuda.synchronize()
    te = time.perf_counter()
    time.sleep(idle_s)
    return ts, te


def lag_from_step(ticks, ts, te):
    """Solve the straddling periods for the lag L (tick published at tau + L), assuming idle and load powers are
    the neighbouring periods' mean powers."""
    mids = [((lo + hi) / 2, v) for lo, hi, v in ticks]
    per = [(mids[i][0], mids[i + 1][0], (mids[i + 1][1] - mids[i][1]) / 1000) for i in range(len(mids) - 1)]
    out = {}
    for name, t_edge, _before_first in (("start", ts, True), ("end", te, False)):
        k = next((i for i, (a, b, _) in enumerate(per) if a <= t_edge < b), None)
        if k is None or k < 2 or k + 2 >= len(per):
            continue
        a, b, e = per[k]
        p_before = per[k - 2][2] / (per[k - 2][1] - per[k - 2][0])
        p_after = per[k + 2][2] / (per[k + 2][1] - per[k + 2][0])
        # e = p_before * (t_edge - (a - L)) + p_after * ((b - L) - t_edge)  =>  solve L
        # e = p_before*(t_edge - a) + p_before*L + p_after*(b - t_edge) - p_after*L
        L = (e - p_before * (t_edge - a) - p_after * (b - t_edge)) / (p_before - p_after)
        out[name] = {"lag_ms": 1000 * L, "p_before_w": p_before, "p_after_w": p_after}
    return out


def model_loop(dev, bs, seconds=1.5):
    import torchvision

    m = torchvision.models.resnet50().to(dev).eval()
    x = torch.randn(bs, 3, 224, 224, device=dev)
    with torch.no_grad():
        for _ in range(5):
            m(x)
        torch.cuda.synchronize()

        def run():
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds:
                m(x)
            torch.cuda.synchronize()

        return run


def main():
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(0)
    dev = torch.device("cuda", 0)
    t0 = time.perf_counter()
    for _ in range(200):
        pynvml.nvmlDeviceGetTotalEnergyConsumption(h)
    call_us = (time.perf_counter() - t0) / 200 * 1e6
    doc = {"gpu": pynvml.nvmlDeviceGetName(h), "driver": pynvml.nvmlSystemGetDriverVersion(), "nvml_call_us": call_us}
    idle, _ = watch(h, 1.5)
    mids = [(lo + hi) / 2 for lo, hi, _ in idle]
    d = [b - a for a, b in zip(mids, mids[1:])]
    doc["idle"] = {
        "ticks": len(idle),
        "period_ms": 1000 * statistics.median(d),
        "period_sd_ms": 1000 * statistics.pstdev(d),
        "bracket_ms_max": 1000 * max(hi - lo for lo, hi, _ in idle),
        "increments_mj": [b[2] - a[2] for a, b in zip(idle, idle[1:])][:8],
    }
    lags = []
    for _ in range(5):
        ticks, (ts, te) = watch(h, lambda: step_load(dev))
        lags.append(lag_from_step(ticks, ts, te))
    doc["lag_from_power_steps"] = lags
    for bs in (1, 32, 256):
        run = model_loop(dev, bs)
        ticks, _ = watch(h, run, poll_s=0.0005)
        widths = sorted(1000 * (hi - lo) for lo, hi, _ in ticks)
        inc = [(b[2] - a[2]) / 1000 / (((b[0] + b[1]) - (a[0] + a[1])) / 2) for a, b in zip(ticks, ticks[1:])]
        doc[f"resnet50_bs{bs}"] = {
            "ticks": len(ticks),
            "bracket_ms_median": widths[len(widths) // 2],
            "bracket_ms_max": widths[-1],
            "period_power_w": [round(p, 1) for p in inc],
            "power_rel_sd": statistics.pstdev(inc[1:-1]) / statistics.fmean(inc[1:-1]),
        }
    print(json.dumps(doc, indent=1, default=str))


if __name__ == "__main__":
    main()
