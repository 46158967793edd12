"""``run_profile(spec, steps, store)``: the ``accelbench profile`` workload.

Per case (a sweep case plus a step kind, see :mod:`accelbench.profile.step`):
1. build the step; count FLOPs, parameters and minimum bytes analytically (any device);
2. time ``timed_steps`` steps after ``warmup_steps`` (CUDA events / perf_counter), with telemetry;
3. on a GPU, profile one step with Nsight Compute in a child process (:mod:`accelbench.profile.ncu`);
4. store the record (``cases``, workload ``profile``) and its kernels (``profile_kernels``), draw charts.
Machine ceilings are measured once per device and cached in the store (:mod:`accelbench.profile.storage`).
A failure in any stage keeps what the earlier stages produced: an ncu error sets ``ncu_status`` and
``ncu_error`` but the analytic and timed numbers stay; a build/run failure is a row with ``status``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from accelbench.measure import ERROR, OK, OOM, UNSUPPORTED, cleanup, is_oom, one_line, resolve_device
from accelbench.profile import results
from accelbench.profile.ceilings import Ceilings
from accelbench.profile.step import ProfileCase

KIND = "profile"
NCU_MODES = ("auto", "on", "off")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileOptions:
    """How to profile. ``ncu``: ``auto`` (on a GPU when ncu is found), ``on`` (a missing ncu is reported
    as an error), ``off``. Steps default to 5 warm-up + 20 timed on a GPU, 1 + 3 on a CPU."""

    ncu: str = "auto"
    warmup_steps: int | None = None
    timed_steps: int | None = None
    chart_dir: str | None = None
    ncu_csv_dir: str | None = None
    ncu_timeout_s: float = 1800.0
    remeasure_ceilings: bool = False


@dataclass
class ProfileOutcome:
    run_id: int
    ceilings: Ceilings | None = None
    ceilings_cached: bool = False
    records: list[dict] = field(default_factory=list)
    charts: list[str] = field(default_factory=list)
    interrupted: bool = False


def get_ceilings(store, device, remeasure: bool = False) -> tuple[Ceilings, bool]:
    """``(ceilings, from_cache)``: the device's cached ceilings, measured and stored when missing."""
    from accelbench.env import cpu_model
    from accelbench.profile import ceilings as ceil, storage

    import torch

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    cached = None if remeasure else storage.cached_ceilings(store, name)
    if cached is not None:
        return cached, True
    c = ceil.measure(device)
    storage.save_ceilings(store, c)
    return c, False


def _base(pc: ProfileCase, device) -> dict:
    c = pc.case
    return {"case_key": pc.key, "workload": KIND, "step": pc.step, "model": c.model, "batch_size": c.batch_size,
            "precision": c.precision, "mode": c.mode, "channels_last_setting": c.channels_last,
            "device": str(device), "data": c.data, "started_at": time.time()}


def _measure(pc: ProfileCase, spec, device, ceilings: Ceilings, opt: ProfileOptions) -> tuple[dict, dict]:
    from accelbench.profile import analytic, step
    from accelbench.telemetry import monitor

    cuda = device.type == "cuda"
    work = step.build(pc, spec, device)
    counts = analytic.count(work, pc.step)
    warm = opt.warmup_steps if opt.warmup_steps is not None else (5 if cuda else 1)
    iters = opt.timed_steps if opt.timed_steps is not None else (20 if cuda else 3)
    with monitor(device) as mon:
        times_ms = step.time_steps(work.run, device, warm, max(iters, 1))
    rec = {"image_size": work.image_size, "channels_last": work.channels_last, "weights": work.info.weights,
           "compile_s": work.compile_s, "analytic_flop_calls": [list(c) for c in counts.flop_calls]}
    rec.update(results.analytic_fields(counts, ceilings, pc.case.precision, times_ms, pc.case.batch_size))
    rec.update(mon.record())
    if cuda:
        import torch

        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    return rec, {"step_time_ms": times_ms, **mon.series()}, counts.flop_calls


def _ncu(pc: ProfileCase, spec, device, ceilings: Ceilings, opt: ProfileOptions, analytic_flops, flop_calls=()):
    """``(fields, kernel rows)``; never raises an NcuError (it becomes ``ncu_status``/``ncu_error``)."""
    from accelbench.profile import ncu

    if opt.ncu == "off" or (device.type != "cuda" and opt.ncu == "auto"):
        why = "turned off" if opt.ncu == "off" else "ncu profiles CUDA GPUs only"
        return {"ncu_status": "skipped", "ncu_error": why}, []
    if device.type != "cuda":
        return {"ncu_status": "error", "ncu_error": "ncu needs a CUDA device"}, []
    keep = str(Path(opt.ncu_csv_dir) / (_slug(pc) + ".csv")) if opt.ncu_csv_dir else None
    try:
        prof = ncu.run(spec, pc, timeout_s=opt.ncu_timeout_s, keep_csv=keep)
    except ncu.NcuError as exc:
        missing = "not found" in str(exc)
        status = "unavailable" if missing and opt.ncu == "auto" else "error"
        return {"ncu_status": status, "ncu_error": str(exc)}, []
    fields = {"ncu_status": "ok", "ncu_error": None, "ncu_wall_s": prof.wall_s,
              "ncu_missing_metrics": list(prof.missing) or None, "ncu_metrics": list(prof.metrics)}
    fields.update(results.ncu_fields(prof.kernels, ceilings, pc.case.precision, analytic_flops))
    paired = results.pair_layers(prof.kernels, flop_calls)
    fields.update(results.layer_fields(paired))
    layers = results.kernel_layers(paired)
    return fields, [results.kernel_row(k, ceilings, layers.get(k.index)) for k in prof.kernels]


