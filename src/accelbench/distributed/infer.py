"""Data-parallel inference on one rank: its shard of the data, the same timed passes as every other rank.

Each rank loads the model and the sweep's images, keeps images ``rank, rank + world, ...`` (the
``DistributedSampler`` split), cuts them into batches of the per-rank batch size with
:func:`accelbench.measure.make_batches`, runs the untimed accuracy/warm-up pass and then the timed passes
inside :func:`accelbench.distributed.context.timed_window`. The number of passes is the largest any rank
needs (agreed by all-reduce), so all ranks work for the same window.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from accelbench import modes, precisions
from accelbench.distributed.context import RankContext, rank_fields, timed_window
from accelbench.errors import ConfigError
from accelbench.measure import Inputs, accuracy_pass, channels_last_for, make_batches, passes_needed, time_passes
from accelbench.spec import Case, SweepSpec

WORKLOAD = "inference-dp"


def shard(x_all, labels, rank: int, world: int):
    """Rank ``rank``'s share of ``x_all`` (and ``labels``): every ``world``-th sample from ``rank`` on.

    Raises:
        ConfigError: fewer samples than ranks.
    """
    if x_all.shape[0] < world:
        raise ConfigError("images", x_all.shape[0], f"at least one image per rank ({world})")
    return x_all[rank::world], (labels[rank::world] if labels is not None else None)


def load_model(case: Case, device):
    """The case's model on ``device`` in its precision and memory format: ``(module, info, channels_last)``."""
    import torch

    from accelbench.models import create_model

    loaded = create_model(case.model)
    cl = channels_last_for(case, loaded.module, device)
    module = precisions.prepare(case.precision, loaded.module, device)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    return module, loaded.info, cl


def rank_data(ctx: RankContext, case: Case, inputs: Inputs, info, cl: bool, with_labels_always: bool = False):
    """This rank's batches: ``(batches, batch_labels, n_real, data_description, per_rank_case)``."""
    size = case.image_size or info.image_size
    x_all = inputs.get(size, info.mean, info.std, on_host=case.include_transfer)
    raw = inputs.raw_images()
    labelled = raw.labels is not None and info.label_space is not None and info.label_space == raw.label_space
    labels = raw.labels if (labelled or (with_labels_always and raw.labels is not None)) else None
    xs, ys = shard(x_all, labels, ctx.rank, ctx.world)
    rcase = dataclasses.replace(case, images=xs.shape[0], batch_size=ctx.per_rank_batch(case.batch_size))
    pin = case.include_transfer and ctx.device.type == "cuda"
    batches, blabels, n_real = make_batches(xs, ys, rcase, precisions.input_dtype(case.precision), cl, pin)
    return batches, blabels, n_real, raw.description, rcase


def measure(ctx: RankContext, case: Case, spec: SweepSpec, inputs: Inputs) -> dict[str, Any]:
    """Run one case on this rank. Returns ``{"record", "series", "telemetry_keys"}`` for rank 0 to store."""
    import torch

    from accelbench.stats import stat_columns, summarize
    from accelbench.telemetry import monitor

    torch.manual_seed(spec.seed)
    if ctx.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(ctx.device)
    module, info, cl = load_model(case, ctx.device)
    batches, blabels, n_real, desc, rcase = rank_data(ctx, case, inputs, info, cl)
    dev, transfer = ctx.device, case.include_transfer
    with precisions.forward_context(case.precision, dev):
        example = batches[0].to(dev)
        fwd, compile_s = modes.build(case.mode, module, example, dev)
        del example
        hits = accuracy_pass(fwd, batches, blabels, n_real, dev, transfer)
        t0 = time.perf_counter()
        for i in range(spec.warmup_batches):
            fwd(batches[i % len(batches)].to(dev, non_blocking=True))
        ctx.sync()
        batch_s = (time.perf_counter() - t0) / max(spec.warmup_batches, 1)
        n_passes = int(ctx.agree_max(passes_needed(spec, len(batches), batch_s)))
        with monitor(dev) as mon:
            (lat_ms, _), clocks = timed_window(ctx, lambda: time_passes(fwd, batches, n_passes, dev, transfer))
    st = summarize(lat_ms)
    samples = len(lat_ms) * rcase.batch_size
    rec = {
        **rank_header(WORKLOAD, case, rcase, ctx, cl, desc, info),
        "include_transfer": transfer, "compile_s": compile_s, "passes": n_passes,
        "batches_timed": len(lat_ms), "samples_timed": samples, **clocks,
        "throughput_samples_per_s": samples / clocks["rank_window_s"], **stat_columns(st, "latency"),
        "top1_correct": hits[1] if hits else None, "top5_correct": hits[5] if hits else None,
        "accuracy_samples": n_real if hits else None,
        "top1": hits[1] / n_real if hits else None, "top5": hits[5] / n_real if hits else None,
        **rank_fields(ctx),
    }
    tel = {**mon.record(), **memory_fields(ctx.device)}
    rec.update(tel)
    return {"record": rec, "series": {"latency_ms": lat_ms, **mon.series()}, "telemetry_keys": sorted(tel)}


def rank_header(workload: str, case: Case, rcase: Case, ctx: RankContext, channels_last: bool, desc: str, info) -> dict[str, Any]:
    """Identity columns of one rank's row: the case, this rank's share of it, the model's weights."""
    return {
        "workload": workload, "model": case.model, "batch_size": rcase.batch_size,
        "global_batch_size": rcase.batch_size * ctx.world, "scaling_mode": "strong" if ctx.opts.global_batch else "weak",
        "precision": case.precision, "mode": case.mode, "channels_last_setting": case.channels_last,
        "channels_last": channels_last, "data": case.data, "data_description": desc, "images": case.images,
        "rank_images": rcase.images, "image_size": case.image_size or info.image_size, "weights": info.weights,
        "pretrained": info.pretrained,
    }


def memory_fields(device) -> dict[str, Any]:
    """Peak allocator memory on a GPU; the process RSS on a CPU (torch keeps no CPU allocator stats)."""
    import torch

    if device.type == "cuda":
        return {"peak_mem_bytes": torch.cuda.max_memory_allocated(device),
                "peak_mem_reserved_bytes": torch.cuda.max_memory_reserved(device)}
    import psutil

    return {"process_rss_bytes": psutil.Process().memory_info().rss}
