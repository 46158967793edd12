"""The in-process ceiling beside each served level: the same checkpoint decoded in this process at the level's
batch, with the run's prompt and output lengths, through an in-process engine (:mod:`accelbench.backends.engine`;
``--ceiling static-compile`` by default on CUDA) and timed by accelbench's own loop
(:func:`accelbench.backends.lm_timing.runner`: CUDA events, a mark after the prefill and after each decode step).
A compiling engine's prefill and decode steps are both compiled (:func:`accelbench.backends.lm_loop.compiled_steps`),
so the ceiling's end-to-end time, prefill included, is the engine's best.

When: once per distinct batch of a model, after the model's last level (the server idle). A server accelbench
launched is stopped first (its process group ended, so its GPU memory is free for the in-process model); a server
given by ``--url`` is left running, idle, and keeps whatever memory it holds.

The batch of a level: its concurrency (closed loop); for an open-loop level, its observed mean requests in flight
rounded to the nearest integer >= 1 (:func:`accelbench.scenarios.serve.roof.occupancy`).

Columns (each level row): ``ceiling_mode``, ``ceiling_batch``, ``ceiling_tpot_p50_ms`` (the median decode step of
the timed generations), ``ceiling_output_tokens_per_s`` (``batch x new tokens / mean end-to-end``, prefill included,
as ``accelbench generate``'s ``output_tokens_per_s``), and

    engine_share_of_ceiling = served output_tokens_per_s / ceiling_output_tokens_per_s   (same batch)

(the share of what this device does in-process that the served engine delivers). A ceiling that cannot be taken
(the model and its KV cache estimated not to fit the free memory, a context too short, an out-of-memory error) is a
``ceiling_note`` on the rows, never a failed level; where more than one GPU is visible, the note of a batch that
does not fit one says ``--ceiling-gpus`` can take it split.

A model larger than one GPU: ``--ceiling-gpus N`` (N > 1) takes the ceiling split over N GPUs by tensor parallelism,
in its own ``accelbench generate --gpus N --parallel tp`` command (:mod:`~accelbench.scenarios.serve.ceiling_split`):
the same batches, precision, engine, lengths and repeats, the same columns, and ``ceiling_tp_degree`` = N (None for
the ceiling on one device). The one-device memory check above does not apply there: the generate command's own
per-GPU preflight refuses a split that does not fit, and that refusal is the note.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NONE = "none"  # --ceiling none: no in-process ceiling
REPEATS = 3  # timed generations a batch (after the warm-up): the median step over all their decode steps
HEADROOM = 1.2  # the free memory a ceiling asks: 20 % over weights + KV cache, for activations and the allocator


@dataclass(frozen=True, kw_only=True, slots=True)
class Ceiling:
    """One batch's in-process ceiling (``note`` instead of figures when it could not be taken); ``tp_degree``: the
    GPUs a split ceiling was taken (or asked) over, None on one device."""

    batch: int
    tpot_p50_ms: float | None = None
    output_tokens_per_s: float | None = None
    note: str | None = None
    tp_degree: int | None = None


def engines() -> tuple[str, ...]:
    """The registered engines that run a model in this process (``capabilities.in_process``): what ``--ceiling``
    takes besides ``none``."""
    from accelbench.backends.engine import ENGINES

    return tuple(n for n, e in ENGINES.items() if e.capabilities.in_process)


def batch_of(row: dict[str, Any]) -> int | None:
    """The batch a level row's ceiling is taken at (module docstring); None without a load to go by."""
    if row.get("concurrency"):
        return int(row["concurrency"])
    in_flight = row.get("mean_in_flight_requests")
    return max(1, round(in_flight)) if in_flight else None


def lengths(requests: list) -> tuple[int, int]:
    """``(prompt_len, new_tokens)`` of a ceiling: the requests' mean prompt tokens and mean asked output tokens
    (rounded; output lengths the server decides count as 128), at least 1 and 2."""
    prompt = round(sum(r.prompt_tokens for r in requests) / len(requests))
    outs = [r.output_len or 128 for r in requests]
    return max(1, prompt), max(2, round(sum(outs) / len(outs)))


