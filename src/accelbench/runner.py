"""The inference sweep: ``run_sweep(spec, store)`` plans the cases and runs each one in turn.

Every finished case is committed to the store at once. A failure in one case (OOM, compile error, any
exception) becomes a stored row with ``status`` ``oom``/``error`` and a one-line reason, and the sweep
goes on with clean state; larger batch sizes of a (model, precision, mode) that ran out of memory are
stored as ``skipped`` rather than run into the same wall. Timing rules: see :mod:`accelbench.measure`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

from accelbench import modes, precisions
from accelbench.measure import (
    OK, OOM, UNSUPPORTED, Inputs, accuracy_pass, channels_last_for, guarded,
    make_batches, passes_needed, resolve_device, time_passes, _sync,
)  # resolve_device is re-exported for the CLI
from accelbench.spec import Case, SweepSpec, expand
from accelbench.sweep import SweepOutcome, Workload, run_cases

KIND = "inference"


def _base_record(case: Case, device) -> dict[str, Any]:
    return {
        "case_key": case.key, "workload": KIND, "model": case.model, "batch_size": case.batch_size,
        "precision": case.precision, "mode": case.mode, "channels_last_setting": case.channels_last,
        "device": str(device), "data": case.data, "images": case.images,
        "include_transfer": case.include_transfer, "started_at": time.time(),
    }


def _measure(case: Case, spec: SweepSpec, inputs: Inputs, device) -> tuple[dict, dict]:
    import torch

    from accelbench.models import create_model
    from accelbench.stats import summarize
    from accelbench.telemetry import monitor

    torch.manual_seed(spec.seed)
    loaded = create_model(case.model)
    info = loaded.info
    size = case.image_size or info.image_size
    cl = channels_last_for(case, loaded.module, device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    module = precisions.prepare(case.precision, loaded.module, device)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    x_all = inputs.get(size, info.mean, info.std, on_host=case.include_transfer)
    raw = inputs.raw_images()
    use_labels = raw.labels is not None and info.label_space is not None and info.label_space == raw.label_space
    pin = case.include_transfer and device.type == "cuda"
    batches, blabels, n_real = make_batches(
        x_all, raw.labels if use_labels else None, case, precisions.input_dtype(case.precision), cl, pin
    )
    with precisions.forward_context(case.precision, device):
        example = batches[0].to(device)
        fwd, compile_s = modes.build(case.mode, module, example, device)
        del example
        hits = accuracy_pass(fwd, batches, blabels, n_real, device, case.include_transfer)
        t0 = time.perf_counter()
        for i in range(spec.warmup_batches):
            fwd(batches[i % len(batches)].to(device, non_blocking=True))
        _sync(device)
        batch_s = (time.perf_counter() - t0) / max(spec.warmup_batches, 1)
        n_passes = passes_needed(spec, len(batches), batch_s)
        with monitor(device, spec.telemetry_period_ms / 1000) as mon:
            lat_ms, wall_s = time_passes(fwd, batches, n_passes, device, case.include_transfer)
    st = summarize(lat_ms)
    samples = n_passes * len(batches) * case.batch_size
    throughput = samples / wall_s
    rec = {
        "weights": info.weights, "pretrained": info.pretrained, "image_size": size, "channels_last": cl,
        "data_description": raw.description, "compile_s": compile_s, "passes": n_passes,
        "batches_timed": len(lat_ms), "samples_timed": samples, "timed_wall_s": wall_s,
        "device_time_s": sum(lat_ms) / 1e3, "throughput_samples_per_s": throughput,
        "total_time_s": case.images / throughput,
        "latency_mean_ms": st.latency_mean_ms, "latency_min_ms": st.latency_min_ms,
        "latency_p50_ms": st.latency_p50_ms, "latency_p90_ms": st.latency_p90_ms,
        "latency_p99_ms": st.latency_p99_ms, "latency_max_ms": st.latency_max_ms,
        "latency_spread": st.spread, "latency_noisy": st.noisy,
        "top1": hits[1] / n_real if hits else None, "top5": hits[5] / n_real if hits else None,
        "accuracy_samples": n_real if hits else None,
    }
    rec.update(mon.record())
    if device.type == "cuda":
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
    else:
        import psutil

        rec["peak_mem_bytes"] = None  # torch has no CPU allocator statistics
        rec["process_rss_bytes"] = psutil.Process().memory_info().rss
    return rec, {"latency_ms": lat_ms, **mon.series()}


def run_case(case: Case, spec: SweepSpec, inputs: Inputs, device) -> tuple[dict, dict]:
    """Run one case; never raises except KeyboardInterrupt. Returns ``(record, raw_series)``."""
    rec = _base_record(case, device)
    reason = precisions.unsupported_reason(case.precision, device) or modes.unsupported_reason(case.mode, device)
    if reason:
        return {**rec, "status": UNSUPPORTED, "error": reason}, {}
    return guarded(rec, lambda: _measure(case, spec, inputs, device), device)


INFERENCE = Workload(
    kind=KIND, expand=expand, base_record=_base_record,
    run_case=lambda case, device, inputs: run_case(case, inputs.spec, inputs, device),
    preflight=lambda inputs: inputs.raw_images(),
)


def run_sweep(
    spec: SweepSpec,
    store,
    resume: bool = False,
    on_case: Callable[[int, int, Case, dict | None], None] | None = None,
) -> SweepOutcome:
    """Run the inference sweep and store every case as it finishes (see :func:`accelbench.sweep.run_cases`).

    Args:
        spec: the sweep.
        store: an open :class:`accelbench.store.Store`.
        resume: continue the newest unfinished run with the same spec, running only missing cases.
        on_case: progress callback ``(index, total, case, record_or_None)``, called before
            (record None) and after each case.
    Returns:
        :class:`SweepOutcome`; ``interrupted`` is True after Ctrl-C (finished cases are stored).
    Raises:
        ConfigError: the device is not available. Model and data errors of a case become rows.
    """
    return run_cases(INFERENCE, spec, store, state=Inputs, resume=resume, on_case=on_case)


def oom_boundary(records: list[dict]) -> dict[tuple, dict[str, int | None]]:
    """Per (model, precision, mode): the largest batch size that ran and the smallest that ran out of memory."""
    out: dict[tuple, dict[str, int | None]] = {}
    for r in records:
        g = out.setdefault((r["model"], r["precision"], r["mode"]), {"largest_ok": None, "smallest_oom": None})
        if r["status"] == OK and (g["largest_ok"] is None or r["batch_size"] > g["largest_ok"]):
            g["largest_ok"] = r["batch_size"]
        if r["status"] == OOM and (g["smallest_oom"] is None or r["batch_size"] < g["smallest_oom"]):
            g["smallest_oom"] = r["batch_size"]
    return out


def write_json(path: str | Path, store, run_id: int) -> None:
    """Write the run (spec, environment, results) as JSON."""
    run = store.run(run_id)
    df = store.cases(run_id)
    doc = {"run_id": run_id, "kind": run["kind"], "status": run["status"], "created_at": run["created_at"],
           "spec": run["spec"], "env": run["env"], "results": json.loads(df.to_json(orient="records", double_precision=15))}
    Path(path).write_text(json.dumps(doc, indent=1, default=str))
