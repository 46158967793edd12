"""A language model in a precision: the dtype it is held in and its quantization, decided by the precision alone
(:mod:`accelbench.precisions`) and applied here, in one place, for every engine that loads a model in process and
for every scenario that counts its bytes (``accelbench generate``, ``accelbench profile``).

| precision | dtype | weights |
| --- | --- | --- |
| a float precision | its ``cast_dtype`` (float32 when it has none) | as they are |
| a weight-only precision (``weight_only``: ``int8``, ``fp8``) | its ``cast_dtype`` | every linear quantized, one scale a row (:mod:`accelbench.quant.weight_only`) |
| an fp8 precision (``quant == "float8"``) | bfloat16 (:data:`accelbench.quant.fp8.COMPUTE_DTYPE`) | fp8 weights and activations through torchao (:func:`accelbench.quant.fp8.quantize_lm`) |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def lm_dtype(precision: str):
    """The torch dtype a language model is loaded in (and its KV cache held in) for ``precision``: the precision's
    cast dtype; bfloat16 for the fp8 precisions (torchao's row-wise fp8 linear takes bf16 weights and activations:
    :mod:`accelbench.quant.fp8`); float32 otherwise.

    Raises:
        ConfigError: no such precision.
    """
    import torch

    from accelbench import precisions
    from accelbench.quant.fp8 import COMPUTE_DTYPE

    p = precisions.get(precision)
    return getattr(torch, p.cast_dtype or (COMPUTE_DTYPE if p.quant == "float8" else "float32"))


def quantize_lm(module, precision: str) -> dict[str, Any]:
    """Quantize ``module`` (a ``transformers`` causal LM on its device, in :func:`lm_dtype`) in place as
    ``precision`` says (see the module docstring); the row's ``quant_*`` columns (none for a float precision).

    Raises:
        MissingDependencyError: torchao is not installed (fp8).
    """
    from accelbench import precisions

    p = precisions.get(precision)
    if p.weight_only:
        from accelbench.quant.weight_only import quantize_linears

        return quantize_linears(module, p.weight_only)
    if p.quant == "float8":  # weights and activations in fp8 (W8A8): torch._scaled_mm through torchao
        from accelbench.quant import fp8

        return fp8.quantize_lm(module, p.granularity)
    return {}


def layer_quantizer(precision: str) -> Callable | None:
    """What quantizes one decoder layer of a model in ``precision`` (a callable taking the layer, an ``nn.Module``,
    in :func:`lm_dtype` on its device), or None for a float precision. A loader calls it on each layer as the layer's
    weights are drawn (:func:`accelbench.models.lm_load.load_lm`'s ``each_layer``), so the model is never whole in
    its load dtype; :func:`quantize_lm` then quantizes what is left (the LM head) and gives the whole model's
    columns.

    Raises:
        MissingDependencyError: torchao is not installed (fp8), when the callable runs.
    """
    from accelbench import precisions

    p = precisions.get(precision)
    if p.weight_only:
        from accelbench.quant.weight_only import replace_linears

        return lambda layer: replace_linears(layer, p.weight_only)
    if p.quant == "float8":
        from accelbench.quant import fp8

        return lambda layer: fp8.quantize_lm(layer, p.granularity)
    return None