def _slug(pc: ProfileCase) -> str:
    c = pc.case
    return f"{c.model}-{pc.step}-{c.precision}-bs{c.batch_size}-{c.mode}".replace(":", "_").replace("/", "_")


def profile_case(pc: ProfileCase, spec, device, ceilings: Ceilings, opt: ProfileOptions) -> tuple[dict, dict, list]:
    """Profile one case; returns ``(record, series, kernel_rows)``. Never raises except KeyboardInterrupt."""
    from accelbench.profile import step

    rec = _base(pc, device)
    reason = step.unsupported_reason(pc, device)
    if reason:
        return {**rec, "status": UNSUPPORTED, "error": reason}, {}, []
    t0 = time.perf_counter()
    series, rows, calls = {}, [], ()
    try:
        measured, series, calls = _measure(pc, spec, device, ceilings, opt)
        rec.update(measured, status=OK, error=None)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failed case is a row
        rec.update(status=OOM if is_oom(exc) else ERROR, error=one_line(exc))
    finally:
        cleanup(device)
    if rec["status"] == OK:
        try:
            fields, rows = _ncu(pc, spec, device, ceilings, opt, rec.get("analytic_flops"), calls)
        except Exception as exc:  # the analytic and timed results stay; the reason is on the row
            fields, rows = {"ncu_status": "error", "ncu_error": one_line(exc)}, []
        rec.update(fields)
    rec["case_wall_s"] = time.perf_counter() - t0
    return rec, series, rows


def run_profile(spec, steps: tuple[str, ...], store, opt: ProfileOptions = ProfileOptions(),
                on_case: Callable[[int, int, ProfileCase, dict | None], None] | None = None) -> ProfileOutcome:
    """Profile every case of ``spec`` x ``steps`` and store each as it finishes.

    Raises:
        ConfigError: the device is not available. UnknownModelError / DataError: found before the run is created.
    """
    from accelbench import env as envmod
    from accelbench.profile import storage
    from accelbench.spec import expand

    from accelbench.data import check_data
    from accelbench.models import check_model

    device = resolve_device(spec.device)
    cases = [ProfileCase(case=c, step=s) for c in expand(spec, str(device)) for s in steps]
    for name in spec.models:
        check_model(name)
    check_data(spec.data, spec.skip_bad_images)
    spec_d = {**spec.to_dict(), "steps": list(steps), "options": {"ncu": opt.ncu}}
    out = ProfileOutcome(run_id=store.begin_run(KIND, spec_d, spec.spec_hash(), envmod.collect(device)))
    out.ceilings, out.ceilings_cached = get_ceilings(store, device, opt.remeasure_ceilings)
    try:
        for i, pc in enumerate(cases):
            if on_case:
                on_case(i, len(cases), pc, None)
            rec, series, rows = profile_case(pc, spec, device, out.ceilings, opt)
            if opt.chart_dir and rec["status"] == OK:
                rec["charts"] = _charts(rec, rows, out.ceilings, Path(opt.chart_dir) / _slug(pc))
                out.charts += rec["charts"]
            rec["case_id"] = store.add_case(out.run_id, rec, series)
            storage.save_kernels(store, rec["case_id"], rows)
            out.records.append(rec)
            if on_case:
                on_case(i + 1, len(cases), pc, rec)
    except KeyboardInterrupt:
        out.interrupted = True
        store.finish_run(out.run_id, "interrupted")
        return out
    store.finish_run(out.run_id, "complete")
    return out


def _charts(rec: dict, rows: list[dict], ceilings: Ceilings, stem: Path) -> list[str]:
    """Model- and kernel-level charts of one case; a missing matplotlib becomes a note on the record."""
    try:
        from accelbench.report import roofline as chart
    except ImportError as exc:
        rec["chart_error"] = one_line(exc)
        return []
    try:
        paths = chart.model_chart(rec, ceilings, f"{stem}-model")
        if rows:
            paths += chart.kernel_chart(rec, rows, ceilings, f"{stem}-kernels")
    except Exception as exc:  # a chart is a by-product: never lose the measured case over it
        rec["chart_error"] = one_line(exc)
        return []
    return [str(p) for p in paths]
