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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from accelbench.core.roofline import arithmetic_intensity, ratio

FAMILIES = ("gemm_conv", "normalization", "reduction_pooling", "copy_transpose", "elementwise", "other")

_PATTERNS: tuple[tuple[str, re.Pattern], ...] = tuple(
    (fam, re.compile(p, re.IGNORECASE))
    for fam, p in (
        ("gemm_conv", r"gemm|xmma|cutlass|cublas|nvjet|conv(?!ert)|fprop|dgrad|wgrad|winograd|splitk|"
                      r"implicit_|flash|fmha|attention|triton_tem|hmma|imma|wgmma|fft|flip_filter"),
        ("normalization", r"batch_?norm|bn_fw|bn_bw|bn_f?bwd|layer_?norm|group_?norm|rms_?norm|instance_?norm"),
        ("reduction_pooling", r"reduce(?!d_divisor)|pool|softmax|nll_loss|cross_entropy|argmax|argmin|topk|triton_red|"
                              r"triton_per|cub::|mean|sum_kernel"),
        ("copy_transpose", r"copy|transpose|permute|nchw_?to_?nhwc|nhwc_?to_?nchw|catarray|cat_|gather|scatter|"
                           r"index_|im2col|col2im|memcpy|memset|add_?padding|constant_pad"),
        ("elementwise", r"elementwise|pointwise|triton_poi|multi_tensor_apply|foreach|functor|relu|gelu|silu|"
                        r"sigmoid|tanh|hardswish|clamp|dropout|fill"),
    )
)


def classify(kernel_name: str) -> str:
    """The family of a kernel from its (demangled) name; ``other`` when no pattern matches."""
    for fam, pat in _PATTERNS:
        if pat.search(kernel_name or ""):
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
        name=name, kernels=len(kernels), time_s=t,
        time_share=ratio(t, step_time_s if step_time_s is not None else t),
        dram_read_bytes=sum(k.dram_read_bytes for k in kernels),
        dram_write_bytes=sum(k.dram_write_bytes for k in kernels),
        flops_fp32=sum(k.flops_fp32 for k in kernels), flops_fp16=sum(k.flops_fp16 for k in kernels),
        flops_fp64=sum(k.flops_fp64 for k in kernels), flops_tensor=sum(k.flops_tensor for k in kernels),
        tensor_ops_by_source=by_src,
    )


def by_family(kernels: list[KernelMetrics]) -> list[Totals]:
    """One :class:`Totals` per family that has kernels, in ``FAMILIES`` order, shares of the step's time."""
    step_t = sum(k.time_s for k in kernels)
    return [
        total([k for k in kernels if k.family == fam], fam, step_t)
        for fam in FAMILIES
        if any(k.family == fam for k in kernels)
    ]
