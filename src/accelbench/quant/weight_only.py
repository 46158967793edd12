"""Weight-only quantization of a language model's linear layers, for decode: int8 and fp8 weights with one scale
per output row, activations left in the model's dtype.

Decode reads every weight once a step and is memory-bound (:mod:`accelbench.core.lm_analytic`): halving the weight
bytes is where weight-only quantization pays (gpt-fast's ``WeightOnlyInt8Linear``: per-channel symmetric int8).

- int8: ``q = round(w / s)`` clamped to [-127, 127], ``s = max|w_row| / 127`` (symmetric, per row).
- fp8: ``q = (w / s).to(float8_e4m3fn)``, ``s = max|w_row| / 448`` (E4M3's largest normal: OCP 8-bit floating
  point spec).
- The matmul: at up to :data:`accelbench.quant.gemv.MAX_ROWS` rows on a CUDA GPU with Triton (a decode step's batch,
  a short prefill), accelbench's 8-bit kernel (:mod:`accelbench.quant.gemv`: the weight read at 8 bits and
  dequantized in registers); without Triton, one row inside a compiled graph is a multiply-and-sum that Inductor
  turns into one reduction reading the 8-bit weight (gpt-fast's recipe; it reads int8 well below cuBLAS's bf16
  bandwidth: docs/results.md, language models); on a CPU, int8 through torch's ``aten._weight_int8pack_mm(x, q, s)``;
  else (longer prefills, larger batches) dequantize and multiply (``F.linear(x, q.to(x.dtype)) * s``). The CUDA
  ``_weight_int8pack_mm`` is not used: it made a Llama-3.1-8B decode step several times slower than bf16 on Hopper
  (docs/results.md, language models).

Embedding tables and norms stay in the model's dtype; the LM head is quantized like any linear layer.

A linear replaced keeps what was attached to it: its forward hooks (a tensor-parallel split's all-reduce and gather:
:mod:`accelbench.models.tensor_parallel`) move to the quantized module, and the attributes set on its weight (a
shard's mark of the ranks it is split over) to the quantized weight. Moved here rather than registered again by
the split: the split stays one step of loading, quantizing stays one step after it, and any hook on a linear (a
profiler's too) outlives the swap. On a shard the scales are the shard's own: a column-parallel shard holds whole
output rows (its scales are the whole weight's), a row-parallel shard's are taken over its slice of the input
dimension.
"""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F

from accelbench.quant import gemv

SCHEMES = {"int8": 127.0, "fp8": 448.0}


CHUNK_ELEMENTS = 1 << 24  # weights quantized this many elements (64 MB of float32) at a time


