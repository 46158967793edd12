"""Telemetry sampler overhead, and a capture of raw NVML samples for the replay tests.

    python benchmarks/telemetry_overhead.py overhead --out results.json [--reps 8] [--window-s 2]
    python benchmarks/telemetry_overhead.py host-loop --out results.json [--device cpu|cuda:0] [--reps 10]
    python benchmarks/telemetry_overhead.py capture --out tests/data/nvml_samples_h200.json  (then gzip -9 it: the tests read the .json.gz)

host-loop: a host-bound loop -- each step ``--layers`` tiny layers at batch 1 (a (1, 64) row through a
64x64 matmul, bias, GELU and a norm: ~5 operators each, all dispatched from Python, as Hugging Face ``generate``
at batch 1) -- timed in windows of ``window_s`` with no monitor (``off``), the monitor's sampler as a thread of
this process (``thread``) and in the sampler process (``process``), built and entered exactly as ``accelbench
generate`` does (:func:`accelbench.telemetry.monitor` at the default 100 ms, the measured block inside ``with``;
the monitor is built, and the sampler process started, before the window). The three settings are interleaved
in a rotating order in every repetition; per setting the JSON holds each window's ms per step and, against
``off`` in the same repetition, the ratio's median, min and max (overhead = median - 1). Runs unchanged on a GPU
(NVML sources then: the energy watch's 1 ms polls are the suspected cost) and on a CPU (psutil, RAPL if
readable).

overhead: ResNet-50 inference (random weights, real CIFAR-10 images resized to 224) in two
configurations -- batch 1 fp32 eager (CPU/launch-bound: the most sensitive to a Python thread taking
the GIL) and batch 64 amp-bf16 channels-last eager (GPU-bound) -- timed in windows of ``window_s`` with
the sampler off (no monitor at all), at 100 ms and at 10 ms. The three settings are interleaved in a
rotating order in every repetition, so drift (clocks, temperature) hits all of them alike; the
overhead is 1 - median over repetitions of (throughput with sampling / throughput off in the same
repetition).

capture: ``Monitor.raw()`` of an idle window (100 ms), a loaded window at 10 ms and one at 100 ms,
written as JSON with the device and software versions.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

CONFIGS = {"bs1-fp32": (1, "fp32"), "bs64-amp-bf16": (64, "amp-bf16")}
# name -> (period_s, per-tick GPM on); "100ms-no-gpm" isolates the cost of per-tick GPM snapshots
SETTINGS = {"off": (None, True), "100ms": (0.1, True), "10ms": (0.01, True), "100ms-no-gpm": (0.1, False)}


def build(batch_size: int, precision: str, device):
    """A forward function and one input batch of real images on ``device``."""
    import torch

    from accelbench import backends, precisions
    from accelbench.data import load_images, to_model_input
    from accelbench.models import create_model

    torch.manual_seed(0)
    loaded = create_model("resnet50", pretrained=False)
    module = precisions.prepare(precision, loaded.module, device)
    fmt = torch.channels_last if precision != "fp32" else torch.contiguous_format
    module = module.to(memory_format=fmt)
    raw = load_images("cifar10-test", batch_size)
    x = to_model_input(raw.images, 224, loaded.info.mean, loaded.info.std, device=device)
    x = x.to(precisions.input_dtype(precision)).contiguous(memory_format=fmt)
    ctx = precisions.context(precision, device)
    ctx.__enter__()  # inference mode / autocast for the rest of the process (one config at a time)
    fwd, _ = backends.get("eager").build(module, x, device)
    return fwd, x, ctx


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def window(fwd, x, iters: int, device, period_s, gpm_ticks: bool = True):
    """Throughput (samples/s) of ``iters`` forward passes, with a monitor at ``period_s`` or none."""
    import contextlib

    from accelbench.telemetry import monitor
    from accelbench.telemetry.sources import gpm

    gpm.GPM_MIN_INTERVAL_S = 0.1 if gpm_ticks else float("inf")
    mon = monitor(device, period_s) if period_s else contextlib.nullcontext()
    _sync(device)
    with mon:
        t0 = time.perf_counter()
        for _ in range(iters):
            fwd(x)
        _sync(device)
        dt = time.perf_counter() - t0
    rec = mon.record() if period_s else {}
    return x.shape[0] * iters / dt, rec


def overhead(args) -> dict:
    import torch

    device = torch.device(args.device)
    out = {"configs": {}, "reps": args.reps, "window_s": args.window_s}
    for name in args.configs.split(","):
        bs, prec = CONFIGS[name]
        fwd, x, ctx = build(bs, prec, device)
        for _ in range(20):
            fwd(x)
        _sync(device)
        t0 = time.perf_counter()
        for _ in range(20):
            fwd(x)
        _sync(device)
        iters = max(10, int(args.window_s / ((time.perf_counter() - t0) / 20)))
        runs = {s: [] for s in SETTINGS}
        periods = {s: [] for s in SETTINGS}
        busy = {s: [] for s in SETTINGS}
        order = list(SETTINGS)
        for rep in range(args.reps):
            k = rep % len(order)
            for s in order[k:] + order[:k]:
                thr, rec = window(fwd, x, iters, device, *SETTINGS[s])
                runs[s].append(thr)
                if rec.get("telemetry_samples"):
                    periods[s].append(rec["telemetry_window_s"] / max(rec["telemetry_samples"] - 1, 1))
                    busy[s].append(rec["telemetry_busy_pct"])
            print(f"{name} rep {rep}: " + ", ".join(f"{s} {runs[s][-1]:.1f}" for s in SETTINGS), flush=True)
        ctx.__exit__(None, None, None)
        summary = {}
        for s in order[1:]:
            ratios = [a / b for a, b in zip(runs[s], runs["off"])]
            summary[s] = {
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
                "overhead_pct": 100 * (1 - statistics.median(ratios)),
                "achieved_period_ms": 1000 * statistics.median(periods[s]) if periods[s] else None,
                "sampler_busy_pct": statistics.median(busy[s]) if busy[s] else None,
            }
        out["configs"][name] = {
            "batch_size": bs,
            "precision": prec,
            "iters_per_window": iters,
            "throughput_samples_per_s": runs,
            "summary": summary,
            "off_spread": (max(runs["off"]) - min(runs["off"])) / statistics.median(runs["off"]),
        }
        del fwd, x
        torch.cuda.empty_cache()
    return out


def capture(args) -> dict:
    import torch

    from accelbench.telemetry import monitor

    device = torch.device(args.device)
    fwd, x, ctx = build(args.capture_batch, "amp-bf16", device)
    for _ in range(10):
        fwd(x)
    _sync(device)
    wins = {}
    with monitor(device, 0.1) as mon:
        time.sleep(args.window_s)
    wins["idle_100ms"] = mon.raw()
    for name, period in (("load_10ms", 0.01), ("load_100ms", 0.1)):
        with monitor(device, period) as mon:
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < args.window_s:
                for _ in range(10):
                    fwd(x)
                _sync(device)
        wins[name] = mon.raw()
    ctx.__exit__(None, None, None)
    return {"windows": wins}


HOST_SETTINGS = ("off", "thread", "process")


def host_layers(n: int, device):
    """``n`` (weight (64, 64), bias (64,)) pairs of random values on ``device`` and a (1, 64) input row."""
    import torch

    g = torch.Generator().manual_seed(0)
    layers = [
        (torch.randn(64, 64, generator=g).div_(8).to(device), torch.randn(64, generator=g).to(device)) for _ in range(n)
    ]
    return layers, torch.randn(1, 64, generator=g).to(device)


def host_step(layers, x):
    """One step: every layer's matmul, bias, GELU and norm on a (1, 64) row (about five small ops a layer)."""
    import torch.nn.functional as F

    for w, b in layers:
        x = F.gelu(x @ w + b)
        x = x / (x.norm() + 1e-5)
    return x


