"""One language-model training case, measured: the memory check, the model and its step
(:mod:`~accelbench.training.lm_step`), the timed windows, and the row.

Columns (declared in :mod:`accelbench.core.columns.train_lm`): ``tokens_per_step`` = batch x ``seq_len`` (a rank's),
``tokens_per_s`` = tokens timed / the window's synchronised wall time, ``tokens_per_s_per_gpu`` (the same in one
process; a rank's under torchrun), ``mfu`` = ``tokens_per_s_per_gpu`` x FLOPs a token
(:func:`~accelbench.training.lm_maths.flops_per_token`) / the precision's measured matmul ceiling, and
``mfu_datasheet`` against the datasheet's peak. On a GPU the memory split is read from the allocator
(``torch.cuda.memory_allocated``): ``param_bytes`` is what building the model and wrapping it added, ``grad_bytes``
and ``optimizer_state_bytes`` the bytes of the gradients and the optimizer's tensors this rank holds after a step,
``activation_bytes`` the step's peak less those three (activations and the step's temporaries). On a CPU they are
None (torch keeps no CPU allocator statistics).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelbench.core.lm_analytic import Shape
from accelbench.core.parallel_dims import ParallelDims
from accelbench.training import lm_maths


@dataclass(kw_only=True, slots=True)
class SweepState:
    """What the cases of one sweep share: the ceilings, the text's token stream per model, model shapes."""

    ceilings: Any = None
    text: dict[str, Any] = field(default_factory=dict)
    shapes: dict[str, Shape] = field(default_factory=dict)


def ceilings_for(store, device):
    """The device's ceilings: measured once and cached in ``store``; without a store (a torchrun rank) the
    datasheet's peaks alone, or None."""
    if store is not None:
        from accelbench.ceilings.cache import get_ceilings

        return get_ceilings(store, device)[0]
    return None


def _roofs(ceilings, device, precision: str) -> tuple[float | None, float | None]:
    """``(measured, datasheet)`` FLOP/s of ``precision``'s roof."""
    from accelbench import precisions

    roof = precisions.get(precision).ceiling
    if ceilings is not None:
        return ceilings.matmul_flops_per_s.get(roof), ceilings.datasheet_flops_per_s.get(roof)
    if device.type == "cuda":
        import torch

        from accelbench.ceilings.measure import datasheet

        return None, (datasheet(torch.cuda.get_device_name(device)) or {}).get("flops_per_s", {}).get(roof)
    return None, None


def check_memory(case, shape: Shape, device, world: int) -> None:
    """Refuse a case whose estimated step memory exceeds what the CPU has available (a CPU has no allocator that
    fails: exhausting RAM ends the process), before anything is built; a GPU's out-of-memory error is measured.

    Raises:
        EstimatedOutOfMemory: the estimate (:func:`accelbench.training.lm_maths.step_memory`) is larger.
    """
    if device.type != "cpu":
        return
    from accelbench import precisions
    from accelbench.core.memory import EstimatedOutOfMemory, available_bytes, gb

    p = precisions.get(case.precision)
    wide = p.cast_dtype is None
    ex = case.extras
    est = lm_maths.step_memory(
        shape,
        batch_size=case.batch_size,
        seq_len=ex.seq_len,
        param_bytes=4 if wide else 2,
        activation_bytes=4 if wide and p.autocast_dtype is None else 2,
        checkpointing=ex.activation_checkpointing,
        shards=ParallelDims.of(ex.parallel_strategy, world).dp_shard or 1,
    )
    available = available_bytes(device)
    if available is not None and est.total_bytes * world > available:
        raise EstimatedOutOfMemory(
            f"estimated {gb(est.total_bytes)} a process (weights, gradients and AdamW state {gb(est.state_bytes)}, "
            f"activations {gb(est.activation_bytes)}, logits {gb(est.logits_bytes)}), more than the "
            f"{gb(available)} of RAM available"
        )


def layout(case, rank) -> ParallelDims:
    """How the case's ranks split the model: its parallel strategy over every rank; one process: no split."""
    return ParallelDims.of(case.extras.parallel_strategy, rank.world) if rank.distributed else ParallelDims()


