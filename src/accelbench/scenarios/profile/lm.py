"""The profiled step of a language model: one prefill or one decode step of a step engine's session
(:class:`accelbench.backends.engine.Session`, the static-cache engines of :mod:`accelbench.backends.generation`).

| step | what one step runs |
| --- | --- |
| prefill | :meth:`~accelbench.backends.engine.Session.prefill`: ``batch x prompt_len`` tokens into the cache, the LM head on the last, the greedy first token |
| decode | :meth:`~accelbench.backends.engine.Session.decode`: one token a sequence at position ``prompt_len`` (the cache filled by a prefill: the context is ``prompt_len + 1``), the greedy next token |

The model, its precision (weight-only quantization included), fused projections and the prefill and decode steps
(eager, or both ``torch.compile``-d, on CUDA one CUDA graph a step: ``reduce-overhead``) are the case's engine's
own, through its public verbs (``load``, ``session``) as ``accelbench generate`` runs them: what ``profile``
measures is what ``generate`` times, the compiled prefill of a compiling engine included (a decode step's cache is
filled by the eager prefill, which it reads the same). A repeated step writes
the same cache positions again (``rewind``), so every repetition does the same work.

The analytic counts are the shared ones of a decoder (:mod:`accelbench.core.lm_analytic`) for the same shape:
prefill FLOPs ``prefill_flops(shape, B, P)`` and least bytes ``weights + KV(B, P)``; decode FLOPs
``decode_flops(shape, B, P + 1)`` and bytes ``decode_bytes(shape, B, P + 1)`` (generate's
``decode_step_flops``/``decode_step_bytes`` of a generation with 2 new tokens).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LM_STEPS = ("prefill", "decode")


@dataclass
class LMWorkload:
    """A built prefill, decode or training step of a language model (the training step:
    :mod:`accelbench.scenarios.profile.lm_train`), ready to run.

    Attributes:
        run: one step (prefill and decode: no gradients); reset: the cache's write position set back to where the
            step starts (one tiny kernel: run before each step, outside the profiled range; nothing for a training
            step); counts: the step's analytic counts
            (:class:`accelbench.core.analytic.AnalyticCounts`); columns: the model's own (weights, quantization,
            fused layers, KV cache, prompt length); compile_s: the first call's wall time of the compiled step (its
            compile and one run), None for an engine that compiles nothing.
    """

    run: Callable[[], Any]
    reset: Callable[[], Any]
    counts: Any
    columns: dict
    compile_s: float | None


def counts(shape, step: str, batch_size: int, prompt_len: int, params: int):
    """The analytic counts of one ``step`` (``prefill`` or ``decode``) of a model of ``shape``
    (:class:`accelbench.core.lm_analytic.Shape`): see the module docstring for the rule."""
    from accelbench.core import lm_analytic as metrics
    from accelbench.core.analytic import AnalyticCounts

    if step == "prefill":
        flops = metrics.prefill_flops(shape, batch_size, prompt_len)
        least = shape.weight_bytes + metrics.kv_cache_bytes(shape, batch_size, prompt_len)
    else:
        flops = metrics.decode_flops(shape, batch_size, prompt_len + 1)
        least = metrics.decode_bytes(shape, batch_size, prompt_len + 1)
    return AnalyticCounts(
        flops=flops, forward_flops=flops, params=params, param_bytes=shape.weight_bytes, min_bytes=least
    )


def _eager_prefill(loop) -> None:
    """Have ``loop`` (a session with :class:`~accelbench.backends.engine.Steps`) fill its cache with the eager
    prefill: a decode step reads what any prefill wrote, and the eager one spares a compiled prefill's compile (tens
    of seconds for an 8B model, more under ncu) that a decode profile never runs."""
    import dataclasses

    from accelbench.backends.lm_loop import prefill_step

    if hasattr(loop, "steps"):
        loop.steps = dataclasses.replace(loop.steps, prefill=prefill_step)


def build(case, spec, device) -> LMWorkload:
    """The case's prefill or decode step on ``device`` (see the module docstring).

    Raises:
        ConfigError: the prompt does not fit the model's context. Unsupported, RuntimeError (OOM, a failed compile):
            as the engine's load and first step raise them.
    """
    import time

    import torch

    from accelbench.backends import engine as engines
    from accelbench.core.timing import sync
    from accelbench.data.text import random_prompts
    from accelbench.models.lm_checks import check_fits
    from accelbench.models.lm_shape import shape_of
    from accelbench.quant.lm import lm_dtype

    prompt_len, step = case.extras.prompt_len, case.extras.step
    engine = engines.get(case.mode)
    loaded = engine.load(case.model, case.precision, device, spec.seed)
    check_fits(case.model, loaded.info.context_len, prompt_len, 1)
    loop = engine.session(loaded, case.batch_size, prompt_len, 2)
    prompts = random_prompts(case.batch_size, prompt_len, loaded.info.vocab_size, spec.seed, device)
    shape = shape_of(loaded.module, lm_dtype(case.precision))
    params = sum(p.numel() for p in loaded.module.parameters())
    if step == "decode":
        _eager_prefill(loop)
    with torch.no_grad():
        loop.rewind(0)
        sync(device)
        t0 = time.perf_counter()
        token = loop.prefill(prompts)  # fills the cache the decode step reads; the first call compiles
        sync(device)
        first_s = time.perf_counter() - t0
    start = 0 if step == "prefill" else prompt_len
    if step == "decode":
        t0 = time.perf_counter()
        with torch.no_grad():
            loop.rewind(start)
            loop.decode(token, 0)
        sync(device)
        first_s = time.perf_counter() - t0
    compile_s = first_s if engine.capabilities.compiles else None

    def run():
        with torch.no_grad():
            return loop.prefill(prompts) if step == "prefill" else loop.decode(token, 0)

    def reset():
        with torch.no_grad():
            loop.rewind(start)

    cols = {
        **loaded.columns,
        # what the step ran on: random token ids, no image data (the spec's shared data and images fields are an
        # image model's; a language-model row must not claim them)
        "data": None,
        "images": None,
        "prompt_source": "random",
        "weights": loaded.info.weights,
        "pretrained": loaded.info.pretrained,
        "vocab_size": loaded.info.vocab_size,
        "context_len": loaded.info.context_len,
        "prompt_len": prompt_len,
        "weight_bytes": shape.weight_bytes,
        "kv_bytes_per_token": shape.kv_bytes_per_token,
        "kv_cache_bytes": shape.kv_bytes_per_token * case.batch_size * (prompt_len + (step == "decode")),
    }
    return LMWorkload(
        run=run,
        reset=reset,
        counts=counts(shape, step, case.batch_size, prompt_len, params),
        columns=cols,
        compile_s=compile_s,
    )
