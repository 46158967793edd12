"""Timing: THE synchronisation helper and the timed window every scenario uses.

A timed window (per case): whole passes over prepared batches, enough of them to reach
``min_timed_batches`` and ``min_time_s``. Per-step latency comes from CUDA events on a GPU (they time the
device, also under CUDA graph replay: optimum-benchmark's reason to use them) and ``time.perf_counter_ns``
on a CPU; throughput comes from the synchronised wall window of all timed passes, so no gap between
steps is missed.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence


def sync(device) -> None:
    """Wait for ``device``'s queued work (a no-op on a CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_passes(step: Callable[[Any], Any], items: Sequence, n_passes: int, device) -> tuple[list[float], float]:
    """Run ``step(item)`` over ``items`` ``n_passes`` times and time each call.

    Returns:
        ``(latencies_ms, wall_s)``: per-call latency (CUDA events on a GPU, perf_counter_ns on a CPU) and the
        synchronised wall time of the whole window.
    """
    import torch

    n = n_passes * len(items)
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        sync(device)
        t0 = time.perf_counter_ns()
        k = 0
        for _ in range(n_passes):
            for item in items:
                starts[k].record()
                step(item)
                ends[k].record()
                k += 1
        sync(device)
        wall_s = (time.perf_counter_ns() - t0) / 1e9
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], wall_s
    lat = []
    t0 = time.perf_counter_ns()
    for _ in range(n_passes):
        for item in items:
            b0 = time.perf_counter_ns()
            step(item)
            lat.append((time.perf_counter_ns() - b0) / 1e6)
    return lat, (time.perf_counter_ns() - t0) / 1e9


def time_windows(step: Callable[[Any], Any], items: Sequence, n_passes: int, device,
                 repeats: int = 1) -> list[tuple[list[float], float]]:
    """``repeats`` timed windows of :func:`time_passes`, one after another: ``[(latencies_ms, wall_s), ...]``."""
    return [time_passes(step, items, n_passes, device) for _ in range(repeats)]


def warm_up(step: Callable[[Any], Any], items: Sequence, n: int, device) -> float:
    """Run ``n`` untimed steps; returns the seconds one took on average (0 when ``n`` is 0)."""
    t0 = time.perf_counter()
    for i in range(n):
        step(items[i % len(items)])
    sync(device)
    return (time.perf_counter() - t0) / n if n else 0.0


def passes_needed(min_timed_batches: int, min_time_s: float, n_items: int, step_s: float) -> int:
    """Whole passes over ``n_items`` steps of ``step_s`` seconds to reach both ``min_timed_batches`` steps and
    ``min_time_s`` seconds (at least one)."""
    by_count = math.ceil(min_timed_batches / n_items)
    by_time = math.ceil(min_time_s / max(step_s * n_items, 1e-9))
    return max(1, by_count, by_time)
