"""Numeric precisions: THE table. Everything else asks it; nobody compares precision names.

| name | weights / inputs | matmul & conv | training | roofline ceiling | source |
| --- | --- | --- | --- | --- | --- |
| fp32 | float32 | IEEE fp32, TF32 off | yes | fp32 | torch.backends.cuda.matmul.allow_tf32 docs |
| tf32 | float32 | TF32 tensor cores (CUDA, sm80+) | yes | tf32 | NVIDIA Ampere whitepaper; torch CUDA semantics |
| amp-fp16 | float32 | ``torch.autocast`` to fp16 | yes, with a GradScaler | fp16 | torch.amp docs; Micikevicius et al. 2018 |
| amp-bf16 | float32 | ``torch.autocast`` to bf16 | yes (bf16 keeps fp32's exponent range) | bf16 | torch.amp docs |
| fp16 | cast to float16 | fp16 | no: small updates vanish without fp32 master weights (Micikevicius et al. 2018, s. 3.1) | fp16 | |
| bf16 | cast to bfloat16 | bf16 | yes (weights, gradients, optimizer state in bf16) | bf16 | |
| int8 | int8 weights (per-channel symmetric) and activations (per-tensor), static: calibrated on images disjoint from those measured | int8 (CPU: oneDNN/VNNI through Inductor with freezing; onnxruntime QDQ) | no | int8 | PyTorch tutorial "PyTorch 2 Export Quantization with X86 Backend through Inductor"; onnxruntime "Quantize ONNX models" |
| int8-dynamic | int8 weights, activations quantized per batch at run time (Linear layers) | int8 | no | int8 | same sources |
| fp8 | Linear layers (a language model's LM head included): float8 e4m3 weights (per output row) and activations (per row, scaled per batch); the rest bf16 | ``torch._scaled_mm`` (CUDA, compute capability >= 8.9) through torchao | no | fp8 | torchao ``Float8DynamicActivationFloat8WeightConfig`` docs; OCP 8-bit floating point spec (E4M3 max 448) |
| fp8-tensor | as fp8, one scale per tensor (weights and activations) | same | no | fp8 | same |
| int8-weight-only | a language model's linear weights int8 (one scale a row), activations bf16 (generate only) | ``aten._weight_int8pack_mm`` | no | bf16 | gpt-fast ``WeightOnlyInt8Linear`` |
| fp8-weight-only | the same with float8 e4m3 weights | dequantize + bf16 matmul; one token a row compiled: a fused reduction | no | bf16 | OCP 8-bit floating point spec |

(``tests/test_registries.py`` checks this table, and the README's generated one, against :data:`PRECISIONS`.) A
precision is one :func:`register` call below, or one of an installed distribution (entry point group
``accelbench.precisions``, :mod:`accelbench.core.plugins`); its ``ceiling`` must name one of :data:`ROOFS`.

Where a reduced precision has no kernel path on the device (int8 on a CUDA GPU; fp8 below compute capability
8.9, on a CPU, or on a model whose compute is convolutions), :func:`simulated_reason` says why, and the inference
scenario measures its accuracy in simulation (:mod:`accelbench.quant.simulate`) in an ``unsupported`` row.

The int8 precisions run on CPUs only: PyTorch has no INT8 convolution kernel path on CUDA GPUs (the
x86 Inductor quantizer targets CPUs, per PyTorch's "PyTorch 2 Export Quantization with X86 Backend through Inductor"
tutorial). How a backend quantizes is its
``quantize`` (:mod:`accelbench.quant`).

:func:`context` is the package's one ``torch.autocast`` call site: the forward (inference) and training
contexts of every scenario are built here.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from accelbench.core.config import pick, put
from accelbench.core.errors import ConfigError

# The roofline ceilings: dense matmul throughput measured per kind (:mod:`accelbench.ceilings.measure` measures each).
# Every precision names the one that bounds it (the tensor-core path of a reduced precision).
ROOFS = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True, slots=True)
class Precision:
    """One precision.

    Attributes:
        name: the name users give (``amp-bf16``).
        cast_dtype: torch dtype name the model and inputs are cast to, or None (they stay float32).
        autocast_dtype: torch dtype name of ``torch.autocast``, or None.
        tf32: TF32 tensor cores allowed for float32 matmuls and convolutions.
        grad_scaler: training needs dynamic loss scaling (``torch.amp.GradScaler``).
        trainable: a training step can run in it.
        needs_cuda: it exists only on CUDA GPUs (TF32).
        min_capability: the CUDA compute capability it needs, or None.
        ceiling: the roofline ceiling that bounds it, one of :data:`ROOFS` (required: a precision without one is a
            ``ConfigError`` naming it, never a silent fp32 roof).
        quant: ``static`` or ``dynamic`` post-training int8 quantization, or None (a float precision).
        needs_cpu: it runs on CPUs only (no kernel path on CUDA GPUs).
        granularity: fp8 scaling: ``row`` (one scale per row of each matrix) or ``tensor``; None otherwise.
        about: one line for the tables (README, ``--help``): what it computes in.
        tune: where ``accelbench tune`` tries it by default: each entry words among the device (``cpu``,
            ``cuda``), the workload (``inference``, ``train``) and the objective (``latency``; ``throughput`` for
            throughput, cost and energy), matching a search all its words describe
            (:func:`accelbench.studies.tune_space.default_space`); empty: only when asked for.
        weight_only: ``int8`` or ``fp8``: a language model's linear weights quantized, one scale a row, the
            activations in ``cast_dtype`` (:mod:`accelbench.quant.weight_only`); the generate scenario only.
        workloads: the workloads that take it (``inference``, ``train``, ``generate``).
    """

    name: str
    cast_dtype: str | None = None
    autocast_dtype: str | None = None
    tf32: bool = False
    grad_scaler: bool = False
    trainable: bool = True
    needs_cuda: bool = False
    min_capability: tuple[int, int] | None = None
    ceiling: str | None = None
    quant: str | None = None
    needs_cpu: bool = False
    granularity: str | None = None
    weight_only: str | None = None
    workloads: tuple[str, ...] = ("inference", "train")
    about: str = ""
    tune: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.ceiling not in ROOFS:
            raise ConfigError(f"roofline ceiling of precision {self.name}", self.ceiling, ", ".join(ROOFS))

    @property
    def reduced(self) -> bool:
        """Computes below IEEE fp32 (TF32 or 16-bit): tensor cores, where NHWC layouts pay off."""
        return self.tf32 or self.cast_dtype is not None or self.autocast_dtype is not None

    @property
    def bf16(self) -> bool:
        return "bfloat16" in (self.cast_dtype, self.autocast_dtype)

    def runs_on(self, device_type: str) -> bool:
        """It has a kernel path on a device of this type (``cpu``, ``cuda``; the compute capability aside)."""
        return not (self.needs_cuda and device_type != "cuda") and not (self.needs_cpu and device_type != "cpu")


PRECISIONS: dict[str, Precision] = {}


def register(precision: Precision) -> Precision:
    """Add ``precision`` to :data:`PRECISIONS` under its name.

    Raises:
        ValueError: another precision has that name.
    """
    return put(PRECISIONS, precision.name, precision, "precision")


for _p in (
    Precision(
        "fp32",
        ceiling="fp32",
        workloads=("inference", "train", "generate"),
        about="IEEE float32, TF32 off",
        tune=("cpu",),
    ),
    Precision(
        "tf32",
        tf32=True,
        needs_cuda=True,
        min_capability=(8, 0),
        ceiling="tf32",
        about="float32 through TF32 tensor cores",
    ),
    Precision(
        "amp-fp16",
        autocast_dtype="float16",
        grad_scaler=True,
        ceiling="fp16",
        about="torch.autocast to float16 (training: GradScaler)",
        tune=("cuda",),
    ),
    Precision(
        "amp-bf16", autocast_dtype="bfloat16", ceiling="bf16", about="torch.autocast to bfloat16", tune=("cuda",)
    ),
    Precision(
        "fp16",
        cast_dtype="float16",
        trainable=False,
        ceiling="fp16",
        workloads=("inference", "train", "generate"),
        about="model and inputs cast to float16",
        tune=("cuda",),
    ),
    Precision(
        "bf16",
        cast_dtype="bfloat16",
        ceiling="bf16",
        workloads=("inference", "train", "generate"),
        about="model and inputs cast to bfloat16",
        tune=("cpu", "cuda"),
    ),
    Precision(
        "int8",
        trainable=False,
        ceiling="int8",
        quant="static",
        needs_cpu=True,
        about="int8 weights and activations, static (calibrated)",
    ),
    Precision(
        "int8-dynamic",
        trainable=False,
        ceiling="int8",
        quant="dynamic",
        needs_cpu=True,
        about="int8 weights, activations quantized per batch",
    ),
    Precision(
        "fp8",
        trainable=False,
        needs_cuda=True,
        min_capability=(8, 9),
        ceiling="fp8",
        quant="float8",
        granularity="row",
        workloads=("inference", "generate"),
        about="float8 e4m3 Linear layers, per-row scales (torchao)",
    ),
    Precision(
        "fp8-tensor",
        trainable=False,
        needs_cuda=True,
        min_capability=(8, 9),
        ceiling="fp8",
        quant="float8",
        granularity="tensor",
        about="float8 e4m3 Linear layers, per-tensor scales (torchao)",
    ),
    Precision(
        "int8-weight-only",
        cast_dtype="bfloat16",
        trainable=False,
        ceiling="bf16",
        weight_only="int8",
        workloads=("generate",),
        about="language model: int8 linear weights (one scale a row), bf16 activations",
    ),
    Precision(
        "fp8-weight-only",
        cast_dtype="bfloat16",
        trainable=False,
        ceiling="bf16",
        weight_only="fp8",
        workloads=("generate",),
        about="language model: float8 e4m3 linear weights (one scale a row), bf16 activations",
    ),
):
    register(_p)


def get(name: str) -> Precision:
    """The precision called ``name``.

    Raises:
        ConfigError: no such precision.
    """
    return pick(PRECISIONS, name, "precision")


def quant_scheme(name: str) -> str | None:
    """``static`` / ``dynamic`` for an int8 precision, ``float8`` for an fp8 one, None for a float one."""
    return get(name).quant


def is_reference(name: str) -> bool:
    """The fp32 reference precision (IEEE fp32, TF32 off): the accuracy every other precision is held to."""
    p = get(name)
    return not p.reduced and p.quant is None


def is_float8(name: str) -> bool:
    """An fp8 precision (torchao float8 on Linear layers; simulated where it cannot run)."""
    return get(name).quant == "float8"


def granularity(name: str) -> str | None:
    """fp8 scaling granularity, ``row`` or ``tensor`` (None for other precisions)."""
    return get(name).granularity


_FP8_DEVICE = (
    "fp8 needs a CUDA GPU with FP8 tensor cores, compute capability 8.9 or newer (Ada, Hopper, "
    "Blackwell: torchao float8 docs)"
)


def simulated_reason(name: str, device) -> str | None:
    """Why quantized precision ``name`` has no kernel path on ``device`` (its accuracy is then simulated,
    :mod:`accelbench.quant.simulate`), or None when it runs for real (or is not a quantized precision)."""
    import torch

    p = get(name)
    if p.quant is None:
        return None
    if p.quant == "float8" and (device.type != "cuda" or torch.cuda.get_device_capability(device) < p.min_capability):
        return _FP8_DEVICE
    return unsupported_reason(name, device)


def names(trainable: bool = False, workload: str = "inference") -> tuple[str, ...]:
    """The precision names of ``workload`` (only those a training step can use, with ``trainable``)."""
    wl = "train" if trainable else workload
    return tuple(n for n, p in PRECISIONS.items() if wl in p.workloads and (p.trainable or not trainable))


def unsupported_reason(name: str, device, training: bool = False) -> str | None:
    """Why precision ``name`` cannot run on ``device`` (a torch.device), or None when it can."""
    import torch

    p = get(name)
    if training and p.quant:
        return f"{name} is post-training quantization: inference only"
    if training and not p.trainable:
        return (
            f"{name} is not a training precision: pure fp16 loses small updates without fp32 master weights "
            f"(use one of {', '.join(names(trainable=True))})"
        )
    if p.needs_cuda and device.type != "cuda":
        return (
            _FP8_DEVICE if p.quant == "float8" else f"{name} needs a CUDA GPU with TF32 tensor cores (Ampere or newer)"
        )
    if p.needs_cpu and device.type != "cpu":
        return (
            f"{name} runs on CPUs only: PyTorch has no INT8 convolution kernel path on {device.type} GPUs "
            "(Hopper included), and the x86 Inductor quantizer targets CPUs (PyTorch tutorial 'PyTorch 2 Export "
            "Quantization with X86 Backend through Inductor'); use --device cpu"
        )
    if device.type == "cuda":
        if p.min_capability and torch.cuda.get_device_capability(device) < p.min_capability:
            return f"{name} needs compute capability {p.min_capability[0]}.{p.min_capability[1]} or newer"
        if p.bf16 and not torch.cuda.is_bf16_supported():
            return f"{name} needs bfloat16 support (compute capability 8.0 or newer)"
    return None


def set_tf32(enabled: bool) -> None:
    """Allow or forbid TF32 for CUDA matmuls and cuDNN convolutions (process-wide)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def prepare(name: str, module, device):
    """Move ``module`` to ``device`` in the precision's dtype and set TF32; returns the module."""
    import torch

    p = get(name)
    set_tf32(p.tf32)
    module = module.to(device)
    if p.cast_dtype:
        module = module.to(getattr(torch, p.cast_dtype))
    return module


