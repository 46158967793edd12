"""Measurement building blocks shared by the workloads: device resolution, batches, timing, failures.

Timing (per case): batches are prepared on the device before timing; an untimed pass computes accuracy
and warms up; then ``warmup_batches`` more; then whole passes over the batches are timed, enough of
them to reach ``min_timed_batches`` and ``min_time_s``. Per-batch latency comes from CUDA events on a
GPU and ``time.perf_counter_ns`` on a CPU; throughput comes from the synchronised wall window of all
timed passes (no gaps between batches are missed).
"""

from __future__ import annotations

import gc
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from accelbench.errors import ConfigError
from accelbench.spec import Case, SweepSpec

OK, OOM, ERROR, UNSUPPORTED, SKIPPED = "ok", "oom", "error", "unsupported", "skipped"


def resolve_device(name: str):
    """``auto`` -> ``cuda:<current>`` when a GPU is visible else ``cpu``; validate explicit choices.

    Raises:
        ConfigError: not a device name accelbench runs on, or a CUDA device that is not available.
    """
    import torch

    from accelbench.spec import _DEVICE_RE

    if not isinstance(name, str) or not _DEVICE_RE.match(name):
        raise ConfigError("device", name, "auto, cpu, cuda, cuda:N")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError("device", name, "cpu (no CUDA GPU is visible)")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        if dev.index >= torch.cuda.device_count():
            raise ConfigError("device", name, f"cuda:0..cuda:{torch.cuda.device_count() - 1}")
    return dev


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters."""
    msg = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


# How an allocation failure reads when it is not torch.OutOfMemoryError: the CPU allocator's RuntimeError
# (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes"),
# and CUDA's own text when a library reports it.
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory")


def is_oom(exc: BaseException) -> bool:
    """True for an allocation failure on any device, also when wrapped (e.g. by a compiler backend):
    torch's OutOfMemoryError (CUDA), the CPU allocator's "can't allocate memory" RuntimeError, and Python's
    MemoryError."""
    import torch

    oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (oom_type, MemoryError)) or any(t in str(exc).lower() for t in _OOM_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def cleanup(device) -> None:
    """Free what a finished or failed case left: Python garbage, the CUDA cache, compiled graphs."""
    import torch

    gc.collect()
    if "torch._dynamo" in sys.modules:  # only a compiled case needs it; importing dynamo costs seconds
        try:
            torch._dynamo.reset()
        except Exception:
            pass
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()


@dataclass
class Inputs:
    """Per-sweep cache of decoded data and normalised inputs (keyed by size and normalisation)."""

    spec: SweepSpec
    device: Any
    raw: Any = None
    cache: dict = field(default_factory=dict)

    def raw_images(self):
        from accelbench.data import load_images

        if self.raw is None:
            self.raw = load_images(self.spec.data, self.spec.images, seed=self.spec.seed,
                                   skip_bad=getattr(self.spec, "skip_bad_images", False))
        return self.raw

    def get(self, size: int, mean, std, on_host: bool):
        from accelbench.data import load_images, to_model_input

        key = (size, tuple(mean), tuple(std), on_host)
        if key not in self.cache:
            raw = self.raw_images()
            if raw.labels is None and raw.images.shape[-1] != size:  # synthetic: draw at the final size
                raw = load_images("synthetic", self.spec.images, image_size=size, seed=self.spec.seed)
            target = "cpu" if on_host else self.device
            self.cache.clear()  # one size at a time: keep device memory for the model
            self.cache[key] = to_model_input(raw.images, size, mean, std, device=target)
        return self.cache[key]


def _uses_conv(module) -> bool:
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in module.modules())


def channels_last_for(case: Case, module, device) -> bool:
    """Resolve ``auto``: NHWC helps convolutions on CUDA tensor cores (TF32/fp16/bf16), not fp32 or CPUs."""
    if case.channels_last != "auto":
        return case.channels_last == "on"
    return device.type == "cuda" and case.precision != "fp32" and _uses_conv(module)


def make_batches(x_all, labels, case: Case, dtype, channels_last: bool, pin: bool):
    """Cut ``ceil(images / batch_size)`` full batches from ``x_all`` (cycling through it).

    Returns:
        ``(batches, batch_labels, n_real)``: lists of tensors ``(B, 3, S, S)`` and ``(B,)``; ``n_real``
        is how many leading samples count for accuracy (the rest repeat earlier images).
    """
    import torch

    bs = case.batch_size
    n_batches = math.ceil(case.images / bs)
    n_data = x_all.shape[0]
    idx = torch.arange(n_batches * bs) % n_data
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    batches, blabels = [], []
    for i in range(n_batches):
        sl = idx[i * bs : (i + 1) * bs].to(x_all.device)
        xb = x_all.index_select(0, sl).to(dtype).contiguous(memory_format=fmt)
        batches.append(xb.pin_memory() if pin else xb)
        blabels.append(labels[sl.cpu()] if labels is not None else None)
    return batches, blabels, min(case.images, n_data)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _feed(xb, device, transfer: bool):
    return xb.to(device, non_blocking=True) if transfer else xb


def accuracy_pass(fwd, batches, blabels, n_real: int, device, transfer: bool) -> dict[int, int] | None:
    """Run every batch once (untimed; also a warm-up) and count top-1/top-5 hits on the real samples."""
    from accelbench.stats import topk_correct

    totals, seen = {1: 0, 5: 0}, 0
    for xb, yb in zip(batches, blabels):
        out = fwd(_feed(xb, device, transfer))
        if yb is None or seen >= n_real:
            continue
        take = min(len(yb), n_real - seen)
        hits = topk_correct(out[:take], yb[:take].to(out.device))
        for k in totals:
            totals[k] += hits[k]
        seen += take
    _sync(device)
    return totals if blabels and blabels[0] is not None else None


def time_passes(fwd, batches, n_passes: int, device, transfer: bool) -> tuple[list[float], float]:
    """Time ``n_passes`` passes over ``batches``.

    Returns:
        ``(latencies_ms, wall_s)``: per-batch latency (CUDA events on a GPU, perf_counter_ns on a CPU)
        and the synchronised wall time of the whole window.
    """
    import torch

    n = n_passes * len(batches)
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        _sync(device)
        t0 = time.perf_counter_ns()
        k = 0
        for _ in range(n_passes):
            for xb in batches:
                starts[k].record()
                fwd(_feed(xb, device, transfer))
                ends[k].record()
                k += 1
        _sync(device)
        wall_s = (time.perf_counter_ns() - t0) / 1e9
        return [s.elapsed_time(e) for s, e in zip(starts, ends)], wall_s
    lat = []
    t0 = time.perf_counter_ns()
    for _ in range(n_passes):
        for xb in batches:
            b0 = time.perf_counter_ns()
            fwd(xb)
            lat.append((time.perf_counter_ns() - b0) / 1e6)
    return lat, (time.perf_counter_ns() - t0) / 1e9


def passes_needed(spec: SweepSpec, n_batches: int, batch_s: float) -> int:
    """Whole passes to reach both ``min_timed_batches`` and ``min_time_s`` (at least one)."""
    by_count = math.ceil(spec.min_timed_batches / n_batches)
    by_time = math.ceil(spec.min_time_s / max(batch_s * n_batches, 1e-9))
    return max(1, by_count, by_time)


def guarded(rec: dict[str, Any], measure, device) -> tuple[dict, dict]:
    """Run ``measure() -> (metrics, series)`` for a case whose identity columns are ``rec``.

    Every failure becomes data: ``status`` ``oom`` (torch's OutOfMemoryError, also wrapped) or
    ``error`` with a one-line reason; the device is cleaned up either way so later cases are not
    poisoned. Only KeyboardInterrupt propagates. Adds ``case_wall_s``.

    Returns:
        ``(record, raw_series)``.
    """
    t0 = time.perf_counter()
    try:
        measured, series = measure()
        rec.update(measured, status=OK, error=None)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # every failure is data: a row with a one-line reason
        rec.update(status=OOM if is_oom(exc) else ERROR, error=one_line(exc))
        series = {}
        del exc
    finally:
        cleanup(device)
    rec["case_wall_s"] = time.perf_counter() - t0
    return rec, series
