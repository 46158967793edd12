"""The generate scenario's checks before a run and its measured case.

Checks (before anything exists): the model name resolves (:mod:`accelbench.models.hf`, or a user factory), and
every prompt plus its new tokens fits the model's context, read from the architecture's values or the checkpoint's
``config.json`` (a factory's model is checked when built: an ``error`` row).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.errors import ConfigError, Unsupported


@dataclass
class Built:
    """A model built for one (model, precision, backend) with its columns and its decode step (compiled once)."""

    key: tuple
    loaded: Any
    columns: dict
    step: Any
    graphs: bool


@dataclass
class SweepState:
    """What the cases of one sweep share: the device's ceilings; each model's perplexity by precision and fused
    projections (a model-numerics figure: the same for every batch size, prompt and backend loop); and the model
    the cases run now, with its compiled decode step: the cases of one (model, precision, backend) reuse them, so a
    sweep over batch sizes and prompt lengths builds once and compiles about twice (the first shapes, then dynamic
    ones), where a case per compile would spend most of a GPU sweep compiling. ``memory_bytes``: what the device
    had before the sweep built anything (:func:`accelbench.scenarios.generate.preflight.available_bytes`)."""

    ceilings: Any = None
    memory_bytes: int | None = None
    perplexities: dict = field(default_factory=dict)
    built: Built | None = None

    def release(self) -> None:
        """Drop the model in hand and its compiled step (and every compiled graph of the process), and hand the
        CUDA memory they held back (``torch.cuda.empty_cache``), so the next build starts from an empty cache."""
        import gc

        if self.built is None:
            return
        self.built = None
        gc.collect()
        import torch

        torch._dynamo.reset()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def check_model_name(name: str) -> tuple[int | None, bool | None]:
    """Resolve ``name`` without building it: ``(context length or None, has a tokenizer or None when unknown)``.

    Raises:
        UnknownModelError / MissingDependencyError: as :func:`accelbench.models.hf.check_lm` (or the factory's).
    """
    from accelbench.models import hf

    if not hf.is_lm_name(name):
        from accelbench.models import check_model

        hf.require_transformers()
        check_model(name)  # package.module:factory: imported and looked up, not called
        return None, None
    hf.check_lm(name)
    path = hf.checkpoint_dir(name)
    if path is None:
        values = hf.ARCHITECTURES[name[len(hf.PREFIX) :]].values
        return values.get("max_position_embeddings") or values.get("n_positions"), False
    config = json.loads((path / "config.json").read_text())
    context = config.get("max_position_embeddings") or config.get("n_positions")
    tokenizer = hf.has_tokenizer(path)
    return context, tokenizer


def check_fits(name: str, context: int | None, prompt_len: int, new_tokens: int) -> None:
    """Refuse a prompt plus new tokens longer than the model's context (positions past it have no meaning).

    Raises:
        ConfigError: naming the field to change (``new_tokens``, unless the prompt alone leaves no room for a decode
            step), how far it may go, and the model's maximum context.
    """
    if not context or prompt_len + new_tokens <= context:
        return
    limit = f"{name}'s maximum context is {context} tokens, prompt and new tokens together"
    least = min(new_tokens, 2)  # a generation's first decode step (a profiled step: its one position)
    if prompt_len + least > context:  # the prompt alone leaves no room
        raise ConfigError("prompt_lens", prompt_len, f"at most {context - least} tokens: {limit}")
    raise ConfigError(
        "new_tokens", new_tokens, f"at most {context - prompt_len} after a {prompt_len}-token prompt: {limit}"
    )


def _dtype(precision: str):
    """The dtype the case's model is loaded in (and its KV cache held in): the precision's cast dtype; bfloat16
    for the fp8 precisions (torchao's row-wise fp8 linear takes bf16 weights and activations:
    :mod:`accelbench.quant.fp8`); float32 otherwise."""
    import torch

    from accelbench import precisions
    from accelbench.quant import fp8

    p = precisions.get(precision)
    return getattr(torch, p.cast_dtype or (fp8.COMPUTE_DTYPE if p.quant == "float8" else "float32"))


def build(case, spec, device):
    """The case's model in its precision, quantized and fused as its precision and backend ask:
    ``(LoadedLM, columns)``.

    Raises:
        Unsupported: fused projections asked of a model not built like Llama.
    """
    from accelbench import backends, precisions
    from accelbench.models import hf

    loaded = load(case.model, device, _dtype(case.precision), spec.seed)
    hf.check_tokenizer(loaded)
    cols: dict[str, Any] = {}
    if backends.get(case.mode).fused:
        from accelbench.scenarios.generate.fuse import fusable, fuse_projections

        reason = fusable(loaded.module)
        if reason:
            raise Unsupported(f"fused projections: {reason}")
        cols["fused_layers"] = fuse_projections(loaded.module)
    p = precisions.get(case.precision)
    if p.weight_only:
        from accelbench.quant.weight_only import quantize_linears

        cols.update(quantize_linears(loaded.module, p.weight_only))
    elif p.quant == "float8":  # weights and activations in fp8 (W8A8): torch._scaled_mm through torchao
        from accelbench.quant.fp8 import quantize_lm

        cols.update(quantize_lm(loaded.module, p.granularity))
    return loaded, cols


def load(name: str, device, dtype, seed: int):
    """``hf:`` names through :func:`accelbench.models.hf.load_lm`; a factory's module, cast and moved."""
    from accelbench.models import hf

    if hf.is_lm_name(name):
        return hf.load_lm(name, device, dtype, seed)
    import torch

    from accelbench.models import create_model

    torch.manual_seed(seed)
    module = create_model(name).module.to(device=device, dtype=dtype).eval()
    info = hf.LMInfo(
        name=name,
        source="user",
        pretrained=False,
        weights="from the factory",
        context_len=hf.context_len(module.config),
        vocab_size=module.config.vocab_size,
    )
    return hf.LoadedLM(module, getattr(module, "tokenizer", None), info)


def prompts_for(case, loaded, seed: int, device):
    from accelbench.data.text import random_prompts, text_prompts

    ex = case.extras
    if ex.prompt_source == "text":
        if loaded.tokenizer is None:
            raise ValueError(f"{case.model} has no tokenizer: text prompts need one (use prompt_source random)")
        return text_prompts(loaded.tokenizer, case.batch_size, ex.prompt_len, seed, device)
    return random_prompts(case.batch_size, ex.prompt_len, loaded.info.vocab_size, seed, device)


def built_for(case, spec, device, state: SweepState) -> Built:
    """The case's model and decode step: the one in hand when the case shares its (model, precision, backend,
    seed), else a new build (the previous one released first: one model on the device at a time)."""
    from accelbench import backends
    from accelbench.quant.weight_only import compiled_reductions
    from accelbench.scenarios.generate.decode import compiled_step

    key = _key(case, spec)
    if state.built is not None and state.built.key == key:
        return state.built
    state.release()
    loaded, cols = build(case, spec, device)
    compiles = backends.get(case.mode).compiles
    graphs = compiles and device.type == "cuda"  # one CUDA graph a decode step: torch.compile's reduce-overhead
    mode = ("reduce-overhead" if graphs else "default") if compiles else None
    tune = compiled_reductions(loaded.module)  # linears compiled as Inductor reductions: compiled_step tunes them
    state.built = Built(key=key, loaded=loaded, columns=cols, step=compiled_step(mode, tune), graphs=graphs)
    return state.built


def runner(case, built: Built, device):
    """The backend's loop for this case (:mod:`accelbench.scenarios.generate.decode`)."""
    from accelbench import backends
    from accelbench.scenarios.generate.decode import HFGenerate, StaticLoop

    ex = case.extras
    if backends.get(case.mode).loop == "generate":
        return HFGenerate(built.loaded.module, ex.new_tokens, device)
    return StaticLoop(
        built.loaded.module, case.batch_size, ex.prompt_len, ex.new_tokens, device, step=built.step, graphs=built.graphs
    )


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

    from accelbench import backends
    from accelbench.data.text import held_out_text
    from accelbench.scenarios.generate.perplexity import perplexity

    key = (case.model, case.precision, backends.get(case.mode).fused, spec.settings.perplexity_window)
    if key not in cache:
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
    return (case.model, case.precision, case.mode, spec.seed)


def _measure_case(case, spec, state: SweepState, rank) -> tuple[dict, dict]:
    import torch

    from accelbench import backends
    from accelbench.core.rank import add_telemetry
    from accelbench.scenarios.base import case_monitor
    from accelbench.scenarios.generate.measure import generation_columns, warm_up
    from accelbench.scenarios.generate.shape import shape_of

    dev, ex = rank.device, case.extras
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    built = built_for(case, spec, dev, state)
    loaded, cols = built.loaded, built.columns
    check_fits(case.model, loaded.info.context_len, ex.prompt_len, ex.new_tokens)
    shape = shape_of(loaded.module, _dtype(case.precision))
    prompts = prompts_for(case, loaded, spec.seed, dev)
    run = runner(case, built, dev)
    warmup = 2 if backends.get(case.mode).compiles else 1  # compile, then a CUDA graph's recording
    try:
        first_s = warm_up(run, prompts, warmup, dev)
        with case_monitor(spec, case, dev, rank.pids()) as mon:  # the timed generations only
            gens = [run(prompts) for _ in range(spec.settings.repeats)]
    except BaseException:  # an OOM or a failed capture: the next case builds afresh, never on a half-captured step
        del run
        state.release()
        raise
    rec, series = generation_columns(
        gens,
        shape,
        batch_size=case.batch_size,
        prompt_len=ex.prompt_len,
        new_tokens=ex.new_tokens,
        ceilings=_ceilings(state.ceilings, case.precision),
    )
    rec.update(
        cols,
        weights=loaded.info.weights,
        pretrained=loaded.info.pretrained,
        prompt_len=ex.prompt_len,
        new_tokens=ex.new_tokens,
        prompt_source=ex.prompt_source,
        vocab_size=loaded.info.vocab_size,
        context_len=loaded.info.context_len,
        params=sum(p.numel() for p in loaded.module.parameters()),
        compile_s=first_s if backends.get(case.mode).compiles else None,
        samples_timed=rec["output_tokens_timed"],
    )
    if dev.type == "cuda":
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(dev)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    add_telemetry(rec, mon, dev)
    rec.update(quality(loaded, case, spec, dev, state.perplexities))
    return rec, {**series, **mon.series()}


def _ceilings(c, precision: str):
    from accelbench import precisions
    from accelbench.scenarios.generate.measure import Ceilings

    if c is None:
        return Ceilings()
    roof = precisions.get(precision).ceiling
    return Ceilings(
        dram_bytes_per_s=c.dram_bytes_per_s,
        datasheet_dram_bytes_per_s=c.datasheet_dram_bytes_per_s,
        flops_per_s=c.matmul_flops_per_s.get(roof),
        datasheet_flops_per_s=c.datasheet_flops_per_s.get(roof),
    )
