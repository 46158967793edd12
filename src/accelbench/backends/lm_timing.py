"""accelbench's timing of a generation: one loop for the engines that expose each step, one for those that run a
whole generation; the engines (:mod:`accelbench.backends.generation`) run the model, these loops hold the clock.
``accelbench generate`` times its cases with them and ``accelbench serve`` its in-process ceiling, so both read one
clock the same way (the loops live beside the engines, below the scenarios, which never import each other).

- :func:`time_steps`: a :class:`accelbench.backends.engine.Session`'s prefill, then a decode step a token; a mark
  after the prefill and after each decode step.
- :func:`time_generation`: one whole generation (:meth:`accelbench.backends.engine.Engine.generate`), a mark each
  time the engine reports a token (Hugging Face ``generate`` reports it from a logits processor, which runs once a
  step right after the forward pass: the marks time the steps ``generate`` itself runs, its host work included).

Timing (both loops): the device is synchronised, a mark is taken, then one mark after each token
(:class:`accelbench.core.timing.Marks`: CUDA events on a GPU, no host synchronisation between tokens). Time to
first token (TTFT) is the first token's mark (prefill + first token), the inter-token latencies (ITL) are the gaps
between consecutive marks (one decode step each: the time per output token, TPOT, is their distribution), and the
end-to-end latency is the synchronised wall time of the whole call.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Generation:
    """One timed generation of ``batch x new_tokens`` tokens.

    Attributes:
        ttft_s: time to first token (prefill and the first token), seconds.
        itl_s: the ``new_tokens - 1`` inter-token latencies (decode steps), seconds.
        e2e_s: synchronised wall time of the whole generation, seconds.
        tokens: ``(batch, new_tokens)`` int64 token ids on the CPU.
    """

    ttft_s: float
    itl_s: tuple[float, ...]
    e2e_s: float
    tokens: object


def _generation(marks, t0: float, tokens) -> Generation:
    from accelbench.core.timing import sync

    sync(marks.device)
    e2e = time.perf_counter() - t0
    times = marks.seconds()
    return Generation(
        ttft_s=times[1], itl_s=tuple(b - a for a, b in zip(times[1:], times[2:])), e2e_s=e2e, tokens=tokens.cpu()
    )


def time_steps(session, prompts, new_tokens: int, device) -> Generation:
    """One generation of ``new_tokens`` tokens a sequence through ``session`` (its cache emptied first), timed per
    step; ``prompts`` ``(batch, prompt_len)`` int64 on ``device``."""
    import torch

    from accelbench.core.timing import Marks, sync

    with torch.no_grad():  # not inference_mode: the cache's buffers are updated in place across calls
        session.reset()
        marks = Marks(device)
        sync(device)
        t0 = time.perf_counter()
        marks.mark()
        token = session.prefill(prompts)
        marks.mark()
        out = [token]
        for i in range(new_tokens - 1):
            token = session.decode(token, i)
            marks.mark()
            out.append(token)
    return _generation(marks, t0, torch.cat(out, dim=1))


def time_generation(generate: Callable, prompts, device) -> Generation:
    """One whole generation, ``generate(prompts, on_token) -> tokens (batch, new_tokens)``, timed by a mark at each
    ``on_token()`` call (:meth:`accelbench.backends.engine.Engine.generate` bound to its model and token count)."""
    from accelbench.core.timing import Marks, sync

    marks = Marks(device)
    sync(device)
    t0 = time.perf_counter()
    marks.mark()
    tokens = generate(prompts, marks.mark)
    return _generation(marks, t0, tokens)


def runner(engine, loaded, batch_size: int, prompt_len: int, new_tokens: int, device) -> Callable:
    """``run(prompts) -> Generation`` for one case's shape: the step loop when the engine exposes steps
    (``capabilities.steps``: one session, its cache allocated once), else its whole generations."""
    if engine.capabilities.steps:
        session = engine.session(loaded, batch_size, prompt_len, new_tokens)
        return lambda prompts: time_steps(session, prompts, new_tokens, device)

    def generate(prompts, on_token):
        return engine.generate(loaded, prompts, new_tokens, on_token)

    return lambda prompts: time_generation(generate, prompts, device)


def warm_up(run, prompts, warmup: int, device) -> Generation:
    """``warmup`` (1 or more: :attr:`accelbench.backends.engine.Engine.warmup`) untimed generations; returns the first
    one, timed as any other: for a compiling engine its TTFT is the prefill's compile plus one prefill, its first
    inter-token latency the decode step's compile plus one step, and its wall time the whole first generation's
    (``compile_prefill_s``, ``compile_decode_s``, ``compile_s``). Run before the telemetry monitor starts, so energy
    and power are the timed generations' own.

    Raises:
        ValueError: ``warmup`` below 1.
    """
    if warmup < 1:
        raise ValueError(f"warmup {warmup}: one generation at least")
    first = run(prompts)
    for _ in range(warmup - 1):
        run(prompts)
    return first
