"""Data-parallel training on one rank: ``DistributedDataParallel`` around the model, timed steps.

The timed step is forward + cross-entropy loss + backward (gradients all-reduced by DDP's bucketed
hooks, overlapped with the backward pass) + SGD step, under the case's precision: autocast for
``amp-*`` (with a ``GradScaler`` for fp16), weights cast for ``fp16``/``bf16``, TF32 for ``tf32``
(PyTorch DDP notes; torch.amp docs). The per-rank batch is the case's batch size (weak scaling) or
``batch_size / world`` (``global_batch``). With ``comm_share`` on, a second short window times the same
step under ``no_sync()`` (no all-reduce): the difference is the communication the backward pass did not
hide.

TODO(issue 4): the step here is minimal; when ``accelbench.train`` has a reusable step function, wrap it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable

from accelbench import precisions
from accelbench.distributed.context import RankContext, rank_fields, timed_window
from accelbench.distributed.infer import load_model, memory_fields, rank_data
from accelbench.measure import Inputs, passes_needed, time_passes
from accelbench.spec import Case, SweepSpec

WORKLOAD = "train-ddp"
LR, MOMENTUM, WEIGHT_DECAY = 0.01, 0.9, 1e-4  # small fixed SGD: throughput, not convergence


def unsupported_reason(mode: str) -> str | None:
    """Modes a DDP training step cannot use (CUDA graph capture of DDP's hooks is not supported)."""
    if mode == "cudagraphs":
        return "cudagraphs: capturing a DDP training step is not supported; use compile or max-autotune"
    return None


def train_context(precision: str, device):
    """Autocast for ``amp-*`` precisions, nothing otherwise (no inference mode: gradients are needed)."""
    import torch

    p = precisions.PRECISIONS[precision]
    if p.autocast_dtype:
        return torch.autocast(device.type, dtype=getattr(torch, p.autocast_dtype))
    return contextlib.nullcontext()


def make_step(model, optimizer, precision: str, device, scaler=None) -> Callable:
    """``step((x, y)) -> loss``: one training step of ``model`` (any callable module, DDP-wrapped or not)."""
    import torch.nn.functional as F

    def step(batch):
        x, y = batch
        with train_context(precision, device):
            loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()
        return loss

    return step


def _wrap(ctx: RankContext, module, case: Case):
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = DDP(module, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    scaler = torch.amp.GradScaler(ctx.device.type) if case.precision == "amp-fp16" else None
    model = ddp
    if case.mode in ("compile", "max-autotune"):
        torch._dynamo.reset()
        model = torch.compile(ddp, mode="max-autotune" if case.mode == "max-autotune" else None, dynamic=False)
    return ddp, model, opt, scaler


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

    from accelbench.stats import summarize
    from accelbench.telemetry import monitor

    torch.manual_seed(spec.seed)
    torch.backends.cudnn.benchmark = True  # as training scripts do: fixed shapes, autotuned convolutions
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    module, info, cl = load_model(case, ctx.device)
    module.train()
    batches, desc, rcase = _labelled_batches(ctx, case, inputs, info, cl, spec.seed)
    ddp, model, opt, scaler = _wrap(ctx, module, case)
    step = make_step(model, opt, case.precision, ctx.device, scaler)
    t0 = time.perf_counter()
    step(batches[0])  # DDP builds its buckets and compiled modes compile here
    ctx.sync()
    compile_s = time.perf_counter() - t0 if case.mode != "eager" else None
    t0 = time.perf_counter()
    n_warm = max(spec.warmup_batches, 2)
    for i in range(n_warm):
        step(batches[i % len(batches)])
    ctx.sync()
    step_s = (time.perf_counter() - t0) / n_warm
    n_passes = int(ctx.agree_max(passes_needed(spec, len(batches), step_s)))
    with monitor(ctx.device) as mon:
        (lat_ms, _), clocks = timed_window(ctx, lambda: time_passes(step, batches, n_passes, ctx.device, False))
    loss = float(step(batches[0]).item())
    nosync_ms = _nosync_steps(ctx, ddp, step, batches, len(lat_ms)) if _comm_share(ctx, case) else None
    st = summarize(lat_ms)
    samples = len(lat_ms) * rcase.batch_size
    rec = {
        "workload": WORKLOAD, "model": case.model, "batch_size": rcase.batch_size,
        "global_batch_size": rcase.batch_size * ctx.world, "scaling_mode": "strong" if ctx.opts.global_batch else "weak",
        "precision": case.precision, "mode": case.mode, "channels_last_setting": case.channels_last,
        "channels_last": cl, "data": case.data, "data_description": desc, "images": case.images,
        "rank_images": rcase.images, "image_size": case.image_size or info.image_size, "weights": info.weights,
        "pretrained": info.pretrained, "optimizer": f"SGD(lr={LR}, momentum={MOMENTUM}, wd={WEIGHT_DECAY})",
        "cudnn_benchmark": True, "compile_s": compile_s, "passes": n_passes, "steps_timed": len(lat_ms),
        "samples_timed": samples, **clocks, "throughput_samples_per_s": samples / clocks["rank_window_s"],
        "step_time_mean_ms": st.latency_mean_ms, "step_time_p50_ms": st.latency_p50_ms,
        "step_time_p90_ms": st.latency_p90_ms, "step_time_p99_ms": st.latency_p99_ms,
        "step_time_max_ms": st.latency_max_ms, "step_time_spread": st.spread, "step_time_noisy": st.noisy,
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
