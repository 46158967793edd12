"""One generation case, measured: build the runner, warm it up, time ``repeats`` generations under telemetry, and
turn the marks into the row's columns (TTFT, TPOT, inter-token latencies, rates, KV cache, MBU/MFU, perplexity).

Each timed generation is one window (the statistical unit of ``compare``'s intervals): its TTFT and its mean TPOT
are one observation each; every inter-token latency of every window is kept as the ``itl_ms`` series.

Every rate and utilisation is a mean: tokens over the time they took, summed over the timed generations (vLLM's
``benchmark_serving`` and MLPerf's Llama harness count throughput as tokens over duration), so each agrees with the
mean latency beside it: decode tokens/s is ``batch / mean TPOT``, prefill tokens/s ``batch x prompt / mean TTFT``,
output tokens/s ``batch x new tokens / mean end-to-end``, MBU is taken at the mean TPOT and MFU at the mean TTFT.
Output tokens/s counts every generated token over the whole generation, prefill included; decode tokens/s counts
the decode phase's tokens over the decode phase's time; so output tokens/s is at most decode tokens/s whenever a
prefill (the mean TTFT) takes at least one decode step (the mean TPOT).

TTFT on the roofline: ``ttft_floor_ms`` is the least time the prefill can take on this device, the roofline in time
form (:func:`accelbench.core.roofline.theoretical_time_s`: Williams et al. 2009) of its counts,
``max(prefill FLOPs / measured matmul roof, least prefill bytes / measured copy bandwidth)``: the same measured
ceilings MBU and MFU are taken against (:mod:`accelbench.ceilings`). ``ttft_over_floor`` is the median TTFT over
it (1.0: on the roof).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import lm_analytic as metrics
from accelbench.core import roofline


@dataclass(frozen=True, kw_only=True, slots=True)
class Ceilings:
    """The device's roofs the utilisations are taken against (None where not measured).

    Attributes:
        dram_bytes_per_s: measured copy bandwidth (:mod:`accelbench.ceilings`); datasheet_dram_bytes_per_s the
            vendor's figure.
        flops_per_s: the measured dense-matmul throughput of the case's precision's roof; datasheet_flops_per_s
            the vendor's.
    """

    dram_bytes_per_s: float | None = None
    datasheet_dram_bytes_per_s: float | None = None
    flops_per_s: float | None = None
    datasheet_flops_per_s: float | None = None


def generation_columns(
    gens: list, shape: metrics.Shape, *, batch_size: int, prompt_len: int, new_tokens: int, ceilings: Ceilings
) -> tuple[dict[str, Any], dict[str, list[float]]]:
    """The row's columns and series of ``gens`` (timed generations of one case); see the module docstring.

    Raises:
        ValueError: no generation, or one without a decode step (``new_tokens < 2``).
    """
    import numpy as np

    from accelbench.core.stats import stat_columns, summarize

    if not gens or new_tokens < 2:
        raise ValueError("generation columns need a timed generation with at least one decode step")
    ttft_ms = [g.ttft_s * 1e3 for g in gens]
    itl_ms = [t * 1e3 for g in gens for t in g.itl_s]
    tpot_window_ms = [float(np.mean(g.itl_s)) * 1e3 for g in gens]
    e2e_ms = [g.e2e_s * 1e3 for g in gens]
    tpot_s = float(np.mean(itl_ms)) / 1e3  # every decode step of every generation: decode time / decode steps
    ttft_s = float(np.mean(ttft_ms)) / 1e3
    rates = metrics.rates(batch_size, prompt_len, new_tokens, ttft_s, tpot_s, float(np.mean(e2e_ms)) / 1e3)
    step_bytes = metrics.mean_decode_bytes(shape, batch_size, prompt_len, new_tokens)
    prefill = metrics.prefill_flops(shape, batch_size, prompt_len)
    prefill_bytes = shape.weight_bytes + metrics.kv_cache_bytes(shape, batch_size, prompt_len)
    floor_ms = prefill_floor_ms(prefill, prefill_bytes, ceilings)
    rec = {
        **stat_columns(summarize(ttft_ms), "ttft"),
        **stat_columns(summarize(itl_ms), "tpot"),
        **stat_columns(summarize(e2e_ms), "e2e_latency"),
        "generations_timed": len(gens),
        "output_tokens_timed": len(gens) * batch_size * new_tokens,
        "prefill_tokens_per_s": rates.prefill_tokens_per_s,
        "decode_tokens_per_s": rates.decode_tokens_per_s,
        "output_tokens_per_s": rates.output_tokens_per_s,
        "throughput_samples_per_s": rates.output_tokens_per_s,  # a sample of text generation is an output token
        "timed_wall_s": sum(g.e2e_s for g in gens),
        "kv_cache_bytes": metrics.kv_cache_bytes(shape, batch_size, prompt_len + new_tokens),
        "kv_bytes_per_token": shape.kv_bytes_per_token,
        "weight_bytes": shape.weight_bytes,
        "decode_step_bytes": step_bytes,
        "prefill_flops": prefill,
        "prefill_min_bytes": prefill_bytes,
        "ttft_floor_ms": floor_ms,
        "ttft_over_floor": roofline.ratio(float(np.median(ttft_ms)), floor_ms),
        "decode_step_flops": metrics.mean_decode_flops(shape, batch_size, prompt_len, new_tokens),
        "decode_bytes_per_s": step_bytes / tpot_s,
        "prefill_flops_per_s": prefill / ttft_s,
        "mbu": metrics.utilisation(step_bytes, tpot_s, ceilings.dram_bytes_per_s),
        "mbu_datasheet": metrics.utilisation(step_bytes, tpot_s, ceilings.datasheet_dram_bytes_per_s),
        "mfu": metrics.utilisation(prefill, ttft_s, ceilings.flops_per_s),
        "mfu_datasheet": metrics.utilisation(prefill, ttft_s, ceilings.datasheet_flops_per_s),
    }
    return rec, {"itl_ms": itl_ms, "ttft_ms": ttft_ms, "tpot_window_ms": tpot_window_ms, "e2e_latency_ms": e2e_ms}


def prefill_floor_ms(flops: float, least_bytes: float, ceilings: Ceilings) -> float | None:
    """The least time (ms) a prefill of ``flops`` FLOPs moving at least ``least_bytes`` bytes can take under the
    measured ceilings: ``max(flops / flops_per_s, least_bytes / dram_bytes_per_s)`` (the roofline in time form,
    :func:`accelbench.core.roofline.theoretical_time_s`); None when either ceiling was not measured."""
    if not ceilings.flops_per_s or not ceilings.dram_bytes_per_s:
        return None
    return roofline.theoretical_time_s(flops, least_bytes, ceilings.flops_per_s, ceilings.dram_bytes_per_s) * 1e3


def compile_columns(first, capabilities) -> dict[str, float | None]:
    """How long the first, untimed generation of a compiling engine took (None each for an engine that compiles
    nothing), from its marks (:func:`accelbench.backends.lm_timing.warm_up`):

    - ``compile_prefill_s``: its TTFT, the prefill's compile and one prefill;
    - ``compile_decode_s``: its first inter-token latency, the decode step's compile and one step;
    - ``compile_s``: its wall time, both of those and the other decode steps.

    A later case of the same model reuses the compiled steps: its figures are a recompile's (a new shape), or
    about one step's.

    Args:
        first: the first warm-up generation (:class:`accelbench.backends.lm_timing.Generation`).
        capabilities: the engine's (:class:`accelbench.backends.engine.Capabilities`).
    """
    if not capabilities.compiles:
        return {"compile_s": None, "compile_prefill_s": None, "compile_decode_s": None}
    return {
        "compile_s": first.e2e_s,
        "compile_prefill_s": first.ttft_s,
        "compile_decode_s": first.itl_s[0] if first.itl_s else None,
    }