def _fits(shape, batch: int, prompt_len: int, new_tokens: int, device) -> str | None:
    """Why ``batch`` does not fit ``device``'s free memory (weights + KV cache, :data:`HEADROOM` over), or None."""
    from accelbench.core import lm_analytic
    from accelbench.core.memory import available_bytes, gb

    free = available_bytes(device)
    if shape is None or free is None:
        return None
    need = HEADROOM * (shape.weight_bytes + lm_analytic.kv_cache_bytes(shape, batch, prompt_len + new_tokens))
    if need <= free:
        return None
    gpus = _gpus_visible(device)
    split = f" (--ceiling-gpus N splits it over N of the {gpus} GPUs)" if gpus > 1 else ""
    return f"batch {batch} needs about {gb(need)}, {gb(free)} free: no ceiling{split}"


def _gpus_visible(device) -> int:
    """The CUDA GPUs this process sees when ``device`` is one of them, else 0."""
    if device.type != "cuda":
        return 0
    import torch

    return torch.cuda.device_count()


def _one(engine, loaded, batch: int, prompt_len: int, new_tokens: int, device, seed: int) -> Ceiling:
    import numpy as np

    from accelbench.backends.lm_timing import runner, warm_up
    from accelbench.core import lm_analytic
    from accelbench.data.text import random_prompts

    prompts = random_prompts(batch, prompt_len, loaded.info.vocab_size, seed, device)
    run = runner(engine, loaded, batch, prompt_len, new_tokens, device)
    warm_up(run, prompts, engine.warmup, device)
    gens = [run(prompts) for _ in range(REPEATS)]
    itl = [t for g in gens for t in g.itl_s]
    e2e = float(np.mean([g.e2e_s for g in gens]))
    rates = lm_analytic.rates(batch, prompt_len, new_tokens, None, None, e2e)
    return Ceiling(batch=batch, tpot_p50_ms=float(np.median(itl)) * 1e3, output_tokens_per_s=rates.output_tokens_per_s)


def measure(
    model: str, batches: list[int], prompt_len: int, new_tokens: int, *, mode: str, shape, device, seed: int
) -> dict[int, Ceiling]:
    """The ceiling of ``model`` at each of ``batches`` (ascending; after an out-of-memory error the larger ones are
    notes), loaded once by engine ``mode`` in the served precision and released after.

    Raises:
        Nothing for a model that cannot be loaded or run: every batch gets that one-line note instead.
    """
    from accelbench.backends import engine as engines
    from accelbench.core.errors import is_oom
    from accelbench.models.lm_checks import check_fits
    from accelbench.scenarios.serve.roof import served_precision

    out: dict[int, Ceiling] = {}
    todo = sorted(set(batches))
    for b in todo:
        why = _fits(shape, b, prompt_len, new_tokens, device)
        if why is not None:
            out[b] = Ceiling(batch=b, note=why)
    todo = [b for b in todo if b not in out]
    if not todo:
        return out
    engine, loaded = engines.get(mode), None
    try:
        loaded = engine.load(model, served_precision(device), device, seed)
        check_fits(model, loaded.info.context_len, prompt_len, new_tokens)
        for b in todo:
            try:
                out[b] = _one(engine, loaded, b, prompt_len, new_tokens, device, seed)
            except Exception as exc:
                if not is_oom(exc):
                    raise
                out.update({x: Ceiling(batch=x, note=f"out of memory at batch {b}") for x in todo if x >= b})
                break
    except Exception as exc:  # the ceiling is beside the levels: its failure is a note on them, never a failed row
        note = f"no ceiling: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:300]
        out.update({b: Ceiling(batch=b, note=note) for b in todo if b not in out})
    finally:
        del loaded
        engine.release()  # the model's memory and its compiled steps' graphs, before anything runs after the ceiling
    return out


def columns(mode: str, ceiling: Ceiling | None, served_tokens_per_s: float | None) -> dict[str, Any]:
    """A level row's ceiling columns (module docstring) for its batch's ``ceiling``."""
    if ceiling is None:
        return {"ceiling_mode": mode}
    share = None
    if ceiling.output_tokens_per_s and served_tokens_per_s is not None:
        share = served_tokens_per_s / ceiling.output_tokens_per_s
    return {
        "ceiling_mode": mode,
        "ceiling_batch": ceiling.batch,
        "ceiling_tpot_p50_ms": ceiling.tpot_p50_ms,
        "ceiling_output_tokens_per_s": ceiling.output_tokens_per_s,
        "engine_share_of_ceiling": share,
        "ceiling_note": ceiling.note,
        "ceiling_tp_degree": ceiling.tp_degree,
    }
