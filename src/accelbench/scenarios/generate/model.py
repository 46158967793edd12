"""The generate scenario's checks before a run and its measured case.

Checks (before anything exists): the model name resolves (:mod:`accelbench.models.hf`, or a user factory), and
every prompt plus its new tokens fits the model's context, read from the architecture's values or the checkpoint's
``config.json`` (a factory's model is checked when built: an ``error`` row).
"""

from __future__ import annotations

import json
from typing import Any

from accelbench.core.errors import ConfigError, Unsupported


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
    path = hf._checkpoint_dir(name)
    if path is None:
        values = hf.ARCHITECTURES[name[len(hf.PREFIX):]].values
        return values.get("max_position_embeddings") or values.get("n_positions"), False
    config = json.loads((path / "config.json").read_text())
    context = config.get("max_position_embeddings") or config.get("n_positions")
    tokenizer = any((path / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"))
    return context, tokenizer


def check_fits(name: str, context: int | None, prompt_len: int, new_tokens: int) -> None:
    """Refuse a prompt plus new tokens longer than the model's context (positions past it have no meaning).

    Raises:
        ConfigError: naming the model, the lengths and the context.
    """
    if context and prompt_len + new_tokens > context:
        raise ConfigError("prompt_lens", prompt_len, f"prompt + new tokens <= {name}'s context of {context} tokens "
                          f"(asked {prompt_len} + {new_tokens})")


def _dtype(precision: str):
    import torch

    from accelbench import precisions

    return getattr(torch, precisions.get(precision).cast_dtype or "float32")


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
    scheme = precisions.get(case.precision).weight_only
    if scheme:
        from accelbench.quant.weight_only import quantize_linears

        cols.update(quantize_linears(loaded.module, scheme))
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
    info = hf.LMInfo(name=name, source="user", pretrained=False, weights="from the factory",
                     context_len=hf._context_len(module.config), vocab_size=module.config.vocab_size)
    return hf.LoadedLM(module, getattr(module, "tokenizer", None), info)


def prompts_for(case, loaded, seed: int, device):
    from accelbench.data.text import random_prompts, text_prompts

    ex = case.extras
    if ex.prompt_source == "text":
        if loaded.tokenizer is None:
            raise ValueError(f"{case.model} has no tokenizer: text prompts need one (use prompt_source random)")
        return text_prompts(loaded.tokenizer, case.batch_size, ex.prompt_len, seed, device)
    return random_prompts(case.batch_size, ex.prompt_len, loaded.info.vocab_size, seed, device)


def runner(case, loaded, device):
    """The backend's loop for this case (:mod:`accelbench.scenarios.generate.decode`)."""
    from accelbench import backends
    from accelbench.scenarios.generate.decode import HFGenerate, StaticLoop

    backend = backends.get(case.mode)
    ex = case.extras
    if backend.loop == "generate":
        return HFGenerate(loaded.module, ex.new_tokens, device)
    mode = ("reduce-overhead" if device.type == "cuda" else "default") if backend.compiles else None
    return StaticLoop(loaded.module, case.batch_size, ex.prompt_len, ex.new_tokens, device, compile_mode=mode)


def quality(loaded, case, spec, device) -> dict[str, Any]:
    """Perplexity of the case's model on the held-out text, or why there is none."""
    if not loaded.info.pretrained:
        return {"quality_note": "random weights: no quality reported (perplexity of random weights means nothing)"}
    if loaded.tokenizer is None:
        return {"quality_note": f"{case.model} has no tokenizer: no perplexity"}
    if not spec.settings.perplexity:
        return {}
    import torch

    from accelbench.data.text import held_out_text
    from accelbench.scenarios.generate.perplexity import perplexity

    ids = torch.tensor(loaded.tokenizer(held_out_text())["input_ids"], dtype=torch.long)
    window = min(spec.settings.perplexity_window, loaded.info.context_len or spec.settings.perplexity_window)
    p = perplexity(loaded.module, ids, window=window, batch_size=8, device=device)
    return {"perplexity": p.perplexity, "perplexity_tokens": p.tokens, "perplexity_window": p.window,
            "perplexity_text": "tinyshakespeare held-out 10 %"}


def measure_case(case, spec, ceilings, rank) -> tuple[dict, dict]:
    """Measure one generation case (see :mod:`accelbench.scenarios.generate`): ``(record, series)``."""
    import torch

    from accelbench import backends
    from accelbench.core.rank import add_telemetry
    from accelbench.scenarios.generate.measure import Ceilings, generation_columns, timed_generations
    from accelbench.scenarios.generate.shape import shape_of
    from accelbench.telemetry import monitor

    dev, ex = rank.device, case.extras
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    loaded, cols = build(case, spec, dev)
    check_fits(case.model, loaded.info.context_len, ex.prompt_len, ex.new_tokens)
    shape = shape_of(loaded.module, _dtype(case.precision))
    prompts = prompts_for(case, loaded, spec.seed, dev)
    run = runner(case, loaded, dev)
    warmup = 2 if backends.get(case.mode).compiles else 1  # compile, then a CUDA graph's recording
    with monitor(dev, spec.telemetry_period_ms / 1000, rank.pids()) as mon:
        gens, first_s = timed_generations(run, prompts, spec.settings.repeats, warmup, dev)
    rec, series = generation_columns(gens, shape, batch_size=case.batch_size, prompt_len=ex.prompt_len,
                                     new_tokens=ex.new_tokens, ceilings=_ceilings(ceilings, case.precision))
    rec.update(cols, weights=loaded.info.weights, pretrained=loaded.info.pretrained, prompt_len=ex.prompt_len,
               new_tokens=ex.new_tokens, prompt_source=ex.prompt_source, vocab_size=loaded.info.vocab_size,
               context_len=loaded.info.context_len, params=sum(p.numel() for p in loaded.module.parameters()),
               compile_s=first_s if backends.get(case.mode).compiles else None,
               samples_timed=rec["output_tokens_timed"])
    if dev.type == "cuda":
        rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(dev)
        rec["peak_mem_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
    add_telemetry(rec, mon, dev)
    rec.update(quality(loaded, case, spec, dev))
    return rec, {**series, **mon.series()}


def _ceilings(c, precision: str):
    from accelbench import precisions
    from accelbench.scenarios.generate.measure import Ceilings

    if c is None:
        return Ceilings()
    roof = precisions.get(precision).ceiling
    return Ceilings(dram_bytes_per_s=c.dram_bytes_per_s, datasheet_dram_bytes_per_s=c.datasheet_dram_bytes_per_s,
                    flops_per_s=c.matmul_flops_per_s.get(roof), datasheet_flops_per_s=c.datasheet_flops_per_s.get(roof))
