"""Data-parallel training on one rank: ``DistributedDataParallel`` around issue 4's training step.

The timed step is :func:`accelbench.train.step.build_step`'s (forward + cross-entropy + backward + optimizer
step under the precision: autocast for ``amp-*`` with a ``GradScaler`` for fp16, weights cast for
``bf16``, TF32 for ``tf32``), with the module wrapped in ``DistributedDataParallel`` through its ``wrap``
hook, so gradients are all-reduced by DDP's bucketed hooks, overlapped with the backward pass (PyTorch DDP
notes). The per-rank batch is the case's batch size (weak scaling) or ``batch_size / world``
(``global_batch``). With ``comm_share`` on, a second short window times the same step under
``no_sync()`` (no all-reduce): the difference is the communication the backward pass did not hide.
Optimizer settings come from ``spec.extra`` (``optimizer``, ``lr``, ``momentum``, ``weight_decay``),
else ``StepConfig``'s defaults (SGD with momentum).
"""

from __future__ import annotations

import time
from typing import Any

from accelbench.distributed.context import RankContext, rank_fields, timed_window
from accelbench.distributed.infer import memory_fields, rank_data, rank_header
from accelbench.measure import Inputs, channels_last_for, passes_needed, time_passes
from accelbench.spec import Case, SweepSpec

WORKLOAD = "train-ddp"
STEP_FIELDS = ("optimizer", "lr", "momentum", "weight_decay")


def unsupported_reason(precision: str, mode: str, device) -> str | None:
    """Why a DDP training case cannot run (the training step's rules: no pure fp16, eager/compile only)."""
    from accelbench.train.step import StepConfig
    from accelbench.train.step import unsupported_reason as step_reason

    return step_reason(StepConfig(precision=precision, mode=mode), device)


def step_config(case: Case, spec: SweepSpec, channels_last: bool):
    from accelbench.train.step import StepConfig

    extra = {k: spec.extra[k] for k in STEP_FIELDS if (spec.extra or {}).get(k) is not None}
    return StepConfig(precision=case.precision, mode=case.mode, channels_last=channels_last, **extra)


def _labelled_batches(ctx, case, inputs, info, cl, seed: int):
    import torch

    batches, blabels, _, desc, rcase = rank_data(ctx, case, inputs, info, cl, with_labels_always=True)
    g = torch.Generator().manual_seed(seed + ctx.rank)
    pairs = []
    for xb, yb in zip(batches, blabels):
        y = yb if yb is not None else torch.randint(0, 10, (xb.shape[0],), generator=g)  # synthetic data
        pairs.append((xb, y.to(ctx.device)))
    return pairs, desc, rcase


def measure(ctx: RankContext, case: Case, spec: SweepSpec, inputs: Inputs) -> dict[str, Any]:
    """Run one DDP training case on this rank; returns ``{"record", "series", "telemetry_keys"}``."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from accelbench.models import create_model
    from accelbench.stats import stat_columns, summarize
    from accelbench.telemetry import monitor
    from accelbench.train.step import build_step

    torch.manual_seed(spec.seed)
    torch.backends.cudnn.benchmark = True  # as training scripts do: fixed shapes, autotuned convolutions
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    loaded = create_model(case.model)
    info, cl = loaded.info, channels_last_for(case, loaded.module, ctx.device)
    batches, desc, rcase = _labelled_batches(ctx, case, inputs, info, cl, spec.seed)
    held = {}

    def wrap(module):
        held["ddp"] = DDP(module, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
        return held["ddp"]

    cfg = step_config(case, spec, cl)
    train_step = build_step(loaded.module, cfg, ctx.device, wrap=wrap)

    def step(batch):
        return train_step(*batch)

    step(batches[0])  # DDP builds its buckets; compile mode compiles here
    n_warm = max(spec.warmup_batches, 2)
    t0 = time.perf_counter()
    for i in range(n_warm):
        step(batches[i % len(batches)])
    ctx.sync()
    step_s = (time.perf_counter() - t0) / n_warm
    n_passes = int(ctx.agree_max(passes_needed(spec, len(batches), step_s)))
    with monitor(ctx.device) as mon:
        (lat_ms, _), clocks = timed_window(ctx, lambda: time_passes(step, batches, n_passes, ctx.device, False))
    loss = float(step(batches[0])[0].item())
    nosync_ms = _nosync_steps(ctx, held["ddp"], step, batches, len(lat_ms)) if _comm_share(ctx, case) else None
    st = summarize(lat_ms)
    samples = len(lat_ms) * rcase.batch_size
    rec = {
        **rank_header(WORKLOAD, case, rcase, ctx, cl, desc, info),
        "optimizer": cfg.optimizer, "lr": cfg.lr, "momentum": cfg.momentum,
        "weight_decay": cfg.weight_decay, "cudnn_benchmark": True, "compile_s": train_step.compile_s,
        "passes": n_passes, "steps_timed": len(lat_ms),
        "samples_timed": samples, **clocks, "throughput_samples_per_s": samples / clocks["rank_window_s"],
        **stat_columns(st, "step_time"),
        "step_time_nosync_mean_ms": nosync_ms, "loss_last": loss, **rank_fields(ctx),
    }
    tel = {**mon.record(), **memory_fields(ctx.device)}
    rec.update(tel)
    return {"record": rec, "series": {"step_time_ms": lat_ms, **mon.series()}, "telemetry_keys": sorted(tel)}


def _comm_share(ctx: RankContext, case: Case) -> bool:
    # no_sync() under torch.compile would trace a second graph; the comparison is kept to eager steps.
    return ctx.opts.comm_share and case.mode == "eager"


def _nosync_steps(ctx: RankContext, ddp, step, batches, n: int) -> float:
    """Mean step time (ms) of ``n`` steps with DDP's gradient all-reduce switched off (``no_sync``)."""
    n = max(3, min(n, 30))
    ctx.barrier()
    with ddp.no_sync():
        step(batches[0])
        seq = [batches[i % len(batches)] for i in range(n)]
        lat_ms, _ = time_passes(step, seq, 1, ctx.device, False)
    ctx.barrier()
    return sum(lat_ms) / len(lat_ms)
