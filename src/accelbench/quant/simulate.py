"""Simulated (fake-quant) reduced precisions: the accuracy of a precision with no kernel path on the device.

- int8 / int8-dynamic: the PT2E-converted graph (:func:`accelbench.quant.pt2e.quantize`) run eagerly: its reference
  quantize/dequantize ops around fp32 ops are int8's numerics on any device (CPU or CUDA).
- fp8: every Conv2d and Linear layer of a copy of the model gets its weight rounded to float8 e4m3 once and its
  input activation rounded per forward, then the layer runs in float32:
  ``x_fq = (x / s).clamp(-448, 448).to(float8_e4m3fn).to(x.dtype) * s`` with ``s = amax / 448`` (448: E4M3's
  largest finite value, OCP 8-bit Floating Point Specification (OFP8) rev 1.0, table 1; torchao float8 docs).
  ``row`` scaling: weights per output channel, activations per row (Linear: each row of the flattened input;
  Conv2d: each pixel's channel vector, the rows of the convolution's implicit GEMM); ``tensor``: one scale per
  tensor for both. Not simulated: the bf16 rounding of everything else in the real fp8 path (the simulation keeps
  fp32 outside the quantized layers), and fp8 accumulation effects (``torch._scaled_mm`` accumulates in fp32).
"""

from __future__ import annotations

import copy

E4M3_MAX = 448.0  # OCP OFP8 spec rev 1.0, table 1: E4M3 max normal 1.75 * 2^8


def fake_fp8(x, scale):
    """``x`` rounded through float8 e4m3 at ``scale`` (broadcast against ``x``) and back to ``x``'s dtype."""
    import torch

    return (x / scale).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn).to(x.dtype) * scale


def _scale(t, dims):
    """``amax / 448`` over ``dims`` (all of them: None), kept for broadcasting; never zero."""
    a = t.detach().abs().amax() if dims is None else t.detach().abs().amax(dim=dims, keepdim=True)
    return a.float().clamp(min=1e-12) / E4M3_MAX


def _wrap(layer, granularity: str):
    import torch

    class FakeFP8(torch.nn.Module):
        """``layer`` with float8-rounded weight (once) and input (per call)."""

        def __init__(self, inner):
            super().__init__()
            w = inner.weight.detach()
            ws = _scale(w, None if granularity == "tensor" else tuple(range(1, w.dim())))
            inner.weight = torch.nn.Parameter(fake_fp8(w, ws).to(w.dtype), requires_grad=False)
            self.inner, self.row_dim = inner, (1 if isinstance(inner, torch.nn.Conv2d) else -1)

        def forward(self, x):
            s = _scale(x, None if granularity == "tensor" else self.row_dim)
            return self.inner(fake_fp8(x, s).to(x.dtype))

    return FakeFP8(layer)


def fake_quantize_fp8(module, granularity: str = "row", example=None):
    """A copy of ``module`` whose Conv2d and Linear layers compute on float8-e4m3-rounded weights and inputs.

    Args:
        example: an input batch: only the layers whose own forward runs on it are wrapped (as the real path
            converts: ``nn.MultiheadAttention`` uses its ``out_proj`` weight in a fused op); None: every layer.

    Returns:
        ``(module, columns)``: ``quant_api``, ``quant_config``, ``quant_kernels``, ``fp8_simulated_layers``.
    """
    import torch

    from accelbench.quant.fp8 import layer_flops

    called = None if example is None else {r[0] for r in layer_flops(module, example)}
    module = copy.deepcopy(module).eval()
    names = [
        n
        for n, m in module.named_modules()
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and n and (called is None or n in called)
    ]
    for name in names:
        parent, _, leaf = name.rpartition(".")
        owner = module.get_submodule(parent) if parent else module
        setattr(owner, leaf, _wrap(getattr(owner, leaf), granularity))
    weights = "per output channel" if granularity == "row" else "per tensor"
    acts = "per row (dynamic)" if granularity == "row" else "per tensor (dynamic)"
    return module, {
        "quant_api": "accelbench fake-quant (float8_e4m3fn round trip)",
        "quant_config": f"float8 e4m3 weights {weights}, activations {acts}; Conv2d and Linear layers; the rest fp32",
        "quant_kernels": "simulated: float8 round trip around fp32 Conv2d/Linear (no fp8 kernels)",
        "fp8_simulated_layers": len(names),
    }


def simulated(module, scheme: str, granularity: str | None, calibration: list, example):
    """``module`` in the simulated precision, and its columns (``simulated`` True).

    Args:
        scheme: :func:`accelbench.precisions.quant_scheme` (``static``, ``dynamic``, ``float8``).
        granularity: fp8 scaling (``row``/``tensor``); unused for int8.
        calibration: int8 static calibration batches (host), moved to ``example``'s device.
        example: one input batch on the device.
    """
    from accelbench.quant import pt2e

    if granularity is not None:
        out, cols = fake_quantize_fp8(module, granularity, example)
    else:
        out, cols = pt2e.quantize(module, scheme, calibration, example)
        cols["quant_kernels"] = "simulated: PT2E reference quantize/dequantize around fp32 ops (eager)"
    return out, {**cols, "simulated": True}