def quantize_weight(weight, scheme: str):
    """``(q, scale)`` of a ``(out, in)`` float weight: ``q`` int8 or float8_e4m3fn, ``scale`` ``(out,)`` float32.

    Symmetric per output row: ``scale = max|w| / 127`` (int8, ``q = round(w / scale)``) or ``/ 448`` (fp8 E4M3's
    largest finite value, ``q = w / scale`` rounded to nearest by the cast). Rows are quantized
    :data:`CHUNK_ELEMENTS` at a time, so the float32 working copy is at most 64 MB beside the weight (quantized
    whole, the float32 intermediates of an 8B model's LM head were a large share of the case's peak memory).

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown weight-only scheme {scheme!r}: {', '.join(SCHEMES)}")
    n, k = weight.shape
    q = torch.empty(n, k, device=weight.device, dtype=torch.int8 if scheme == "int8" else torch.float8_e4m3fn)
    scale = torch.empty(n, device=weight.device, dtype=torch.float32)
    rows = max(1, CHUNK_ELEMENTS // max(k, 1))
    for i in range(0, n, rows):
        w = weight[i : i + rows].detach().to(torch.float32, copy=True)  # a copy even of float32: worked in place
        s = (w.abs().amax(dim=1) / SCHEMES[scheme]).clamp(min=1e-12)
        w.div_(s[:, None])
        if scheme == "int8":
            w.round_().clamp_(-127, 127)
        q[i : i + rows] = w  # the cast: exact for int8's whole numbers, round-to-nearest for fp8
        scale[i : i + rows] = s
    return q, scale


class WeightOnlyLinear(torch.nn.Module):
    """A linear layer with int8 or fp8 weights and per-row scales (see the module docstring).

    Args:
        linear: the ``nn.Linear`` it replaces (its weight is quantized, its bias kept).
        scheme: ``int8`` or ``fp8``.
        int8_kernel: run int8 through ``aten._weight_int8pack_mm`` (see :func:`int8_kernel_works`).
        gemv: run up to :data:`accelbench.quant.gemv.MAX_ROWS` rows through accelbench's 8-bit kernel (a CUDA
            GPU with Triton: :func:`accelbench.quant.gemv.available`).
    """

    def __init__(self, linear, scheme: str, int8_kernel: bool = True, gemv: bool = False):
        super().__init__()
        q, scale = quantize_weight(linear.weight, scheme)
        self.scheme, self.int8_kernel, self.gemv = scheme, int8_kernel, gemv
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q.__dict__.update(vars(linear.weight))  # the weight's marks (a tensor-parallel shard's ranks) kept
        self.register_buffer("weight", q)
        self.register_buffer("scale", scale.to(linear.weight.dtype))
        self.bias = linear.bias

    def forward(self, x):
        x2 = x.reshape(-1, self.in_features)
        scale = self.scale.to(x.dtype)
        if self.gemv and x2.shape[0] <= gemv.MAX_ROWS:
            y = gemv.gemv_8bit(x2, self.weight, scale)
        elif x2.shape[0] == 1 and torch.compiler.is_compiling():
            y = ((x2[:, None, :].float() * self.weight.float()).sum(-1) * scale.float()).to(x.dtype)
        elif self.scheme == "int8" and self.int8_kernel:
            y = torch._weight_int8pack_mm(x2, self.weight, scale)
        else:
            y = F.linear(x2, self.weight.to(x.dtype)) * scale
        y = y.reshape(*x.shape[:-1], self.out_features)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, {self.scheme}"


@cache
def int8_kernel_works(device, dtype) -> bool:
    """Whether ``aten._weight_int8pack_mm`` runs on ``device`` for activations of ``dtype`` (a small probe
    against the dequantized reference, run once a device and dtype: a model quantized a layer at a time asks at each
    layer)."""
    try:
        x = torch.randn(2, 64, device=device, dtype=dtype)
        w = torch.randn(32, 64, device=device)
        q, s = quantize_weight(w, "int8")
        got = torch._weight_int8pack_mm(x, q, s.to(dtype)).float()
        ref = torch.nn.functional.linear(x.float(), q.float()) * s
        return bool(torch.allclose(got, ref, rtol=2e-2, atol=2e-2 * ref.abs().max().item()))
    except (RuntimeError, NotImplementedError):
        return False


def replace_linears(model, scheme: str, *, skip: tuple[str, ...] = ()) -> int:
    """Replace every ``nn.Linear`` of ``model`` (a model, or one of its decoder layers; but those whose qualified
    name ends with one of ``skip``) by a weight-only quantized one, in place, its forward hooks moved to the new
    module (see the module docstring); linears already quantized are left. Returns how many were replaced.

    Raises:
        ValueError: an unknown scheme.
    """
    p = next(model.parameters())
    int8_kernel = scheme == "int8" and p.device.type == "cpu" and int8_kernel_works(p.device, p.dtype)
    use_gemv = p.device.type == "cuda" and gemv.available() is None
    # names, not modules: a list of the modules would keep every full-precision weight alive until the last one is
    # quantized (an 8B model's bf16 and int8 weights at once, 24 GB); replaced one at a time, each is freed as it goes
    targets = [
        (name, child_name)
        for name, mod in model.named_modules()
        for child_name, child in mod.named_children()
        if isinstance(child, torch.nn.Linear) and not f"{name}.{child_name}".lstrip(".").endswith(skip)
    ]
    for name, child_name in targets:
        parent = model.get_submodule(name)
        old = getattr(parent, child_name)
        setattr(parent, child_name, _with_hooks_of(old, WeightOnlyLinear(old, scheme, int8_kernel, use_gemv)))
    return len(targets)


def quantize_linears(model, scheme: str, *, skip: tuple[str, ...] = ()) -> dict:
    """Quantize ``model``'s linears (:func:`replace_linears`: those a per-layer pass already quantized are left) and,
    on a CUDA GPU with Triton, tune the GEMV kernel for every weight shape (:func:`accelbench.quant.gemv.warm`),
    before a decode step is compiled or captured.

    Returns:
        Row columns: ``quant_scheme``, ``quant_layers`` (the model's quantized linears), ``quant_kernels`` (what
        runs the matmul; with the GEMV and int8, at how many weight shapes its autotuner chose the conversion by
        bits; the shapes whose one-row product runs with K split, and in how many parts).
    Raises:
        ValueError: an unknown scheme.
    """
    replace_linears(model, scheme, skip=skip)
    quantized = [m for m in model.modules() if isinstance(m, WeightOnlyLinear)]
    weights, count = [m.weight for m in quantized], len(quantized)
    int8_kernel, use_gemv = any(m.int8_kernel for m in quantized), any(m.gemv for m in quantized)
    many = "aten._weight_int8pack_mm" if int8_kernel else "dequantize then matmul"
    if use_gemv:
        gemv.warm(weights, next(model.parameters()).dtype)
        kernels = f"up to {gemv.MAX_ROWS} rows: accelbench's Triton 8-bit GEMV; more: {many}"
        shapes = {tuple(w.shape) for w in weights}
        if scheme == "int8":  # which int8-to-float32 conversion the autotuner chose, at how many of the shapes
            chosen = gemv.int8_conversions()
            picked = [chosen[s] for s in shapes if s in chosen]
            kernels += f" (int8 converted by bits at {picked.count('bits')} of {len(picked)} shapes)"
        split = gemv.splits()  # at how many shapes one row is fastest with K split (gemv's docstring: K split)
        split_shapes = [s for s in shapes if split.get(s, 1) > 1]
        if split_shapes:
            kernels += "; K split at one row: " + ", ".join(
                f"{n}x{k} in {split[n, k]}" for n, k in sorted(split_shapes)
            )
    else:
        kernels = f"{many}; one token a row compiled: a fused multiply-and-sum reading the 8-bit weight"
    return {"quant_scheme": f"{scheme} weight-only, per-row scale", "quant_layers": count, "quant_kernels": kernels}


_HOOKS = (
    "_forward_pre_hooks",
    "_forward_pre_hooks_with_kwargs",
    "_forward_hooks",
    "_forward_hooks_with_kwargs",
    "_forward_hooks_always_called",
)


def _with_hooks_of(old, new):
    """``new`` with ``old``'s forward (pre-)hooks added, same ids and order: a module swapped for another keeps the
    work attached to its calls (``nn.Module`` keeps them in these dicts; ``register_forward_hook`` fills them)."""
    for attr in _HOOKS:
        getattr(new, attr).update(getattr(old, attr, {}))
    return new


def compiled_reductions(model) -> bool:
    """Whether ``model`` has weight-only linears whose one-row matmul, compiled, is an Inductor reduction (no GEMV
    kernel): what coordinate-descent tuning pays for (:func:`accelbench.backends.lm_loop.compiled_steps`)."""
    return any(isinstance(m, WeightOnlyLinear) and not m.gemv for m in model.modules())
