"""The generate scenario's measured case: the case's engine loads the model (one build shared by the cases of a
(model, precision, mode, seed): :class:`SweepState`), accelbench's loop times it
(:mod:`accelbench.backends.lm_timing`), and the row's columns are taken (:mod:`~accelbench.scenarios.generate
.measure`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from accelbench.backends.engine import Engine, LoadedModel


@dataclass
class Built:
    """A model an engine loaded for one (model, precision, mode, seed), and the engine that loaded it (which releases
    it: :meth:`accelbench.backends.engine.Engine.release`)."""

    key: tuple
    engine: Engine
    loaded: LoadedModel


@dataclass
class SweepState:
    """What the cases of one sweep share: the device's ceilings; each model's perplexity by precision and fused
    projections (a model-numerics figure: the same for every batch size, prompt and backend loop); and the model
    the cases run now, with its compiled prefill and decode steps: the cases of one (model, precision, engine) reuse
    them, so a sweep over batch sizes and prompt lengths builds once and compiles only where a shape asks it
    (:func:`accelbench.backends.lm_loop.compiled_steps`), where a build per case would spend most of a GPU sweep
    building and compiling. ``memory_bytes``: what the device
    had before the sweep built anything (:func:`accelbench.core.memory.available_bytes`)."""

    ceilings: Any = None
    memory_bytes: int | None = None
    perplexities: dict = field(default_factory=dict)
    built: Built | None = None

    def release(self) -> None:
        """Drop the model in hand and have its engine hand back the memory it held (its compiled steps and their
        CUDA graphs too), so the next build starts from an empty device."""
        if self.built is None:
            return
        engine, self.built = self.built.engine, None
        engine.release()


def prompts_for(case, loaded, seed: int, device):
    from accelbench.data.text import random_prompts, text_prompts

    ex = case.extras
    if ex.prompt_source == "text":
        if loaded.tokenizer is None:
            raise ValueError(f"{case.model} has no tokenizer: text prompts need one (use prompt_source random)")
        return text_prompts(loaded.tokenizer, case.batch_size, ex.prompt_len, seed, device)
    return random_prompts(case.batch_size, ex.prompt_len, loaded.info.vocab_size, seed, device)


def built_for(case, spec, device, state: SweepState) -> Built:
    """The case's loaded model: the one in hand when the case shares its (model, precision, mode, seed), else a new
    load by the case's engine (the previous one released first: one model on the device at a time); split over the
    job's ranks when the case is tensor-parallel (``case.extras.dims``)."""
    from accelbench.backends import engine as engines
    from accelbench.core import stage

    key = _key(case, spec)
    if state.built is not None and state.built.key == key:
        return state.built
    state.release()
    stage.enter("loading the model")
    engine, dims = engines.get(case.mode), case.extras.dims
    args = (case.model, case.precision, device, spec.seed)
    state.built = Built(key=key, engine=engine, loaded=engine.load(*args, dims=dims) if dims.tp else engine.load(*args))
    return state.built


def quality(loaded, case, spec, device, cache: dict) -> dict[str, Any]:
    """Perplexity of the case's model on the held-out text (once per model, precision and fused projections:
    ``cache``), or why there is none."""
    if not loaded.info.pretrained:
        return {"quality_note": "random weights: no quality reported (perplexity of random weights means nothing)"}
    if loaded.tokenizer is None:
        return {"quality_note": f"{case.model} has no tokenizer: no perplexity"}
    if not spec.settings.perplexity:
        return {}
    import torch

    from accelbench.backends import engine
    from accelbench.data.text import held_out_text
    from accelbench.scenarios.generate.perplexity import perplexity

    fused = engine.get(case.mode).capabilities.fused_projections
    key = (case.model, case.precision, fused, spec.settings.perplexity_window)
    if key not in cache:
        from accelbench.core import stage

        stage.enter("measuring perplexity")
        ids = torch.tensor(loaded.tokenizer(held_out_text())["input_ids"], dtype=torch.long)
        window = min(spec.settings.perplexity_window, loaded.info.context_len or spec.settings.perplexity_window)
        p = perplexity(loaded.module, ids, window=window, batch_size=8, device=device)
        cache[key] = {
            "perplexity": p.perplexity,
            "perplexity_tokens": p.tokens,
            "perplexity_window": p.window,
            "perplexity_text": "tinyshakespeare held-out 10 %",
        }
    return cache[key]


def measure_case(case, spec, state: SweepState, rank) -> tuple[dict, dict]:
    """Measure one generation case (see :mod:`accelbench.scenarios.generate`): ``(record, series)``.

    A case that runs out of memory on a model built for earlier cases is tried once more on a fresh build: the
    compiled step's CUDA graphs keep memory pools for every batch shape they recorded, so an out-of-memory error
    there can be the earlier cases' memory, not this case's. Only an OOM on a fresh build is the boundary
    (``oom_retried`` says the case ran on its second try).

    Raises:
        What the case raises (an OOM on a fresh build among them): the loop makes it a row.
    """
    from accelbench.core.errors import is_oom

    reused = state.built is not None and state.built.key == _key(case, spec)
    try:
        return _measure_case(case, spec, state, rank)
    except BaseException as exc:
        if not (reused and is_oom(exc)):
            raise
    # the failed try released the model, its graphs and their cached memory (SweepState.release): a fresh build
    rec, series = _measure_case(case, spec, state, rank)
    return {**rec, "oom_retried": True}, series


