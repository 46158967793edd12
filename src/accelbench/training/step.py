"""The training step: forward + loss + backward + optimizer step for one module, reusable everywhere.

Used by the step-throughput sweep, by convergence runs, and by the multi-GPU (DDP) workload::

    from accelbench.training.step import StepConfig, build_step

    step = build_step(module, StepConfig(precision="amp-fp16", optimizer="sgd", lr=0.1,
                                         channels_last=True, mode="compile"), device)
    loss, logits = step(x, y)   # x: (B, C, H, W) float32 on ``device``; y: (B,) int64 on ``device``
    step.set_lr(0.05)           # e.g. from a schedule, before a step
    state = step.state_dict()   # {"model", "optimizer", "scaler"}; restore with load_state_dict
    step.compile_s              # wall s of the first call in compile mode (tracing + codegen), else None

DDP::

    step = build_step(module, cfg, device, wrap=lambda m: DDP(m, device_ids=[device.index]))

``wrap`` is applied after the module is on ``device`` in the precision's dtype and memory format, and
before ``torch.compile``; the optimizer and ``state_dict`` use the unwrapped module's parameters.

Precisions (names from :mod:`accelbench.precisions`): ``fp32`` (TF32 off), ``tf32``, ``amp-fp16``
(autocast to fp16 + ``torch.amp.GradScaler``: dynamic loss scaling, Micikevicius et al. 2018, "Mixed
Precision Training"), ``amp-bf16`` (autocast, no scaler: bf16 has fp32's exponent range), ``bf16``
(weights, gradients, optimizer state and inputs in bfloat16). Pure ``fp16`` training is not offered:
without fp32 master weights small updates vanish (Micikevicius et al. 2018, s. 3.1).

Modes: the trainable backends of :mod:`accelbench.backends` (``eager``; ``compile``:
``torch.compile(module, dynamic=False)``, Inductor compiles the forward and, via AOTAutograd, the backward;
the optimizer step stays eager: fused on CUDA, foreach on CPU; ``reduce-overhead``: the same with CUDA graphs of
the compiled forward and backward). Precisions: the trainable rows of :data:`accelbench.precisions.PRECISIONS`.

Whole-step CUDA graphs (backends with ``step_graph``: ``cudagraphs`` with the eager module, ``compile-cudagraphs``
with the compiled one): the first :data:`accelbench.backends.cudagraphs.WARMUP_CALLS` calls are ordinary steps on a
side stream; the next call captures forward, loss, backward, GradScaler (unscale, inf check, scale update) and
the fused optimizer step into one ``torch.cuda.CUDAGraph`` and replays it, and every later call with the same
batch shape copies the batch into the graph's static inputs and replays ("whole-network capture", PyTorch CUDA
semantics, "CUDA Graphs"; MLPerf Training's ResNet-50 submissions capture the step the same way). The learning
rate is a device tensor so that ``set_lr`` reaches the graph; a batch of another shape (an epoch's last) runs as
an ordinary step. GradScaler's unfused path synchronises on ``found_inf.item()``, so amp-fp16 needs the fused
optimizer there. Not with ``wrap`` (DDP).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench import backends, precisions
from accelbench.core.timing import sync

OPTIMIZERS = ("sgd", "adamw")
# The optimizer of ``accelbench train``'s timed step; the profiled training step uses it too.
SWEEP_OPTIMIZER = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4}


@dataclass(frozen=True, kw_only=True, slots=True)
class StepConfig:
    """How a training step runs.

    Attributes:
        precision: a trainable precision (:func:`accelbench.precisions.names`).
        mode: a trainable backend (``eager`` or ``compile``).
        optimizer: ``sgd`` (momentum, PyTorch's formulation) or ``adamw`` (Loshchilov & Hutter 2019).
        lr: initial learning rate (change it per step with ``TrainStep.set_lr``).
        momentum: SGD momentum.
        weight_decay: L2 penalty (SGD) or decoupled decay (AdamW); applied to every parameter.
        nesterov: SGD Nesterov momentum.
        channels_last: run the module and inputs in NHWC memory format.
        label_smoothing: passed to ``cross_entropy``.
        fused: the optimizer's fused kernels (``torch.optim`` ``fused=True``, one kernel for every parameter):
            True: fused (an error where torch has none); False: ``foreach``; None: fused on CUDA where torch
            has it, else ``foreach``.
        autocast: run forward and loss under the precision's ``torch.autocast`` (an ``amp-*`` precision); False
            where the parameters already reach the forward in the compute dtype (FSDP2's ``MixedPrecisionPolicy``
            gathers them in bf16: torchtitan trains so, without autocast) and autocast would only add its per-op
            dispatch and casts. The loss is still the float32 cross-entropy of the logits.
    """

    precision: str = "fp32"
    mode: str = "eager"
    optimizer: str = "sgd"
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    channels_last: bool = False
    label_smoothing: float = 0.0
    fused: bool | None = None
    autocast: bool = True


def unsupported_reason(cfg: StepConfig, device) -> str | None:
    """Why ``cfg`` cannot train on ``device`` (torch.device), or None when it can."""
    backend = backends.get(cfg.mode)
    why = precisions.unsupported_reason(cfg.precision, device, training=True) or backend.unsupported_reason(
        device, "train"
    )
    if not why and backend.step_graph and cfg.fused is False and precisions.get(cfg.precision).grad_scaler:
        why = (
            f"{cfg.mode} captures the whole step in a CUDA graph: {cfg.precision}'s GradScaler needs the fused "
            "optimizer there (its foreach path synchronises on found_inf)"
        )
    return why


def make_optimizer(cfg: StepConfig, params, device, *, lr_tensor: bool = False):
    """SGD with momentum or AdamW over ``params``; fused kernels as ``cfg.fused`` says (default: on CUDA where
    torch has them).

    Fused SGD starts with zero momentum buffers. Without them, a GradScaler's skipped first step
    (``amp-fp16``: the initial scale 2**16 overflows, as it usually does) still makes fused SGD create
    its buffers from the non-finite gradients, so the weights turn NaN on the next step; with existing
    buffers the fused kernel honours ``found_inf``. Zero buffers give the same update as torch's
    first-step ``buf = grad`` (``buf = momentum * 0 + grad``, dampening 0). ``benchmarks/fused_sgd_overflow.py``
    reproduces it (the loss is NaN from the second step without the buffers, finite with them; on a GPU and on a
    CPU), see docs/results.md (training).

    ``lr_tensor``: the learning rate as a 0-d float32 tensor on ``device`` (read by a captured CUDA graph at each
    replay; ``TrainStep.set_lr`` fills it in place).

    Raises:
        ValueError: unknown optimizer name.
        RuntimeError / TypeError: ``cfg.fused`` is True and torch has no fused kernel for it on ``device``.
    """
    import torch

    params = list(params)
    lr = torch.tensor(cfg.lr, dtype=torch.float32, device=device) if lr_tensor else cfg.lr
    kw: dict[str, Any] = {"lr": lr, "weight_decay": cfg.weight_decay}
    if cfg.optimizer == "sgd":
        cls, kw = torch.optim.SGD, {**kw, "momentum": cfg.momentum, "nesterov": cfg.nesterov}
    elif cfg.optimizer == "adamw":
        cls = torch.optim.AdamW
    else:
        raise ValueError(f"unknown optimizer {cfg.optimizer!r}: use one of {', '.join(OPTIMIZERS)}")
    if cfg.fused or (cfg.fused is None and device.type == "cuda"):
        try:  # fused SGD exists from torch 2.3 on; by default fall back to the foreach implementation
            opt = cls(params, fused=True, **kw)
        except (TypeError, RuntimeError):
            if cfg.fused:
                raise
        else:
            if cls is torch.optim.SGD and cfg.momentum:
                zero_momentum_buffers(opt)  # the GradScaler guard above, for every fused SGD
            return opt
    return cls(params, foreach=True, **kw)


def zero_momentum_buffers(opt) -> None:
    """Give every parameter of the SGD optimizer ``opt`` a zero momentum buffer (see :func:`make_optimizer`)."""
    import torch

    for group in opt.param_groups:
        for p in group["params"]:
            opt.state[p].setdefault("momentum_buffer", torch.zeros_like(p, memory_format=torch.preserve_format))


class TrainStep:
    """A callable training step; build it with :func:`build_step`.

    Attributes:
        module: the unwrapped ``nn.Module`` on the device (train mode), whose parameters are trained.
        model: what the step calls: ``module`` wrapped (``wrap``) and/or compiled.
        optimizer, scaler: the torch optimizer and the GradScaler (amp-fp16 only, else None).
        config, device: as given.
        first_step_s: synchronised wall seconds of the first call (None before it).
        capture_s: synchronised wall seconds of the whole-step CUDA graph capture (None without one).
    """

    def __init__(self, module, model, optimizer, scaler, cfg: StepConfig, device, graphed: bool = False):
        import torch

        self.module, self.model, self.optimizer, self.scaler = module, model, optimizer, scaler
        self.config, self.device = cfg, device
        self.first_step_s: float | None = None
        self.capture_s: float | None = None
        self._dtype = precisions.input_dtype(cfg.precision)
        self._fmt = torch.channels_last if cfg.channels_last else torch.contiguous_format
        self._graphed, self._graph, self._warm = graphed, None, 0
        self._static: tuple = ()

    @property
    def compile_s(self) -> float | None:
        """Seconds the first call took when compiled (compilation of forward and backward + one step), plus the
        whole-step graph's capture; None for a backend that compiles nothing (eager)."""
        if not backends.get(self.config.mode).compiles or self.first_step_s is None:
            return None
        return self.first_step_s + (self.capture_s or 0.0)

    def set_lr(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            if hasattr(group["lr"], "fill_"):
                group["lr"].fill_(lr)  # in place: a captured graph reads this tensor
            else:
                group["lr"] = lr

    def __call__(self, x, y):
        """One optimizer step on the batch ``x`` ``(B, C, H, W)`` with labels ``y`` ``(B,)`` (or a language
        model's ``(B, T)`` token ids, whose module returns ``(B * T, vocab)`` logits for ``(B * T,)`` next tokens).

        Returns:
            ``(loss, logits)``: the mean cross-entropy (a 0-d tensor) and the ``(B, classes)`` logits,
            both detached and not synchronised (call ``.item()`` only where a sync is wanted).
        """
        step = self._graph_step if self._graphed else self._step
        if self.first_step_s is None:
            t0 = time.perf_counter()
            out = step(x, y)
            sync(self.device)
            self.first_step_s = time.perf_counter() - t0
            return out
        return step(x, y)

    def _graph_step(self, x, y):
        """A step through the whole-step CUDA graph (see the module docstring): warm-up, capture, replay."""
        import torch

        from accelbench.backends.cudagraphs import WARMUP_CALLS, side_stream

        if self._graph is not None and x.shape == self._static[0].shape and y.shape == self._static[1].shape:
            sx, sy, loss, logits = self._static
            sx.copy_(x, non_blocking=True)
            sy.copy_(y, non_blocking=True)
            self._graph.replay()
            return loss.clone(), logits.clone()  # the graph's outputs are overwritten by the next replay
        if self._graph is not None:
            return self._step(x, y)  # another batch shape: an ordinary step
        if self._warm < WARMUP_CALLS:
            self._warm += 1
            with side_stream(self.device):
                out = self._step(x, y)
            return out
        sync(self.device)
        t0 = time.perf_counter()
        sx = self._input(x).clone()
        sy = y.clone()
        self.optimizer.zero_grad(set_to_none=True)  # backward allocates the gradients in the graph's pool
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            loss, logits = self._step(sx, sy)
        self._graph, self._static = graph, (sx, sy, loss, logits)
        graph.replay()  # capture records the step without running it: this call's step
        sync(self.device)
        self.capture_s = time.perf_counter() - t0
        return loss.clone(), logits.clone()

    def _input(self, x):
        """Images in the precision's dtype and memory format; integer inputs (a language model's token ids) as
        they are."""
        return x.to(self._dtype).contiguous(memory_format=self._fmt) if x.is_floating_point() else x.contiguous()

    def _step(self, x, y):
        import torch.nn.functional as F

        x = self._input(x)
        self.optimizer.zero_grad(set_to_none=True)
        with precisions.context(self.config.precision, self.device, inference=False, autocast=self.config.autocast):
            logits = self.model(x)
            loss = F.cross_entropy(logits.float(), y, label_smoothing=self.config.label_smoothing)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        return loss.detach(), logits.detach()

    def state_dict(self) -> dict[str, Any]:
        """Model, optimizer and scaler state (for checkpoints); keys of the unwrapped module."""
        return {
            "model": self.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output (a captured step graph is dropped: its optimizer state and learning
        rate tensors are replaced; the next calls warm up and capture again)."""
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self._graph, self._static, self._warm = None, (), 0


def build_step(
    module, cfg: StepConfig, device, *, wrap: Callable | None = None, compile_whole: bool = True
) -> TrainStep:
    """Prepare ``module`` for training on ``device`` and return its :class:`TrainStep`.

    Sets TF32 process-wide for the precision, moves/casts the module, switches it to train mode and
    NHWC when asked, applies ``wrap`` (DDP, or FSDP2's ``fully_shard``, which replaces the parameters with sharded
    ones: the optimizer is built after it, over the module's parameters as they are then), then ``torch.compile`` in
    compile mode (after ``torch._dynamo.reset()``: a fresh cache per step, no cross-case reuse). Compilation itself
    happens lazily in the first call (see ``first_step_s``). ``compile_whole=False``: the caller compiled the parts
    it wanted compiled (a language model's decoder layers, one by one, as torchtitan does); the step still
    reports the first call as ``compile_s``.

    Raises:
        ValueError: the configuration cannot train on the device (see :func:`unsupported_reason`), or a whole-step
            CUDA graph backend with a ``wrap`` that wraps (DDP).
    """
    import torch

    reason = unsupported_reason(cfg, device)
    if reason:
        raise ValueError(reason)
    backend = backends.get(cfg.mode)
    module = precisions.prepare(cfg.precision, module, device).train()
    if cfg.channels_last:
        module = module.to(memory_format=torch.channels_last)
    model = wrap(module) if wrap is not None else module
    if backend.step_graph and model is not module:
        raise ValueError(f"{cfg.mode} captures the whole step in one process's CUDA graph: not with DDP")
    optimizer = make_optimizer(cfg, module.parameters(), device, lr_tensor=backend.step_graph)
    scaler = torch.amp.GradScaler(device.type) if precisions.get(cfg.precision).grad_scaler else None
    if compile_whole:
        model = backend.wrap_training(model)
    return TrainStep(module, model, optimizer, scaler, cfg, device, graphed=backend.step_graph)
