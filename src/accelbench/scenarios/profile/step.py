"""The profiled workload: one inference step (a forward pass) or one training step, for a profile case.

| step | what one step runs |
| --- | --- |
| inference | ``model(x)`` through the case's backend, in the precision's context (``torch.inference_mode`` + autocast) |
| train | :func:`accelbench.training.step.build_step`'s step, the one ``accelbench train`` times: zero_grad, forward under autocast, cross-entropy, backward, the optimizer step (``accelbench train``'s defaults: fused SGD with momentum on CUDA), a GradScaler for amp-fp16; a language model's (``-m hf:...``) is :mod:`accelbench.scenarios.profile.lm_train`'s (next-token cross-entropy, AdamW) |

The same builder serves the analytic count, the timing and the Nsight Compute target process, so all
three see the same model, input, layout and precision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench import backends, precisions
from accelbench.scenarios.profile.lm import LM_STEPS  # built by that module

STEPS = ("inference", "train")


@dataclass
class Workload:
    """A built step, ready to run.

    Attributes:
        run: one step with the case's backend (compiled, graph replay, ...).
        eager: one step with the plain module (the analytic counter runs this one).
        forward: ``forward(x)`` with the plain module inside the precision context (no backward).
        module: the prepared ``nn.Module``; x: the input batch ``(B, 3, S, S)`` on the device.
        info: :class:`accelbench.models.ModelInfo`; image_size, channels_last: as resolved.
        compile_s: first-call wall time of the backend (None for eager).
        transform: the evaluation transform the input went through (``transform`` column).
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
    transform: str | None = None


def _transform(settings, info, size: int):
    """The evaluation transform from ``--resize``/``--crop-pct`` or the model's own (:mod:`accelbench.data.transforms`)."""
    from accelbench.data.transforms import resolve

    return resolve(
        size,
        resize=getattr(settings, "resize", None),
        crop_pct=getattr(settings, "crop_pct", None),
        model_crop_pct=info.crop_pct,
        interpolation=info.interpolation,
    )


def _batch(case, spec, module, info, device, cl: bool):
    import torch

    from accelbench.data.batches import Inputs, make_batches

    size = case.image_size or info.image_size
    inputs = Inputs.for_spec(spec, device)
    t = _transform(spec.settings, info, size)
    x_all, raw = inputs.get(size, info.mean, info.std, transform=t), inputs.raw_images()
    batches, labels, _ = make_batches(
        x_all, raw.labels, case.batch_size, case.batch_size, precisions.input_dtype(case.precision), cl
    )
    y = labels[0]
    if y is None:
        y = torch.randint(0, 10, (case.batch_size,), generator=torch.Generator().manual_seed(spec.seed))
    return batches[0], y.to(device), size


def build(case, spec, device):
    """Create the model, input and step callables for a profile ``case`` on ``device`` (torch.device): a
    :class:`Workload`, or for a language model's prefill, decode or training step an
    :class:`accelbench.scenarios.profile.lm.LMWorkload`.

    Raises:
        UnknownModelError, DataError, RuntimeError (incl. OOM): as model creation, data loading or the
        backend's first call raise them.
    """
    import torch

    from accelbench.models import create_model

    if case.extras.step in LM_STEPS:  # a language model's prefill or decode step
        from accelbench.scenarios.profile import lm

        return lm.build(case, spec, device)
    if case.extras.seq_len is not None:  # a language model's training step
        from accelbench.scenarios.profile import lm_train

        return lm_train.build(case, spec, device)
    torch.manual_seed(spec.seed)
    from accelbench.models import with_overrides

    loaded = create_model(case.model)
    st = spec.settings
    info = with_overrides(loaded.info, None, getattr(st, "mean", None), getattr(st, "std", None))
    cl = precisions.channels_last_for(case.channels_last, case.precision, loaded.module, device)
    x, y, size = _batch(case, spec, loaded.module, info, device, cl)
    build_fn = _inference if case.extras.step == "inference" else _train
    run, eager, forward, module, compile_s = build_fn(case, loaded.module, x, y, device, cl)
    return Workload(
        run=run,
        eager=eager,
        forward=forward,
        module=module,
        x=x,
        info=info,
        image_size=size,
        channels_last=cl,
        compile_s=compile_s,
        transform=_transform(st, info, size).describe(),
    )


def _inference(case, module, x, y, device, cl: bool):
    import torch

    module = precisions.prepare(case.precision, module, device).eval()
    if precisions.is_float8(case.precision):
        module = _float8(case.precision, module, x, device)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    with precisions.context(case.precision, device):
        fwd, compile_s = backends.get(case.mode).build(module, x, device)

    def run():
        with precisions.context(case.precision, device):
            return fwd(x)

    def eager():
        with precisions.context(case.precision, device):
            return module(x)

    return run, eager, eager, module, compile_s


def _float8(precision: str, module, x, device):
    """``module`` with its Linear layers in fp8 as ``accelbench run`` quantizes them (:func:`accelbench.quant.fp8.quantize`:
    dynamic activations, no calibration), so the profiled step is the one ``run`` times.

    Raises:
        Unsupported: fp8 cannot run here for this model (the device, a convolutional model, torchao missing):
            :func:`accelbench.quant.case.unsupported_here`.
    """
    from accelbench.core.errors import Unsupported
    from accelbench.quant import case as quant_case
    from accelbench.quant import fp8

    why = quant_case.unsupported_here(precision, module, x, device)
    if why:
        raise Unsupported(why)
    return fp8.quantize(module, precisions.granularity(precision), x)[0]


def _train(case, module, x, y, device, cl: bool):
    import torch

    from accelbench.training.step import SWEEP_OPTIMIZER, StepConfig, build_step

    cfg = StepConfig(precision=case.precision, mode=case.mode, channels_last=cl, **SWEEP_OPTIMIZER)
    step = build_step(module, cfg, device)
    # FlopCounterMode counts eager ops: a compiled step is counted through an eager step on the same module
    counted = (
        build_step(step.module, dataclasses.replace(cfg, mode=backends.reference()), device)
        if backends.get(case.mode).compiles
        else step
    )
    step(x, y)  # the first step: compiles forward and backward in compile mode
    compile_s = step.compile_s

    def forward():
        with torch.no_grad(), precisions.context(case.precision, device, inference=False):
            return step.module(x)

    return (lambda: step(x, y)[0]), (lambda: counted(x, y)[0]), forward, step.module, compile_s
