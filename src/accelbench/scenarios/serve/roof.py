"""What the device could do for a served model: the bytes one decode step of the served batch must read, the
device's memory bandwidth, and the served decode's memory-bandwidth utilisation (MBU).

Definitions (the counts are :mod:`accelbench.core.lm_analytic`'s, the bandwidths :mod:`accelbench.ceilings`'):

- **mean decode batch**: the requests between their first and their last token, averaged over the level's measured
  window (first scheduled send to last completion): ``sum(end - first token) / window`` over the successful
  requests (Little's law: the mean number in a state is the total time spent in it over the time observed).
- **mean requests in flight**: the same with ``end - sent``: what an open-loop level's in-process ceiling is taken
  at (rounded to the nearest batch >= 1).
- **decode step bytes**: the served model's weights in the served precision plus the KV cache a step of the mean
  decode batch reads at the requests' mean decode context (mean prompt tokens + mean output tokens / 2:
  :func:`accelbench.core.lm_analytic.mean_decode_bytes`).
- **MBU**: decode step bytes / mean TPOT / memory bandwidth (Databricks 2023, "LLM Inference Performance
  Engineering: Best Practices"): ``mbu`` over the measured copy bandwidth (the store's cached ceilings of the
  device, else a copy measured once a run: :func:`accelbench.ceilings.measure.measure_copy`), ``mbu_datasheet``
  over the vendor's figure (``ceilings/datasheets.json``; None for a device it does not list). The same columns and
  definitions as ``accelbench generate``'s.

The served model's shape is read from its config alone: the model is built on PyTorch's ``meta`` device (no
weights allocated or read) and counted by :func:`accelbench.models.lm_shape.shape_of`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.core import lm_analytic

# the precision a server is taken to hold its weights and KV cache in: bf16 on a GPU (what vLLM, SGLang and
# ``transformers serve`` load a bf16 checkpoint in), fp32 on a CPU
SERVED_PRECISION = {"cuda": "bf16", "cpu": "fp32"}
CPU_COPY_BYTES, CUDA_COPY_BYTES = 256 << 20, 2 << 30  # the copy buffers of accelbench.ceilings.measure.measure


def served_precision(device) -> str:
    """The precision of :data:`SERVED_PRECISION` for ``device`` (a torch.device); fp32 elsewhere."""
    return SERVED_PRECISION.get(device.type, SERVED_PRECISION["cpu"])


def shape_for(model: str | None, precision: str, bytes_per_weight: float | None = None) -> lm_analytic.Shape | None:
    """The :class:`~accelbench.core.lm_analytic.Shape` of ``hf:`` model ``model`` in ``precision``, built on the
    ``meta`` device from its config; None when the model is no ``hf:`` name or its config cannot be read.

    ``bytes_per_weight``: the weights' storage where ``precision`` is a server's own format (llama.cpp's Q8_0: 8.5
    bits a weight, ggml's ``block_q8_0``): the weight bytes are the bf16 count's scaled to it (norms and the like,
    a few thousandths of the weights, counted at that rate too); the KV cache stays 16-bit."""
    from accelbench.models import hf

    if not model or not hf.is_lm_name(model):
        return None
    try:
        import torch

        from accelbench.models.lm_shape import shape_of
        from accelbench.quant.lm import lm_dtype

        transformers = hf.require_transformers()
        folder = hf.checkpoint_dir(model)
        if folder is not None:
            config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False)
        else:
            config = hf.architecture_config(model[len(hf.PREFIX) :])
        from accelbench import precisions

        own = bytes_per_weight is not None and precision not in precisions.names()
        dtype = torch.bfloat16 if own else lm_dtype(precision)
        with torch.device("meta"):
            module = transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        shape = shape_of(module, dtype)
        if own:
            shape = dataclasses.replace(shape, weight_bytes=round(shape.weight_bytes * bytes_per_weight / 2))
        return shape
    except Exception:  # an unreadable or unknown config: no bytes, so no MBU (None), never a failed level
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class Bandwidth:
    """The device's memory bandwidth, bytes/s: ``measured`` (copy) and ``datasheet`` (None where unknown)."""

    measured: float | None = None
    datasheet: float | None = None


def bandwidth(device, store=None) -> Bandwidth:
    """``device``'s memory bandwidth: the store's cached ceilings of the device when there are any
    (:func:`accelbench.ceilings.cache.cached_ceilings`), else one copy measured now; the datasheet's figure."""
    import torch

    from accelbench.ceilings.measure import datasheet, measure_copy
    from accelbench.core.device import cpu_model

    cuda = device.type == "cuda"
    name = torch.cuda.get_device_name(device) if cuda else cpu_model()
    cached = None
    if store is not None:
        from accelbench.ceilings.cache import cached_ceilings

        cached = cached_ceilings(store, name)
    measured = cached.dram_bytes_per_s if cached is not None else None
    if measured is None and device.type in ("cuda", "cpu"):
        measured = _copy_bandwidth(device, CUDA_COPY_BYTES if cuda else CPU_COPY_BYTES, measure_copy)
    sheet = datasheet(name) if cuda else None
    return Bandwidth(measured=measured, datasheet=(sheet or {}).get("dram_bytes_per_s"))


def _copy_bandwidth(device, nbytes: int, measure_copy) -> float | None:
    """The copy bandwidth on a buffer of ``nbytes`` (at most a quarter of the free memory: a server on the same GPU
    holds most of it), or None when even that cannot be allocated."""
    from accelbench.core.errors import is_oom
    from accelbench.core.memory import available_bytes

    free = available_bytes(device)
    size = min(nbytes, free // 4) if free else nbytes
    try:
        return measure_copy(size, device) if size >= 64 << 20 else None
    except Exception as exc:  # no room for the buffers: no measured bandwidth (MBU None), never a failed level
        if not is_oom(exc):
            raise
        return None


def occupancy(results: list) -> dict[str, float | None]:
    """``mean_decode_batch`` and ``mean_in_flight_requests`` of a level's requests (module docstring); None each
    when no request succeeded or the window is empty."""
    good = [r for r in results if r.ok and r.first_token_s is not None and r.end_s is not None]
    ends = [r.end_s for r in results if r.end_s is not None]
    window = max(ends) - min(r.scheduled_s for r in results) if ends else 0.0
    if not good or window <= 0:
        return {"mean_decode_batch": None, "mean_in_flight_requests": None}
    decoding = sum(r.end_s - r.first_token_s for r in good)
    in_flight = sum(r.end_s - (r.sent_s if r.sent_s is not None else r.scheduled_s) for r in good)
    return {"mean_decode_batch": decoding / window, "mean_in_flight_requests": in_flight / window}


def mbu_columns(
    rec: dict[str, Any], results: list, shape: lm_analytic.Shape | None, bw: Bandwidth | None
) -> dict[str, Any]:
    """The served decode's occupancy, bytes and MBU columns of one level row ``rec`` (its ``tpot_mean_ms``), from
    its requests ``results`` (module docstring); the bytes and MBU are None without a shape, an observed decode or a
    bandwidth."""
    cols: dict[str, Any] = occupancy(results)
    batch, tpot_ms = cols["mean_decode_batch"], rec.get("tpot_mean_ms")
    good = [r for r in results if r.ok and r.output_tokens > 1]
    if shape is None or not batch or not tpot_ms or not good:
        return {**cols, "decode_step_bytes": None, "mbu": None, "mbu_datasheet": None}
    prompt = sum(r.prompt_tokens for r in good) / len(good)
    output = sum(r.output_tokens for r in good) / len(good)
    step_bytes = lm_analytic.mean_decode_bytes(shape, batch, prompt, output)
    tpot_s = tpot_ms / 1e3
    return {
        **cols,
        "weight_bytes": shape.weight_bytes,
        "kv_bytes_per_token": shape.kv_bytes_per_token,
        "decode_step_bytes": step_bytes,
        "memory_bandwidth_bytes_per_s": bw.measured if bw else None,
        "mbu": lm_analytic.utilisation(step_bytes, tpot_s, bw.measured if bw else None),
        "mbu_datasheet": lm_analytic.utilisation(step_bytes, tpot_s, bw.datasheet if bw else None),
    }
