"""Per-kernel measurements, kernel families from kernel names, and sums per family and per step.

Pure code (no torch). Families, checked in this order (the first match wins; the order matters
because CUTLASS/CuTe GEMM names carry words such as ``Copy_Atom`` in their template arguments, and
PyTorch's copy kernels are instances of ``elementwise_kernel``):

| family | kernels | name patterns (case-insensitive) |
| --- | --- | --- |
| gemm_conv | cuBLAS/cuBLASLt, cuDNN and CUTLASS GEMMs and convolutions (with their FFT/Winograd transforms), attention | gemm, xmma, cutlass, nvjet, conv, fprop, dgrad, wgrad, winograd, fft, flip_filter, splitK, flash, fmha, triton_tem |
| normalization | batch/layer/group/RMS norm, also their statistics kernels | batch_norm, bn_fw, bn_bw, layer_norm, ... |
| reduction_pooling | reductions, pooling, softmax, losses | reduce (not cuDNN's ``reduced_divisor``), pool, softmax, nll_loss, triton_red/per |
| copy_transpose | copies, layout changes, padding, concatenation, indexing | copy, transpose, nchwToNhwc, AddPadding, CatArray, gather, im2col |
| elementwise | pointwise kernels, optimizer updates | elementwise, triton_poi, multi_tensor_apply, Functor |
| other | anything else | |

Transformer steps (``accelbench profile --step prefill|decode``) have their own families
(:data:`TRANSFORMER_FAMILIES`, :func:`classify_transformer`): a decode step is GEMVs, attention over the cache,
RMS norms, rotary embeddings, the cache write and the sampling of the next token, and each is a question of its own
("how much of the step is GEMV, at what bandwidth"). Inductor's kernels (``triton_{poi,red,per,tem}_fused_<ops>_<n>``)
are classified by the aten ops their name lists (``_to_copy_add_mean_mul_pow_rsqrt``: an RMS norm), the others by
their demangled name, in this order (first match wins):

| family | kernels |
| --- | --- |
| attention | flash (``flash_fwd_*``, ``pytorch_flash::``), memory-efficient (``fmha_cutlass*``), cuDNN SDPA, Inductor's ``_scaled_dot_product_*``/``flex_attention`` |
| gemm | cuBLAS/cuBLASLt GEMM and GEMV (``nvjet_*``, ``sm90_xmma_*``, ``gemv*``, ``gemvx``, ``splitKreduce``), CUTLASS, Inductor's ``mm``/``bmm``/``addmm`` |
| sampling | the next token: ``argmax``/``ArgMaxOps``, ``topk``, ``sort``, ``softmax``, ``multinomial`` |
| norm | RMS/layer norm: ``rms_norm``, ``layer_norm``, the mean of squares and ``rsqrt`` of an unfused RMS norm (``MeanOps``, ``rsqrt``, ``pow``) |
| rotary | rotary position embeddings: ``rotary``, ``rope``, ``cos``/``sin`` of the angles, ``rotate_half``'s ``neg`` and ``cat`` |
| copy | copies and the KV-cache write: ``index_copy``, ``index_put``, ``scatter``, casts (``direct_copy``), ``memcpy``, ``fill`` |
| activation | ``silu``, ``gelu``, ``relu``, ``sigmoid``, ``tanh`` (alone or fused with the gating ``mul``) |
| elementwise | any other pointwise kernel (``elementwise_kernel``, ``triton_poi``): residual adds, scaling |
| other | anything else (other reductions, embeddings) |
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from accelbench.core.roofline import arithmetic_intensity, ratio

FAMILIES = ("gemm_conv", "normalization", "reduction_pooling", "copy_transpose", "elementwise", "other")

_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (fam, re.compile(p, re.IGNORECASE))
    for fam, p in (
        (
            "gemm_conv",
            r"gemm|xmma|cutlass|cublas|nvjet|conv(?!ert)|fprop|dgrad|wgrad|winograd|splitk|"
            r"implicit_|flash|fmha|attention|triton_tem|hmma|imma|wgmma|fft|flip_filter",
        ),
        ("normalization", r"batch_?norm|bn_fw|bn_bw|bn_f?bwd|layer_?norm|group_?norm|rms_?norm|instance_?norm"),
        (
            "reduction_pooling",
            r"reduce(?!d_divisor)|pool|softmax|nll_loss|cross_entropy|argmax|argmin|topk|triton_red|"
            r"triton_per|cub::|mean|sum_kernel",
        ),
        (
            "copy_transpose",
            r"copy|transpose|permute|nchw_?to_?nhwc|nhwc_?to_?nchw|catarray|cat_|gather|scatter|"
            r"index_|im2col|col2im|memcpy|memset|add_?padding|constant_pad",
        ),
        (
            "elementwise",
            r"elementwise|pointwise|triton_poi|multi_tensor_apply|foreach|functor|relu|gelu|silu|"
            r"sigmoid|tanh|hardswish|clamp|dropout|fill",
        ),
    )
)


def classify(kernel_name: str) -> str:
    """The family of a kernel from its (demangled) name; ``other`` when no pattern matches."""
    for fam, pat in _PATTERNS:
        if pat.search(kernel_name or ""):
            return fam
    return "other"


TRANSFORMER_FAMILIES = ("gemm", "attention", "norm", "rotary", "activation", "elementwise", "copy", "sampling", "other")
ALL_FAMILIES = tuple(dict.fromkeys(FAMILIES + TRANSFORMER_FAMILIES))  # every family a row may have, image first
LABELS = {
    "gemm": "GEMM/GEMV",
    "attention": "attention",
    "norm": "normalisation",
    "rotary": "rotary",
    "activation": "activation",
    "elementwise": "elementwise",
    "copy": "copy/cache write",
    "sampling": "sampling",
    "other": "other",
}
_TRITON = re.compile(r"^triton_(poi|red|per|tem)_fused_?(.*?)(?:_\d+)?$")
# (family, aten ops of an Inductor kernel's name, any of which places it), checked in order
_TRITON_OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "attention",
        (
            "_scaled_dot_product_flash_attention",
            "_scaled_dot_product_efficient_attention",
            "_scaled_dot_product_cudnn_attention",
            "flex_attention",
            "scaled_dot_product_attention",
        ),
    ),
    ("gemm", ("mm", "bmm", "addmm", "baddbmm", "_weight_int8pack_mm", "_int_mm", "linear")),
    ("sampling", ("argmax", "topk", "sort", "multinomial", "_softmax", "softmax")),
    ("norm", ("rsqrt", "native_layer_norm", "layer_norm", "rms_norm", "_fused_rms_norm")),
    ("rotary", ("cos", "sin", "neg")),
    ("activation", ("silu", "gelu", "relu", "sigmoid", "tanh")),
    ("copy", ("index_copy", "index_put", "scatter", "slice_scatter")),
)
# ops that only move data: a kernel of these alone is a copy (``_to_copy``: a cast), with arithmetic it is not
_MOVES = {
    "to-copy",
    "copy",
    "clone",
    "unsafe",
    "cat",
    "slice",
    "view",
    "expand",
    "unsqueeze",
    "permute",
    "transpose",
    "select",
}
_TRANSFORMER_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (fam, re.compile(p, re.IGNORECASE))
    for fam, p in (
        ("attention", r"flash|fmha|attention|sdpa|scaled_dot_product"),
        ("gemm", r"gemm|gemv|xmma|cutlass|cublas|nvjet|splitkreduce|hmma|wgmma|matmul|(?<![a-z])bmm"),
        ("sampling", r"argmax|argmin|topk|sort|softmax|multinomial|sampl"),
        ("norm", r"rms_?norm|layer_?norm|meanops|rsqrt|pow_tensor_scalar"),
        ("rotary", r"rotary|(?<![a-z])rope(?![a-z])|rotate_half|cos_kernel|sin_kernel|neg_kernel|catarray"),
        ("copy", r"copy|index_put|scatter|memcpy|memset|fill|clone"),
        ("activation", r"silu|gelu|relu|sigmoid|tanh|swiglu"),
        ("elementwise", r"elementwise|pointwise|functor|triton_poi"),
    )
)


def _triton_family(kind: str, ops: str) -> str:
    """The family of an Inductor kernel from the aten ops its name joins with ``_`` (``_to_copy_add_mean``)."""
    words = f"_{ops}_"
    for fam, names in _TRITON_OPS:
        if kind == "poi" and fam in ("attention", "gemm"):
            continue  # a pointwise kernel computes neither: those ops are what it prepares inputs for (or inlines)
        if any(f"_{op}_" in words for op in names):
            return fam
    if set(ops.replace("_to_copy", "_to-copy").split("_")) - {""} <= _MOVES:
        return "copy"
    if kind == "tem":
        return "gemm"  # Inductor's templates are matmuls (max-autotune) unless named as attention above
    if "_mean_" in words and "_pow_" in words:
        return "norm"
    return "elementwise" if kind == "poi" else "other"


def classify_transformer(kernel_name: str) -> str:
    """The :data:`TRANSFORMER_FAMILIES` family of a kernel of a prefill or decode step, from its (demangled) name
    (module docstring); ``other`` when nothing matches."""
    name = (kernel_name or "").strip()
    m = _TRITON.match(name)
    if m:
        return _triton_family(m.group(1), m.group(2))
    for fam, pat in _TRANSFORMER_PATTERNS:
        if pat.search(name):
            return fam
    return "other"


class _Counts:
    """Derived quantities of anything with DRAM byte and FLOP counts (a kernel, a family, a step)."""

    __slots__ = ()

    @property
    def dram_bytes(self) -> float:
        return self.dram_read_bytes + self.dram_write_bytes

    @property
    def flops(self) -> float:
        return self.flops_fp32 + self.flops_fp16 + self.flops_fp64 + self.flops_tensor

    @property
    def intensity_flop_per_byte(self) -> float | None:
        return arithmetic_intensity(self.flops, self.dram_bytes)


@dataclass(frozen=True, kw_only=True, slots=True)
class KernelMetrics(_Counts):
    """One kernel launch as Nsight Compute measured it.

    Attributes:
        index: launch order within the profiled step (0-based).
        name: demangled kernel name; family: see :func:`classify`.
        time_s: ``gpu__time_duration.sum``.
        dram_read_bytes / dram_write_bytes: ``dram__bytes_read.sum`` / ``dram__bytes_write.sum``.
        flops_fp32 / flops_fp16 / flops_fp64: SASS (CUDA-core) FLOPs, add + mul + 2 x fma (see
            :mod:`accelbench.scenarios.profile.ncu` for the half-precision weighting).
        flops_tensor: tensor-core operations (``sm__ops_path_tensor_src_*``, 2 per multiply-add).
        tensor_ops_by_source: tensor operations per source type (``bf16``, ``fp16``, ``tf32``, ...).
    """

    index: int
    name: str
    family: str
    time_s: float
    dram_read_bytes: float = 0.0
    dram_write_bytes: float = 0.0
    flops_fp32: float = 0.0
    flops_fp16: float = 0.0
    flops_fp64: float = 0.0
    flops_tensor: float = 0.0
    tensor_ops_by_source: dict[str, float] = field(default_factory=dict)

    @property
    def tensor_source(self) -> str | None:
        """The tensor-core source type with the most operations, None without tensor work."""
        src = {k: v for k, v in self.tensor_ops_by_source.items() if v > 0}
        return max(src, key=src.get) if src else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Totals(_Counts):
    """Sums over a set of kernels (a family, or the whole step), base units.

    ``time_share`` is this set's kernel time over the whole step's kernel time (0..1).
    """

    name: str
    kernels: int
    time_s: float
    time_share: float | None
    dram_read_bytes: float
    dram_write_bytes: float
    flops_fp32: float
    flops_fp16: float
    flops_fp64: float
    flops_tensor: float
    tensor_ops_by_source: dict[str, float]

    @property
    def achieved_flops_per_s(self) -> float | None:
        return ratio(self.flops, self.time_s)

    @property
    def achieved_bytes_per_s(self) -> float | None:
        return ratio(self.dram_bytes, self.time_s)

    @property
    def tensor_source(self) -> str | None:
        src = {k: v for k, v in self.tensor_ops_by_source.items() if v > 0}
        return max(src, key=src.get) if src else None


def total(kernels: list[KernelMetrics], name: str = "step", step_time_s: float | None = None) -> Totals:
    """Sum ``kernels``; ``step_time_s`` (the whole step's kernel time) gives ``time_share``."""
    by_src: dict[str, float] = {}
    for k in kernels:
        for src, ops in k.tensor_ops_by_source.items():
            by_src[src] = by_src.get(src, 0.0) + ops
    t = sum(k.time_s for k in kernels)
    return Totals(
        name=name,
        kernels=len(kernels),
        time_s=t,
        time_share=ratio(t, step_time_s if step_time_s is not None else t),
        dram_read_bytes=sum(k.dram_read_bytes for k in kernels),
        dram_write_bytes=sum(k.dram_write_bytes for k in kernels),
        flops_fp32=sum(k.flops_fp32 for k in kernels),
        flops_fp16=sum(k.flops_fp16 for k in kernels),
        flops_fp64=sum(k.flops_fp64 for k in kernels),
        flops_tensor=sum(k.flops_tensor for k in kernels),
        tensor_ops_by_source=by_src,
    )


def by_family(kernels: list[KernelMetrics], families: tuple[str, ...] = FAMILIES) -> list[Totals]:
    """One :class:`Totals` per family that has kernels, in ``families`` order, shares of the step's time."""
    step_t = sum(k.time_s for k in kernels)
    return [
        total([k for k in kernels if k.family == fam], fam, step_t)
        for fam in families
        if any(k.family == fam for k in kernels)
    ]
