"""Analytic counts: FLOPs from ``torch.utils.flop_counter.FlopCounterMode``, parameters, minimum bytes.

FLOPs: ``FlopCounterMode`` has formulas for matrix products, convolutions (forward and backward) and
attention, each counted as 2 x multiply-accumulates (torch/utils/flop_counter.py). Every other aten
op with arithmetic (batch norm, activations, additions, pooling, optimizer updates) is NOT counted:
those ops are reported in ``uncounted_ops`` with their call counts. Ops that only move or create
data (views, copies, allocation) are not listed.

Minimum bytes, a memory-bound estimate of a perfectly fused execution in which every tensor crosses
DRAM the fewest times (P = parameter bytes, A = bytes of all leaf-module outputs that are new tensors,
i.e. not views or in-place results of their input, X = input bytes):
    inference step: P + X + 2 A             (weights read once; each activation written once, read once)
    training step:  8 P + X + 5 A           (weights read in forward and backward, gradient written,
                                             SGD with momentum reads weight, gradient and momentum and
                                             writes weight and momentum; activations written, read by
                                             the next layer and again by the backward; their gradients
                                             written and read once)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

# aten ops that move, view or create data without arithmetic: not "uncounted arithmetic".
_DATA_OPS = frozenset(
    (
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "t",
        "transpose",
        "permute",
        "expand",
        "as_strided",
        "detach",
        "alias",
        "clone",
        "copy_",
        "_to_copy",
        "contiguous",
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "new_zeros",
        "new_ones",
        "full",
        "full_like",
        "fill_",
        "zero_",
        "lift_fresh",
        "unsqueeze",
        "squeeze",
        "flatten",
        "select",
        "slice",
        "split",
        "split_with_sizes",
        "unbind",
        "cat",
        "stack",
        "index_select",
        "set_",
        "resize_",
        "_local_scalar_dense",
        "scalar_tensor",
        "arange",
        "randn",
        "rand",
        "randint",
        "normal_",
        "uniform_",
        "is_same_size",
        "_foreach_zero_",
        "_has_compatible_shallow_copy_type",
        "item",
        "to",
        "_to_dtype",
        "lift_fresh_copy",
        "empty_permuted",
        "_pin_memory",
        "convert_element_type",
    )
)


@dataclass(frozen=True, kw_only=True, slots=True)
class AnalyticCounts:
    """Analytic counts of one step.

    Attributes:
        flops: FLOPs of the step (forward, or forward + backward for a training step), 2 per MAC.
        forward_flops: FLOPs of one forward pass.
        flops_by_op: FLOPs per counted aten op (``aten.convolution``, ``aten.addmm``, ...).
        uncounted_ops: aten ops with arithmetic that FlopCounterMode has no formula for -> calls.
        params: parameter count; param_bytes: their bytes in the case's dtype.
        input_bytes: the input batch; activation_bytes: sum of new leaf-module outputs in one forward.
        min_bytes: the step's minimum DRAM bytes (module docstring).
        flop_calls: ``(op, FLOPs)`` of every counted op call of the step, in call order (which is the
            kernel launch order of an eager step: used to pair GEMM/convolution kernels with layers).
    """

    flops: float
    forward_flops: float
    flops_by_op: dict[str, float] = field(default_factory=dict)
    uncounted_ops: dict[str, int] = field(default_factory=dict)
    params: int = 0
    param_bytes: int = 0
    input_bytes: int = 0
    activation_bytes: int = 0
    min_bytes: int = 0
    flop_calls: tuple[tuple[str, float], ...] = ()

    def uncounted_text(self, limit: int = 8) -> str:
        """``aten.native_batch_norm x53, aten.relu_ x49, ...`` (most called first)."""
        items = sorted(self.uncounted_ops.items(), key=lambda kv: (-kv[1], kv[0]))
        text = ", ".join(f"{k} x{v}" for k, v in items[:limit])
        return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def min_bytes(step: str, param_bytes: int, input_bytes: int, activation_bytes: int) -> int:
    """Minimum DRAM bytes of a step (module docstring formula). Raises ValueError for an unknown step."""
    if step == "inference":
        return param_bytes + input_bytes + 2 * activation_bytes
    if step == "train":
        return 8 * param_bytes + input_bytes + 5 * activation_bytes
    raise ValueError(f"unknown step {step!r}")


class CountedWork(Protocol):
    """What :func:`count` reads of a built step (:class:`accelbench.scenarios.profile.step.Workload` is one)."""

    @property
    def module(self) -> torch.nn.Module: ...  # the plain module; its leaf modules' outputs are the activations

    @property
    def x(self) -> torch.Tensor: ...  # the input batch

    @property
    def forward(self) -> Callable[[], Any]: ...  # one forward pass of the plain module

    @property
    def eager(self) -> Callable[[], Any]: ...  # one whole step of the plain module


def _op_logger(registry):
    """A dispatch mode counting every aten op call, and the FLOPs of each counted call in order."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class OpLog(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.calls: Counter = Counter()
            self.ordered: list[tuple[str, float]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func.overloadpacket
            self.calls[packet] += 1
            if packet in registry:  # the same formula call FlopCounterMode makes
                self.ordered.append((str(packet), float(registry[packet](*args, **kwargs, out_val=out))))
            return out

    return OpLog()


def _not_arithmetic(packet) -> bool:
    """Data-movement ops, views, and composite ops (``aten.conv2d``) whose decomposition is seen too."""
    import torch

    name = str(packet).split(".")[-1]
    if name in _DATA_OPS or str(packet).startswith("profiler."):
        return True
    try:
        if torch._C._dispatch_has_kernel_for_dispatch_key(packet._qualified_op_name, "CompositeImplicitAutograd"):
            return True
        return any(getattr(getattr(packet, o), "is_view", False) for o in packet.overloads())
    except Exception:
        return False


def _activation_hooks(module):
    """Forward hooks summing the bytes of each leaf module's output that is a new tensor."""
    import torch

    total = {"bytes": 0}

    def hook(mod, inputs, out):
        outs = out if isinstance(out, (tuple, list)) else (out,)
        ins = {t.untyped_storage().data_ptr() for t in inputs if isinstance(t, torch.Tensor)}
        for t in outs:
            if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() not in ins:
                total["bytes"] += t.numel() * t.element_size()

    handles = [m.register_forward_hook(hook) for m in module.modules() if not list(m.children())]
    return total, handles


def count_flops(fn: Callable[[], Any]) -> tuple[float, dict[str, float], dict[str, int], tuple[tuple[str, float], ...]]:
    """Run ``fn()`` once under FlopCounterMode.

    Returns:
        ``(total FLOPs, FLOPs by op, uncounted arithmetic ops -> calls, ordered (op, FLOPs) calls)``.
    """
    from torch.utils.flop_counter import FlopCounterMode, flop_registry

    fc = FlopCounterMode(display=False)
    registry = getattr(fc, "flop_registry", flop_registry)
    log = _op_logger(registry)
    with log, fc:  # the logger below FlopCounterMode sees the ops it decomposes (conv2d -> convolution)
        fn()
    by_op = {str(k): float(v) for k, v in fc.get_flop_counts().get("Global", {}).items()}
    uncounted = {str(p): n for p, n in log.calls.items() if p not in registry and not _not_arithmetic(p)}
    return float(fc.get_total_flops()), by_op, uncounted, tuple(log.ordered)


def count(work: CountedWork, step: str) -> AnalyticCounts:
    """Analytic counts for a built workload (:class:`accelbench.scenarios.profile.step.Workload`).

    ``step``: ``train`` counts a whole training step (``work.eager``) as well, anything else the forward only.

    The eager module is run: once forward-only, and for a training step once more as a whole step.
    """
    module = work.module
    params = sum(p.numel() for p in module.parameters())
    param_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    input_bytes = work.x.numel() * work.x.element_size()
    acts, handles = _activation_hooks(module)
    try:
        fwd_flops, by_op, uncounted, calls = count_flops(work.forward)
    finally:
        for h in handles:
            h.remove()
    flops = fwd_flops
    if step == "train":
        flops, by_op, uncounted, calls = count_flops(work.eager)
    return AnalyticCounts(
        flops=flops,
        forward_flops=fwd_flops,
        flops_by_op=by_op,
        uncounted_ops=uncounted,
        params=params,
        param_bytes=param_bytes,
        input_bytes=input_bytes,
        activation_bytes=acts["bytes"],
        min_bytes=min_bytes(step, param_bytes, input_bytes, acts["bytes"]),
        flop_calls=calls,
    )