def _key(case, spec) -> tuple:
    """What a built model and its compiled step are shared by (:func:`built_for`)."""
    return (case.model, case.precision, case.mode, spec.seed, case.extras.tp_degree)


def _measure_case(case, spec, state: SweepState, rank) -> tuple[dict, dict]:
    import torch

    from accelbench.backends.lm_timing import runner, warm_up
    from accelbench.core.rank import add_telemetry
    from accelbench.models.lm_checks import check_fits
    from accelbench.models.lm_shape import shape_of
    from accelbench.quant.lm import lm_dtype
    from accelbench.scenarios.base import case_monitor
    from accelbench.scenarios.generate.measure import compile_columns, generation_columns
    from accelbench.scenarios.generate.step_profile import decode_profile_columns

    dev, ex = rank.device, case.extras
    if ex.tp_degree > 1:
        ex.dims.check_world(rank.world)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    built = built_for(case, spec, dev, state)
    engine, loaded = built.engine, built.loaded
    check_fits(case.model, loaded.info.context_len, ex.prompt_len, ex.new_tokens)
    shape = shape_of(loaded.module, lm_dtype(case.precision))
    per_gpu_weights = shape.weight_bytes  # this GPU's shard; the figures below are every GPU's
    shape = dataclasses.replace(shape, weight_bytes=per_gpu_weights * ex.tp_degree)
    prompts = prompts_for(case, loaded, spec.seed, dev)
    run = runner(engine, loaded, case.batch_size, ex.prompt_len, ex.new_tokens, dev)
    try:
        first = warm_up(run, prompts, engine.warmup, dev)
        with case_monitor(spec, case, dev, rank.pids()) as mon:  # the timed generations only
            gens = [run(prompts) for _ in range(spec.settings.repeats)]
        profiled = decode_profile_columns(run, prompts, ex.new_tokens, dev, split=ex.tp_degree > 1)  # every rank
    except BaseException:  # an OOM or a failed capture: the next case builds afresh, never on a half-captured step
        del run, built, loaded
        state.release()
        raise
    rec, series = generation_columns(
        gens,
        shape,
        batch_size=case.batch_size,
        prompt_len=ex.prompt_len,
        new_tokens=ex.new_tokens,
        ceilings=_ceilings(state.ceilings, case.precision, ex.tp_degree),
    )
    rec.update(
        loaded.columns,
        weights=loaded.info.weights,
        pretrained=loaded.info.pretrained,
        prompt_len=ex.prompt_len,
        new_tokens=ex.new_tokens,
        prompt_source=ex.prompt_source,
        vocab_size=loaded.info.vocab_size,
        context_len=loaded.info.context_len,
        params=shape.params,  # the whole model's, a split one's too
        samples_timed=rec["output_tokens_timed"],
    )
    rec.update(compile_columns(first, engine.capabilities))
    if dev.type == "cuda":
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(dev)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    add_telemetry(rec, mon, dev)
    rec.update(split_columns(rec, rank, ex.tp_degree, per_gpu_weights), **profiled)
    rec.update(quality(loaded, case, spec, dev, state.perplexities))
    return rec, {**series, **mon.series()}


def split_columns(rec: dict, rank, tp: int, weight_bytes_per_gpu: int) -> dict[str, Any]:
    """The columns of a model split over ``tp`` GPUs (:mod:`accelbench.models.tensor_parallel`): per GPU (rates,
    weights, KV cache: the cache is sharded by heads) beside the whole model's, the job's layout, and the energy of
    every GPU (each rank measures its own; summed on rank 0, the row's rank). Peak memory is the largest rank's.
    Every rank calls it (the energy is gathered)."""
    out: dict[str, Any] = {"tp_degree": tp}
    if tp == 1:
        return out
    out.update(
        world_size=rank.world,
        mesh=f"tp={tp}",
        weight_bytes_per_gpu=weight_bytes_per_gpu,
        kv_cache_bytes_per_gpu=rec["kv_cache_bytes"] // tp,
        output_tokens_per_s_per_gpu=_per(rec.get("output_tokens_per_s"), tp),
        decode_tokens_per_s_per_gpu=_per(rec.get("decode_tokens_per_s"), tp),
    )
    every = rank.gather({k: rec.get(k) for k in ("energy_j", "peak_mem_bytes", "peak_mem_reserved_bytes")})
    if every is not None:  # rank 0
        energies = [r["energy_j"] for r in every]
        out["energy_j"] = None if None in energies else sum(energies)
        for k in ("peak_mem_bytes", "peak_mem_reserved_bytes"):
            values = [r[k] for r in every if r[k] is not None]
            out[k] = max(values) if values else None
    return out


def _per(value: float | None, n: int) -> float | None:
    return None if value is None else value / n


def _ceilings(c, precision: str, gpus: int = 1):
    """The roofs of ``gpus`` GPUs of this kind (a split model's MBU and MFU are over every GPU's bandwidth and
    FLOP/s: the bytes and FLOPs counted are the whole model's)."""
    from accelbench import precisions
    from accelbench.scenarios.generate.measure import Ceilings

    if c is None:
        return Ceilings()
    roof = precisions.get(precision).ceiling

    def times(v):
        return None if v is None else v * gpus

    return Ceilings(
        dram_bytes_per_s=times(c.dram_bytes_per_s),
        datasheet_dram_bytes_per_s=times(c.datasheet_dram_bytes_per_s),
        flops_per_s=times(c.matmul_flops_per_s.get(roof)),
        datasheet_flops_per_s=times(c.datasheet_flops_per_s.get(roof)),
    )