def host_window(layers, x, steps: int, device, setting: str) -> tuple[float, dict]:
    """ms per step over ``steps`` steps under ``setting`` (``off``/``thread``/``process``), and the monitor's record."""
    import contextlib

    from accelbench.telemetry import monitor

    mon = contextlib.nullcontext() if setting == "off" else monitor(device, 0.1, (), setting)
    _sync(device)
    with mon:
        t0 = time.perf_counter()
        for _ in range(steps):
            x = host_step(layers, x)
        _sync(device)
        dt = time.perf_counter() - t0
    return 1e3 * dt / steps, ({} if setting == "off" else mon.record())


def host_loop(args) -> dict:
    import torch

    device = torch.device(args.device)
    torch.set_num_threads(1)  # one host thread, as generate's Python loop (intra-op threads only spin on 1x64 ops)
    layers, x = host_layers(args.layers, device)
    with torch.inference_mode():
        host_window(layers, x, 50, device, "process")  # starts the sampler process before any timed window
        step_ms = host_window(layers, x, 200, device, "off")[0]
        steps = max(100, int(args.window_s * 1e3 / step_ms))
        runs: dict[str, list[float]] = {s: [] for s in HOST_SETTINGS}
        recs: dict[str, list[dict]] = {s: [] for s in HOST_SETTINGS}
        for rep in range(args.reps):
            k = rep % len(HOST_SETTINGS)
            for s in HOST_SETTINGS[k:] + HOST_SETTINGS[:k]:
                ms, rec = host_window(layers, x, steps, device, s)
                runs[s].append(ms)
                recs[s].append(rec)
            print(f"rep {rep}: " + ", ".join(f"{s} {runs[s][-1]:.4f} ms" for s in HOST_SETTINGS), flush=True)
    summary = {}
    for s in HOST_SETTINGS:
        ratios = sorted(a / b for a, b in zip(runs[s], runs["off"]))
        q1, q3 = (statistics.quantiles(ratios, n=4)[i] for i in (0, 2)) if len(ratios) > 1 else (ratios[0],) * 2
        summary[s] = {
            "step_ms_median": statistics.median(runs[s]),
            "ratio_to_off_median": statistics.median(ratios),
            "ratio_to_off_min": ratios[0],
            "ratio_to_off_max": ratios[-1],
            "ratio_to_off_q1": q1,
            "ratio_to_off_q3": q3,
            "overhead_pct": 100 * (statistics.median(ratios) - 1),
            "telemetry_samples_median": statistics.median(r.get("telemetry_samples", 0) for r in recs[s]),
            "telemetry_errors": sorted({r["telemetry_errors"] for r in recs[s] if r.get("telemetry_errors")}),
        }
    import os

    return {
        "loop": {
            "layers": args.layers,
            "ops_per_step_approx": 5 * args.layers,
            "steps_per_window": steps,
            "torch_threads": 1,
        },
        "reps": args.reps,
        "window_s": args.window_s,
        "cpu_count": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "step_ms": runs,
        "summary": summary,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=("overhead", "host-loop", "capture"))
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--reps", type=int, default=8)
    p.add_argument("--window-s", type=float, default=2.0)
    p.add_argument("--device", default="cuda:0", help="cuda:N (cpu only to smoke-test this script)")
    p.add_argument("--configs", default=",".join(CONFIGS), help="subset of " + ",".join(CONFIGS))
    p.add_argument("--capture-batch", type=int, default=64)
    p.add_argument("--layers", type=int, default=24, help="host-loop: tiny layers a step")
    args = p.parse_args()
    import torch

    from accelbench.telemetry.sources.nvml import device_info

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    doc = {"overhead": overhead, "host-loop": host_loop, "capture": capture}[args.what](args)
    info = {k: v for k, v in device_info(0).items() if k != "gpu_uuid"} if args.device.startswith("cuda") else {}
    doc["device"] = {
        **info,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, default=str))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