def input_dtype(name: str):
    """The dtype inputs must have for precision ``name``."""
    import torch

    p = get(name)
    return getattr(torch, p.cast_dtype) if p.cast_dtype else torch.float32


def context(name: str, device, *, inference: bool = True, autocast: bool = True):
    """The context a step runs in: ``torch.autocast`` for amp precisions (a no-op otherwise, or with ``autocast``
    False), inside ``torch.inference_mode`` when ``inference``. THE one ``torch.autocast`` call site of
    accelbench."""
    import torch

    p = get(name)
    stack = contextlib.ExitStack()
    if inference:
        stack.enter_context(torch.inference_mode())
    if p.autocast_dtype and autocast:
        stack.enter_context(torch.autocast(device.type, dtype=getattr(torch, p.autocast_dtype)))
    return stack


def _uses_conv(module) -> bool:
    import torch

    return any(isinstance(m, torch.nn.Conv2d) for m in module.modules())


def channels_last_for(setting: str, name: str, module, device) -> bool:
    """Resolve the ``channels_last`` setting: ``auto`` is on for convolutional models on CUDA in a reduced
    precision (NHWC is the tensor cores' native layout for convolutions: cuDNN developer guide, "Tensor
    Layouts"), off for fp32 and CPUs."""
    if setting != "auto":
        return setting == "on"
    return device.type == "cuda" and get(name).reduced and _uses_conv(module)


def _load_plugins() -> None:
    """Precisions of installed distributions (entry point group ``accelbench.precisions``), once."""
    from accelbench.core import plugins

    plugins.load("accelbench.precisions", lambda name, obj: register(plugins.instance(obj, Precision)))


_load_plugins()
