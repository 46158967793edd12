"""Timing: THE synchronisation helper and the timed window every scenario uses.

A timed window (per case): steps over prepared batches, cycling through them, enough of them to reach
``min_timed_batches`` and ``min_time_s`` (:func:`steps_needed`; not rounded up to whole passes: at batch 1
a pass over 1000 images is 1000 steps where 30 are asked for). Per-step latency comes from CUDA events on a
GPU (they time the device, also under CUDA graph replay: optimum-benchmark's reason to use them) and
``time.perf_counter_ns`` on a CPU; throughput comes from the synchronised wall window of all timed steps, so
no gap between steps is missed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (a no-op on a CPU)."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(
    step: Callable[[Any], Any], items: Sequence, n_steps: int, device: torch.device
) -> tuple[list[float], float]:
    """Run ``step(items[k % len(items)])`` for k = 0..``n_steps``-1 (cycling through ``items``) and time each call.

    Returns:
        ``(latencies_ms, wall_s)``: ``n_steps`` per-call latencies (CUDA events on a GPU, perf_counter_ns on a
        CPU) and the synchronised wall time of the whole window (s).
    """
    import torch

    m = len(items)
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_steps)]
        sync(device)
        t0 = time.perf_counter_ns()
        for k in range(n_steps):
            starts[k].record()
            step(items[k % m])
            ends[k].record()
        sync(device)
        wall_s = (time.perf_counter_ns() - t0) / 1e9
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], wall_s
    lat = []
    t0 = time.perf_counter_ns()
    for k in range(n_steps):
        b0 = time.perf_counter_ns()
        step(items[k % m])
        lat.append((time.perf_counter_ns() - b0) / 1e6)
    return lat, (time.perf_counter_ns() - t0) / 1e9


def time_passes(
    step: Callable[[Any], Any], items: Sequence, n_passes: int, device: torch.device
) -> tuple[list[float], float]:
    """:func:`time_steps` over ``n_passes`` whole passes of ``items``: ``(latencies_ms, wall_s)``."""
    return time_steps(step, items, n_passes * len(items), device)


def time_windows(
    step: Callable[[Any], Any], items: Sequence, n_steps: int, device: torch.device, repeats: int = 1
) -> list[tuple[list[float], float]]:
    """``repeats`` timed windows of :func:`time_steps` (``n_steps`` each), one after another:
    ``[(latencies_ms, wall_s), ...]``."""
    return [time_steps(step, items, n_steps, device) for _ in range(repeats)]


def warm_up(step: Callable[[Any], Any], items: Sequence, n: int, device: torch.device) -> float:
    """Run ``n`` untimed steps; returns the seconds one took on average (0 when ``n`` is 0)."""
    from accelbench.core import stage

    stage.enter("warming up")
    t0 = time.perf_counter()
    for i in range(n):
        step(items[i % len(items)])
    sync(device)
    return (time.perf_counter() - t0) / n if n else 0.0


def passes_needed(min_timed_batches: int, min_time_s: float, n_items: int, step_s: float) -> int:
    """Whole passes over ``n_items`` steps of ``step_s`` seconds to reach both ``min_timed_batches`` steps and
    ``min_time_s`` seconds (at least one): :func:`steps_needed` rounded up to whole passes."""
    return math.ceil(steps_needed(min_timed_batches, min_time_s, step_s) / n_items)


def steps_needed(min_timed_batches: int, min_time_s: float, step_s: float) -> int:
    """Steps of ``step_s`` seconds to reach both ``min_timed_batches`` steps and ``min_time_s`` seconds (at least
    one; no time bound when ``step_s`` is not positive: nothing estimated it)."""
    by_time = math.ceil(min_time_s / step_s) if min_time_s > 0 and step_s > 0 else 0
    return max(1, min_timed_batches, by_time)


class Marks:
    """Timestamps of events in a device's stream: ``mark()`` after each generated token, ``seconds()`` once at the
    end. CUDA events on a GPU (recorded in the stream, no host synchronisation between marks: they time the device,
    also under CUDA graph replay), ``time.perf_counter_ns`` on a CPU (whose ops run synchronously).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._marks: list = []

    def mark(self) -> None:
        import torch

        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            self._marks.append(event)
        else:
            self._marks.append(time.perf_counter_ns())

    def seconds(self) -> list[float]:
        """Seconds of every mark after the first, from the first (synchronises the device)."""
        sync(self.device)
        if not self._marks:
            return []
        if self.device.type == "cuda":
            return [self._marks[0].elapsed_time(m) / 1e3 for m in self._marks]
        return [(m - self._marks[0]) / 1e9 for m in self._marks]
