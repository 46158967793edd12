"""The quantized side of an inference case: the fp32 reference, calibration, quantizing by the backend, and the
simulated (fake-quant) accuracy row of a precision with no kernel path on the device."""

from __future__ import annotations


def unsupported_here(precision: str, module, example, device) -> str | None:
    """Why quantized ``precision`` cannot run for real for ``module`` on ``device`` (its accuracy is then
    simulated), or None: the device (:func:`accelbench.precisions.simulated_reason`), an fp8 model whose compute
    is convolutions (:func:`accelbench.quant.fp8.conv_dominated`), or torchao missing for fp8."""
    from accelbench import precisions
    from accelbench.quant import fp8

    reason = precisions.simulated_reason(precision, device)
    if reason or not precisions.is_float8(precision):
        return reason
    share = fp8.conv_dominated(fp8.layer_flops(module, example))
    if share is not None:
        return (
            f"fp8 on a convolutional model ({100 * share:.0f} % of its Conv2d + Linear FLOPs are convolutions): "
            "torchao's FP8 convolution needs SM100 (Blackwell), and accelbench converts Linear layers only"
        )
    return fp8.missing_reason()


def quantized(case, spec, module, info, size, backend, data, dev, transform=None, simulate: bool = False):
    """``module`` quantized for the case's precision (by ``backend``, or simulated), and its columns: the calibration
    (``calibration_data``, ``calibration_images``, ``calibration_s``) and, with labels, the fp32 top-1 of the
    same module on the same batches (eager, before quantizing: ``_top1_ref_hits``)."""
    import time

    from accelbench import precisions
    from accelbench.data.evaluation import accuracy_pass
    from accelbench.quant import calibration
    from accelbench.quant import simulate as sim

    batches, blabels, n_real, feed = data
    ref = None
    if blabels and blabels[0] is not None:
        with precisions.context("fp32", dev):
            ref = accuracy_pass(module, batches, blabels, n_real, feed).hits
    t0, scheme = time.perf_counter(), precisions.quant_scheme(case.precision)
    gran = precisions.granularity(case.precision)
    calib, desc = [], "none: dynamic quantization computes activation scales per batch"
    if scheme == "static":
        plan = calibration.plan(case.data, case.images, spec.settings.calibration_images, spec.seed)
        x, desc = calibration.load(plan, size, info.mean, info.std, transform)
        calib = calibration.batches(x, case.batch_size)
    example = batches[0].to(dev)
    if simulate:
        out, cols = sim.simulated(module, scheme, gran, calib, example)
    else:
        out, cols = backend.quantize(module, scheme, calib, example, dev, granularity=gran)
        cols = {**cols, "simulated": str(cols.get("quant_kernels", "")).startswith("simulated")}
    cols = {
        **cols,
        "calibration_data": desc,
        "calibration_images": sum(int(b.shape[0]) for b in calib),
        "calibration_s": time.perf_counter() - t0,
        "_top1_ref_hits": ref[1] if ref else None,
    }
    return out, cols


def with_reference(qcols: dict, hits, n_real: int) -> dict:
    """The quantization columns, with the accuracy beside the fp32 reference (:mod:`accelbench.quant.accuracy`)."""
    from accelbench.quant.accuracy import accuracy_columns

    cols = dict(qcols)
    ref = cols.pop("_top1_ref_hits", None)
    if hits and ref is not None:
        cols.update(accuracy_columns(hits[1] / n_real, ref / n_real))
    return cols


def simulated_row(case, spec, module, info, size, data, dev, ev, reason: str):
    """Measure the case's accuracy in simulation and raise :class:`accelbench.core.errors.Unsupported` with it:
    an ``unsupported`` row (``reason``) with ``simulated``, ``top1``/``top5`` beside the fp32 reference, and no
    speed figure. A simulation that fails leaves the row with the reason and the failure."""
    from accelbench import precisions
    from accelbench.core.errors import Unsupported, one_line
    from accelbench.data.evaluation import accuracy_pass

    batches, blabels, n_real, feed = data
    rec = {
        "weights": info.weights,
        "pretrained": info.pretrained,
        "image_size": size,
        "data_description": ev.raw.description,
        **ev.columns(),
    }
    if not (blabels and blabels[0] is not None):  # nothing to simulate for: say why there is no accuracy either
        raise Unsupported(f"{reason}; no simulated accuracy: {ev.reason or 'the data has no labels'}", rec)
    try:
        out, cols = quantized(case, spec, module, info, size, None, data, dev, ev.transform, simulate=True)
        with precisions.context(case.precision, dev):
            scored = accuracy_pass(out, batches, blabels, n_real, feed, ev.n_classes)
    except Exception as exc:  # the speed row is unsupported anyway; say why the accuracy is missing too
        raise Unsupported(f"{reason}; accuracy simulation failed: {one_line(exc)}", rec) from None
    rec.update(**scored.columns(n_real, ev), **with_reference(cols, scored.hits, n_real))
    raise Unsupported(f"{reason} (accuracy simulated with fake quantization; no speed figure)", rec)
