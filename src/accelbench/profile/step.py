"""The profiled workload: one inference step (a forward pass) or one training step, for a case.

A profile case is an :class:`accelbench.spec.Case` (the same model / batch size / precision / mode /
channels-last description as ``accelbench run``) plus a step kind:

| step | what one step runs |
| --- | --- |
| inference | ``model(x)`` in the precision's forward context (``torch.inference_mode`` + autocast) |
| train | ``zero_grad``; forward under autocast; cross-entropy loss; backward; SGD (momentum 0.9) update; a ``GradScaler`` for amp-fp16 |

The same builder serves the analytic count, the timing and the Nsight Compute target process, so all
three see the same model, input, layout and precision.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable

from accelbench import modes, precisions
from accelbench.measure import Inputs, channels_last_for, make_batches
from accelbench.spec import Case, SweepSpec

STEPS = ("inference", "train")


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileCase:
    """A case of the sweep plus the step kind (``inference`` or ``train``)."""

    case: Case
    step: str

    @property
    def key(self) -> str:
        return f"{self.case.key}|step={self.step}"


@dataclass
class Workload:
    """A built step, ready to run.

    Attributes:
        run: one step with the case's execution mode (compiled, graph replay, ...).
        eager: one step with the plain module (the analytic counter runs this one).
        forward: ``forward(x)`` with the plain module inside the precision context (no backward).
        module: the prepared ``nn.Module``; x: the input batch ``(B, 3, S, S)`` on the device.
        info: :class:`accelbench.models.ModelInfo`; image_size, channels_last: as resolved.
        compile_s: first-call wall time of the mode (None for eager).
    """

    run: Callable[[], Any]
    eager: Callable[[], Any]
    forward: Callable[[], Any]
    module: Any
    x: Any
    info: Any
    image_size: int
    channels_last: bool
    compile_s: float | None


def unsupported_reason(pc: ProfileCase, device) -> str | None:
    """Why this case cannot be profiled on ``device``, or None."""
    c = pc.case
    if pc.step not in STEPS:
        return f"unknown step {pc.step!r}: allowed {', '.join(STEPS)}"
    if pc.step == "train" and c.mode == "cudagraphs":
        return "cudagraphs mode is profiled for inference only"
    return precisions.unsupported_reason(c.precision, device) or modes.unsupported_reason(c.mode, device)


def _batch(spec: SweepSpec, case: Case, module, info, device):
    import torch

    size = case.image_size or info.image_size
    cl = channels_last_for(case, module, device)
    inputs = Inputs(spec, device)
    x_all = inputs.get(size, info.mean, info.std, on_host=False)
    raw = inputs.raw_images()
    batches, labels, _ = make_batches(x_all, raw.labels, case, precisions.input_dtype(case.precision), cl, False)
    y = labels[0]
    if y is None:
        y = torch.randint(0, 10, (case.batch_size,), generator=torch.Generator().manual_seed(spec.seed))
    return batches[0], y.to(device), size, cl


def build(pc: ProfileCase, spec: SweepSpec, device) -> Workload:
    """Create the model, input and step callable for ``pc`` on ``device`` (torch.device).

    Raises:
        UnknownModelError, DataError, RuntimeError (incl. OOM): as model creation, data loading or
        the mode's first call raise them.
    """
    import torch

    from accelbench.models import create_model

    case = pc.case
    torch.manual_seed(spec.seed)
    loaded = create_model(case.model)
    module = precisions.prepare(case.precision, loaded.module, device)
    x, y, size, cl = _batch(spec, case, module, loaded.info, device)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    build_fn = _inference if pc.step == "inference" else _train
    run, eager, forward, compile_s = build_fn(case, module, x, y, device)
    return Workload(run=run, eager=eager, forward=forward, module=module, x=x, info=loaded.info,
                    image_size=size, channels_last=cl, compile_s=compile_s)


def _inference(case: Case, module, x, y, device):
    module.eval()
    with precisions.forward_context(case.precision, device):
        fwd, compile_s = modes.build(case.mode, module, x, device)

    def run():
        with precisions.forward_context(case.precision, device):
            return fwd(x)

    def eager():
        with precisions.forward_context(case.precision, device):
            return module(x)

    return run, eager, eager, compile_s


def _autocast(case: Case, device):
    import torch

    p = precisions.PRECISIONS[case.precision]
    if p.autocast_dtype:
        return torch.autocast(device.type, dtype=getattr(torch, p.autocast_dtype))
    return contextlib.nullcontext()


def _train(case: Case, module, x, y, device):
    import torch
    import torch.nn.functional as F

    module.train()
    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    use_scaler = case.precision == "amp-fp16" and device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if use_scaler else None
    t0 = time.perf_counter()
    fwd, _ = modes.build(case.mode, module, x, device) if case.mode != "eager" else (module, None)

    def make(fn):
        def step():
            opt.zero_grad(set_to_none=True)
            with _autocast(case, device):
                loss = F.cross_entropy(fn(x).float(), y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            return loss

        return step

    run = make(fwd)
    compile_s = None
    if case.mode != "eager":
        run()  # the first training call compiles the backward too
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        compile_s = time.perf_counter() - t0

    def forward():
        with torch.no_grad(), _autocast(case, device):
            return module(x)

    return run, make(module), forward, compile_s


def time_steps(run: Callable[[], Any], device, warmup: int, iters: int) -> list[float]:
    """Run ``warmup`` untimed steps, then time ``iters`` steps one by one.

    Returns:
        Per-step times in milliseconds: CUDA events on a GPU, ``time.perf_counter_ns`` after each
        step on a CPU.
    """
    import torch

    for _ in range(warmup):
        run()
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
        for s, e in ev:
            s.record()
            run()
            e.record()
        torch.cuda.synchronize(device)
        return [s.elapsed_time(e) for s, e in ev]
    out = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        run()
        out.append((time.perf_counter_ns() - t0) / 1e6)
    return out
