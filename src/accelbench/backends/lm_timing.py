"""accelbench's timing of a generation: one loop for the engines that expose each step, one for those that run a
whole generation; the engines (:mod:`accelbench.backends.generation`) run the model, these loops hold the clock.
``accelbench generate`` times its cases with them and ``accelbench serve`` its in-process ceiling, so both read one
clock the same way (the loops live beside the engines, below the scenarios, which never import each other).

- :func:`time_steps`: a :class:`accelbench.backends.engine.Session`'s prefill, then a decode step a token; a mark
  after the prefill and after each decode step.
- :func:`time_generation`: one whole generation (:meth:`accelbench.backends.engine.Engine.generate`), a mark each
  time the engine reports a token (Hugging Face ``generate`` reports it from a logits processor, which runs once a
  step right after the forward pass: the marks time the steps ``generate`` itself runs, its host work included).
- :func:`profile_decode`: a few more decode steps of a session under ``torch.profiler`` (what a step's time is
  made of: ``accelbench generate``'s all-reduce share of a split model).

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
from typing import Any


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


@dataclass(frozen=True, slots=True)
class Runner:
    """One case's timed generation, ``run(prompts) -> Generation`` (:func:`runner`).

    Attributes:
        generate: the timed generation a call runs.
        session: the :class:`accelbench.backends.engine.Session` the step loop runs (its KV cache allocated once),
            for more steps of the same shape (:func:`profile_decode`); None for an engine of whole generations.
    """

    generate: Callable
    session: Any = None

    def __call__(self, prompts) -> Generation:
        return self.generate(prompts)


def runner(engine, loaded, batch_size: int, prompt_len: int, new_tokens: int, device) -> Runner:
    """The timed generation of one case's shape: the step loop when the engine exposes steps
    (``capabilities.steps``: one session, its cache allocated once), else its whole generations."""
    if engine.capabilities.steps:
        session = engine.session(loaded, batch_size, prompt_len, new_tokens)
        return Runner(lambda prompts: time_steps(session, prompts, new_tokens, device), session)

    def generate(prompts, on_token):
        return engine.generate(loaded, prompts, new_tokens, on_token)

    return Runner(lambda prompts: time_generation(generate, prompts, device))


@dataclass(frozen=True, slots=True)
class DecodeProfile:
    """Decode steps recorded by ``torch.profiler`` (:func:`profile_decode`).

    Attributes:
        events: the profiler's events of the recorded steps (``torch.autograd.profiler_util.FunctionEvent``: host
            ops, and on a GPU its kernels), None when the profiler could not start.
        wall_s: synchronised wall time of the recorded steps, seconds.
        steps: decode steps recorded.
        error: why the profiler could not start, or None.
    """

    events: list | None
    wall_s: float
    steps: int
    error: str | None = None


def profile_decode(session, prompts, new_tokens: int, steps: int, device) -> DecodeProfile:
    """A prefill of ``prompts`` ``(batch, prompt_len)`` into ``session`` (its cache emptied first), then ``steps`` + 1
    decode steps under ``torch.profiler`` (host ops; on CUDA its kernels too), the first one not recorded.

    The unrecorded step lines the processes of a split model up again after the profiler's start, whose set-up
    (CUPTI's, on a GPU) takes each process its own time: recorded, the first collective would count that difference
    as waiting. Decode step ``i`` runs at position ``prompt_len + i``; past the session's last position
    (``new_tokens - 1`` decode steps) the cache is rewound to the prompt
    (:meth:`~accelbench.backends.engine.Session.rewind`) and the steps repeat. Every process of a split model must
    call it with the same arguments (the steps' collectives pair up); one whose profiler cannot start still runs them.

    Raises:
        ValueError: ``steps`` below 1.
    """
    if steps < 1:
        raise ValueError(f"steps {steps}: one recorded decode step at least")
    import contextlib
    import os

    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    # Kineto (the profiler's back end) prints its start and stop markers and, without a GPU, a failed device count to
    # the console of every rank; a profiler that fails here is this function's error note. Level 6 is past Kineto's
    # highest (libkineto/include/ILoggerObserver.h: ERROR 4, and USDT 5 in torch 2.14's, which prints the markers);
    # read when the profiler first starts. The user's setting stands.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")

    from accelbench.core.timing import sync

    prompt_len, positions = prompts.shape[1], max(new_tokens - 1, 1)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with torch.no_grad(), contextlib.ExitStack() as stack:
        session.reset()
        token = session.prefill(prompts)
        sync(device)
        prof, error = None, None
        try:
            prof = stack.enter_context(
                profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=steps, repeat=1))
            )
        except RuntimeError as exc:  # another profiler running in this process
            error = f"torch.profiler did not start: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        t0 = wall_s = 0.0
        for j in range(steps + 1):
            i = j % positions
            if i == 0 and j:
                session.rewind(prompt_len)
            token = session.decode(token, i)
            if j in (0, steps):
                sync(device)  # the unrecorded step's kernels end before the recording, the last step's inside it
            if j == steps:
                wall_s = time.perf_counter() - t0
            if prof is not None:
                prof.step()  # after step 0: recording starts; after the last: it stops
            if j == 0:
                t0 = time.perf_counter()
    return DecodeProfile(events=None if prof is None else list(prof.events()), wall_s=wall_s, steps=steps, error=error)


def warm_up(run, prompts, warmup: int, device) -> Generation:
    """``warmup`` (1 or more: :attr:`accelbench.backends.engine.Engine.warmup`) untimed generations; returns the first
    one, timed as any other: for a compiling engine its TTFT is the prefill's compile plus one prefill, its first
    inter-token latency the decode step's compile plus one step, and its wall time the whole first generation's
    (``compile_prefill_s``, ``compile_decode_s``, ``compile_s``). Run before the telemetry monitor starts, so energy
    and power are the timed generations' own.

    Raises:
        ValueError: ``warmup`` below 1.
    """
    from accelbench.core import stage

    if warmup < 1:
        raise ValueError(f"warmup {warmup}: one generation at least")
    stage.enter("the warm-up generation (a compiling engine compiles its steps here)")
    first = run(prompts)
    for _ in range(warmup - 1):
        run(prompts)
    return first