def build(case, spec, state: SweepState, rank) -> tuple[Any, list, dict[str, Any]]:
    """The model and its step (:func:`accelbench.training.lm_step.build_lm_step`), this rank's token batches on the
    device, and the row's first columns."""
    from accelbench import precisions
    from accelbench.core.errors import Unsupported
    from accelbench.training import lm_step

    dev, ex, st = rank.device, case.extras, spec.settings
    dims = layout(case, rank)
    if dims.dp_shard and (lm_step.fsdp_reason() or precisions.get(case.precision).grad_scaler):
        raise Unsupported(lm_step.fsdp_reason() or f"{case.precision}'s GradScaler is not sharded under FSDP2")
    built = lm_step.build_lm_step(
        case.model,
        case.precision,
        case.mode,
        rank,
        seed=spec.seed,
        checkpointing=ex.activation_checkpointing,
        lr=st.lr,
        weight_decay=st.weight_decay,
        fused=st.fused_optimizer,
        dims=dims,
        fsdp_autocast=st.fsdp_autocast,
    )
    step, shape = built.step, built.shape
    bs = rank.per_rank_batch(case.batch_size)
    ids = None
    if ex.token_source == "text":
        if case.model not in state.text:
            state.text[case.model] = lm_step.text_ids(built.loaded.tokenizer)
        ids = state.text[case.model]
    batches = lm_step.token_batches(
        ex.token_source,
        batch=bs,
        seq_len=ex.seq_len,
        count=st.batches,
        vocab=shape.vocab,
        seed=spec.seed,
        rank=rank.rank,
        world=rank.world,
        ids=ids,
    )
    rec: dict[str, Any] = dict(
        fp8_linear_layers=built.fp8_linear_layers,
        weights=built.loaded.info.weights,
        params=shape.params,
        non_embedding_params=shape.non_embedding_params,
        flops_per_token=lm_maths.flops_per_token(shape, ex.seq_len),
        rank_batch_size=bs,
        tokens_per_step=bs * ex.seq_len,
        parallel_strategy=ex.parallel_strategy if rank.distributed else None,
        mesh=dims.label if rank.distributed else None,
        optimizer="adamw",
        lr=st.lr,
        weight_decay=st.weight_decay,
        fused_optimizer=st.fused_optimizer,
        optimizer_fused=bool(step.optimizer.defaults.get("fused")),
        autocast=step.config.autocast and precisions.get(case.precision).autocast_dtype is not None,
    )
    return step, [(x.to(dev), y.to(dev)) for x, y in batches], rec


def measure_case(case, spec, state: SweepState, rank) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """One case's row and series (see the module docstring)."""
    import torch

    from accelbench.core.ci import window_columns
    from accelbench.core.rank import add_telemetry
    from accelbench.models.lm_shape import meta_shape
    from accelbench.scenarios.train.timed import time_steps
    from accelbench.training.lm_step import state_bytes

    dev = rank.device
    if case.model not in state.shapes:
        state.shapes[case.model] = meta_shape(case.model)
    check_memory(case, state.shapes[case.model], dev, rank.world)
    torch.manual_seed(spec.seed)
    cuda = dev.type == "cuda"
    base = torch.cuda.memory_allocated(dev) if cuda else 0
    step, batches, rec = build(case, spec, state, rank)
    params = torch.cuda.memory_allocated(dev) - base if cuda else None
    if cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    fn = lambda b: step(b[0], b[1])  # noqa: E731  (time_windows feeds one item at a time)
    first_loss = fn(batches[0])[0].item()  # the first step: compiles each layer in compile mode, builds DDP's buckets
    grads, opt = state_bytes(step) if cuda else (None, None)
    timed = time_steps(fn, batches, step, spec, case, rank)
    lat_ms, windows, clocks, mon = timed.lat_ms, timed.windows, timed.clocks, timed.monitor
    rec.update(timed.columns(step, first_loss, rec["tokens_per_step"]))
    tokens = rec["samples_timed"]
    rec.update(
        tokens_timed=tokens,
        tokens_per_s=rec["throughput_samples_per_s"],
        tokens_per_s_per_gpu=rec["throughput_samples_per_s"],
    )
    rec.update(_utilisation(rec, state.ceilings, dev, case.precision))
    add_telemetry(rec, mon, dev)
    rec.update(_memory_split(rec.get("peak_mem_bytes"), params, grads, opt))
    if rank.distributed:
        # DDP's exposed communication: the same steps with the gradient all-reduce off (no_sync), as the image step
        # measures it (FSDP2's reduce-scatter has no such switch that keeps the step the same)
        ddp = bool(layout(case, rank).dp)
        nosync = rank.nosync_step_ms(fn, batches, len(lat_ms), case.mode) if ddp else None
        rec.update(clocks, step_time_nosync_mean_ms=nosync, **rank.fields())
    else:
        del rec["rank_batch_size"]
    ci_cols, ci_series = window_columns(windows, rec["tokens_per_step"], "step_time")
    rec.update(ci_cols)
    return rec, {"step_time_ms": lat_ms, **ci_series, **mon.series()}


def _utilisation(rec: dict[str, Any], ceilings, device, precision: str) -> dict[str, Any]:
    measured, sheet = _roofs(ceilings, device, precision)
    achieved = rec["tokens_per_s_per_gpu"] * rec["flops_per_token"]
    return {
        "model_flops_per_s": achieved,
        "mfu": lm_maths.utilisation(achieved, measured),
        "mfu_datasheet": lm_maths.utilisation(achieved, sheet),
    }


def _memory_split(peak, params, grads, opt) -> dict[str, Any]:
    if peak is None or params is None:
        return {"param_bytes": None, "grad_bytes": None, "optimizer_state_bytes": None, "activation_bytes": None}
    return {
        "param_bytes": params,
        "grad_bytes": grads,
        "optimizer_state_bytes": opt,
        "activation_bytes": max(0, peak - params - grads - opt),
    }


def per_token_columns(rec: dict[str, Any]) -> dict[str, Any]:
    """``energy_per_token_j`` and ``cost_per_billion_tokens_usd`` of a row whose sample is a token (the derived
    ``energy_per_sample_j`` and ``cost_per_1000_samples_usd``); empty where the row has neither."""
    e, c = rec.get("energy_per_sample_j"), rec.get("cost_per_1000_samples_usd")
    if e is None and c is None:
        return {}
    return {"energy_per_token_j": e, "cost_per_billion_tokens_usd": None if c is None else c * 1e6}
