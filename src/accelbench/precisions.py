"""Numeric precisions: a registry of how each one sets up the model, the input and the forward context.

| name | weights / inputs | matmul & conv | source |
| --- | --- | --- | --- |
| fp32 | float32 | IEEE fp32, TF32 off | torch.backends.cuda.matmul.allow_tf32 docs |
| tf32 | float32 | TF32 tensor cores (CUDA only) | NVIDIA Ampere whitepaper; torch CUDA semantics |
| amp-fp16 / amp-bf16 | float32 | ``torch.autocast`` to fp16 / bf16 | torch.amp docs |
| fp16 / bf16 | cast to the dtype | that dtype | |
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Precision:
    name: str
    cast_dtype: str | None  # model and inputs cast to this torch dtype name
    autocast_dtype: str | None  # torch.autocast dtype name
    tf32: bool
    cuda_only: bool = False


PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        Precision("fp32", None, None, tf32=False),
        Precision("tf32", None, None, tf32=True, cuda_only=True),
        Precision("amp-fp16", None, "float16", tf32=False),
        Precision("amp-bf16", None, "bfloat16", tf32=False),
        Precision("fp16", "float16", None, tf32=False),
        Precision("bf16", "bfloat16", None, tf32=False),
    )
}


def unsupported_reason(name: str, device) -> str | None:
    """Why precision ``name`` cannot run on ``device`` (a torch.device), or None when it can."""
    import torch

    p = PRECISIONS[name]
    if p.cuda_only and device.type != "cuda":
        return f"{name} needs a CUDA GPU with TF32 tensor cores (Ampere or newer)"
    if device.type == "cuda" and name == "tf32" and torch.cuda.get_device_capability(device)[0] < 8:
        return "tf32 needs compute capability 8.0 or newer"
    if device.type == "cuda" and "bf16" in name and not torch.cuda.is_bf16_supported():
        return f"{name} needs bfloat16 support (compute capability 8.0 or newer)"
    return None


def set_tf32(enabled: bool) -> None:
    """Allow or forbid TF32 for CUDA matmuls and cuDNN convolutions (process-wide)."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled


def prepare(name: str, module, device):
    """Move ``module`` to ``device`` in the precision's dtype, set TF32, return the module."""
    import torch

    p = PRECISIONS[name]
    set_tf32(p.tf32)
    module = module.to(device)
    if p.cast_dtype:
        module = module.to(getattr(torch, p.cast_dtype))
    return module


def input_dtype(name: str):
    """The dtype inputs must have for precision ``name``."""
    import torch

    p = PRECISIONS[name]
    return getattr(torch, p.cast_dtype) if p.cast_dtype else torch.float32


def forward_context(name: str, device):
    """``torch.autocast`` for amp precisions, a no-op context otherwise. Always inference mode."""
    import torch

    p = PRECISIONS[name]
    stack = contextlib.ExitStack()
    stack.enter_context(torch.inference_mode())
    if p.autocast_dtype:
        stack.enter_context(torch.autocast(device.type, dtype=getattr(torch, p.autocast_dtype)))
    return stack
