"""The training step-throughput sweep: ``run_train_sweep(spec, store)``.

Per case: a model with random weights, the decoded images resized and normalised on the device, cut
into batches (``measure.make_batches``), a :class:`~accelbench.train.step.TrainStep`. The first step
(compilation in compile mode) is timed as ``compile_s``; then ``warmup_batches`` untimed steps; then
whole passes over the batches are timed (``measure.time_passes``: CUDA events per step, wall window
for throughput) until ``min_timed_batches`` and ``min_time_s`` are reached. A timed step is forward +
cross-entropy + backward + optimizer step. Failures are rows, OOM skips larger batch sizes, resume
runs only missing cases: the rules of :mod:`accelbench.runner`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from accelbench import precisions
from accelbench.measure import (
    UNSUPPORTED, Inputs, channels_last_for, guarded, make_batches, one_line, time_passes, _sync,
)
from accelbench.sweep import SweepOutcome, Workload, run_cases
from accelbench.train.spec import TrainCase, TrainSpec, expand
from accelbench.train.step import StepConfig, build_step, unsupported_reason

KIND = "training"


def _base_record(case: TrainCase, device) -> dict[str, Any]:
    return {
        "case_key": case.key, "workload": KIND, "model": case.model, "batch_size": case.batch_size,
        "precision": case.precision, "mode": case.mode, "channels_last_setting": case.channels_last,
        "optimizer": case.optimizer, "device": str(device), "data": case.data, "images": case.images,
        "started_at": time.time(),
    }


def _labels(raw, n_out: int | None, n: int, seed: int, device):
    """Real labels (folded into the model's classes) or, for synthetic data, seeded random labels."""
    import torch

    classes = n_out or 10
    if raw.labels is not None:
        return raw.labels % classes
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


def _measure(case: TrainCase, spec: TrainSpec, inputs: Inputs, device, loader_cache: dict) -> tuple[dict, dict]:
    import torch

    from accelbench.models import create_model
    from accelbench.stats import summarize
    from accelbench.telemetry import monitor
    from accelbench.train.datasets import num_outputs

    torch.manual_seed(spec.seed)
    torch.backends.cudnn.benchmark = True  # training's usual setting: autotuned convolutions (absorbed by warm-up)
    loaded = create_model(case.model, pretrained=False)
    info = loaded.info
    size = case.image_size or info.image_size
    cl = channels_last_for(case, loaded.module, device)
    n_out = num_outputs(loaded.module)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    cfg = StepConfig(precision=case.precision, mode=case.mode, optimizer=case.optimizer, lr=spec.lr,
                     momentum=spec.momentum, weight_decay=spec.weight_decay, channels_last=cl)
    step = build_step(loaded.module, cfg, device)
    x_all = inputs.get(size, info.mean, info.std, on_host=False)
    raw = inputs.raw_images()
    labels = _labels(raw, n_out, x_all.shape[0], spec.seed, device)
    batches, blabels, _ = make_batches(x_all, labels, case, precisions.input_dtype(case.precision), cl, pin=False)
    pairs = [(xb, yb.to(device)) for xb, yb in zip(batches, blabels)]
    fn = lambda b: step(b[0], b[1])  # noqa: E731  (time_passes feeds one item at a time)
    first_loss = fn(pairs[0])[0].item()  # the first step: compiles in compile mode
    t0 = time.perf_counter()
    for i in range(spec.warmup_batches):
        fn(pairs[i % len(pairs)])
    _sync(device)
    step_s = (time.perf_counter() - t0) / max(spec.warmup_batches, 1) if spec.warmup_batches else step.first_step_s
    n_passes = max(1, math.ceil(spec.min_timed_batches / len(pairs)), math.ceil(spec.min_time_s / max(step_s * len(pairs), 1e-9)))
    with monitor(device) as mon:
        lat_ms, wall_s = time_passes(fn, pairs, n_passes, device, False)
    last_loss = fn(pairs[0])[0].item()
    st = summarize(lat_ms)
    samples = n_passes * len(pairs) * case.batch_size
    rec = {
        "weights": "random", "image_size": size, "cudnn_benchmark": True, "channels_last": cl, "data_description": raw.description,
        "num_classes": n_out, "compile_s": step.compile_s, "first_step_s": step.first_step_s,
        "passes": n_passes, "batches_timed": len(lat_ms), "samples_timed": samples, "timed_wall_s": wall_s,
        "device_time_s": sum(lat_ms) / 1e3, "throughput_samples_per_s": samples / wall_s,
        "step_time_mean_ms": st.latency_mean_ms, "step_time_p50_ms": st.latency_p50_ms,
        "step_time_p90_ms": st.latency_p90_ms, "step_time_p99_ms": st.latency_p99_ms,
        "step_time_min_ms": st.latency_min_ms, "step_time_max_ms": st.latency_max_ms,
        "step_time_spread": st.spread, "step_time_noisy": st.noisy,
        "optimizer_fused": bool(step.optimizer.defaults.get("fused")),
        "loss_first": first_loss, "loss_last": last_loss, "loss_finite": math.isfinite(last_loss),
    }
    rec.update(mon.record())
    rec.update(_memory(device))
    rec.update(_loader_check(spec, case, size, rec["throughput_samples_per_s"], loader_cache))
    return rec, {"step_time_ms": lat_ms, **mon.series()}


def _memory(device) -> dict:
    import torch

    if device.type == "cuda":
        return {"peak_mem_bytes": torch.cuda.max_memory_allocated(device),
                "peak_mem_reserved_bytes": torch.cuda.max_memory_reserved(device)}
    import psutil

    return {"peak_mem_bytes": None, "process_rss_bytes": psutil.Process().memory_info().rss}


def _loader_check(spec: TrainSpec, case: TrainCase, size: int, step_rate: float, cache: dict) -> dict:
    """With ``loader_workers`` set: the DataLoader rate for this batch size and image size, and
    ``input_bound`` = the loader delivers fewer samples/s than the step consumes."""
    if spec.loader_workers is None or spec.data == "synthetic":
        return {}
    from accelbench.train.datasets import load_encoded
    from accelbench.train.pipeline import loader_throughput

    key = (size, case.batch_size)
    if key not in cache:
        try:
            if "encoded" not in cache:
                cache["encoded"] = load_encoded(spec.data, spec.images)
            cache[key] = loader_throughput(cache["encoded"], size, case.batch_size, spec.loader_workers, pin=True, seed=spec.seed)
        except Exception as exc:  # the step was measured: keep it, record why the loader was not
            cache[key] = {"loader_error": one_line(exc)}
    out = dict(cache[key])
    if "loader_samples_per_s" in out:
        out["input_bound"] = out["loader_samples_per_s"] < step_rate
    return out


def run_train_case(case: TrainCase, spec: TrainSpec, inputs: Inputs, device, loader_cache: dict | None = None) -> tuple[dict, dict]:
    """Run one case; never raises except KeyboardInterrupt. Returns ``(record, raw_series)``."""
    rec = _base_record(case, device)
    reason = unsupported_reason(StepConfig(precision=case.precision, mode=case.mode), device)
    if reason:
        return {**rec, "status": UNSUPPORTED, "error": reason}, {}
    cache = loader_cache if loader_cache is not None else {}
    return guarded(rec, lambda: _measure(case, spec, inputs, device, cache), device)


def _state(spec: TrainSpec, device) -> tuple[Inputs, dict]:
    return Inputs(spec, device), {}


TRAINING = Workload(
    kind=KIND, expand=expand, base_record=_base_record,
    run_case=lambda case, device, st: run_train_case(case, st[0].spec, st[0], device, st[1]),
    # cost is quoted for the timed steps; validity reads the step-time spread
    derived_keys={"work_seconds_key": "timed_wall_s", "work_samples_key": "samples_timed",
                  "spread_key": "step_time_spread"},
    preflight=lambda st: st[0].raw_images(),
)


def run_train_sweep(spec: TrainSpec, store, resume: bool = False,
                    on_case: Callable[[int, int, TrainCase, dict | None], None] | None = None) -> SweepOutcome:
    """Run the step-throughput sweep, storing each case as it finishes (run kind ``training``).

    The loop (resume, OOM boundary, failure rows, Ctrl-C, energy/validity/cost columns) is
    :func:`accelbench.sweep.run_cases`.

    Args:
        spec: the sweep; store: an open :class:`accelbench.store.Store`.
        resume: continue the newest unfinished run with the same spec, running only missing cases.
        on_case: progress callback ``(index, total, case, record_or_None)``.
    Returns:
        :class:`accelbench.sweep.SweepOutcome` (``interrupted`` after Ctrl-C; finished cases are stored).
    Raises:
        ConfigError: the device is not available. Model and data errors of a case become rows.
    """
    return run_cases(TRAINING, spec, store, state=_state, resume=resume, on_case=on_case)
