"""The inference scenario (``accelbench run``): the offline window, one process or data parallel.

Per case: the model in its precision and memory format; the real images, decoded, resized and normalised
on the device before timing (on the host with ``include_transfer``: the copy is timed too); under torchrun
each rank keeps every ``world``-th image (the ``DistributedSampler`` split). Compilation or graph capture is
timed separately (``compile_s``); with labels (the model's label space matches the data's) an untimed pass
over every batch computes top-1/top-5, without them one untimed first step runs instead (a pass would only
warm up, at 1000 steps for 1000 images at batch 1); ``warmup_batches`` more steps run, then the steps
needed to reach both ``min_timed_batches`` and ``min_time_s`` (at the warm-up's time per step) are timed,
cycling through the batches (:mod:`accelbench.core.timing`); every rank runs the largest number of steps any
rank needs, between two barriers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.evaluation import EVALUATION
from accelbench.core.options.inference import INFERENCE
from accelbench.core.spec import Extras, Windowed
from accelbench.data.evaluation import accuracy_pass
from accelbench.scenarios.base import Scenario, register

GPU_DEFAULTS: dict[str, Any] = {
    "data": "cifar10-test",
    "batch_sizes": tuple(2**i for i in range(11)),  # 1..1024
    "precisions": ("fp32", "tf32", "amp-fp16", "amp-bf16"),
    "modes": ("eager", "compile"),
    "images": 1000,
    "warmup_batches": 5,
    "min_timed_batches": 30,
    "min_time_s": 0.5,
    "models": ("resnet50",),
    **device_defaults(INFERENCE, cuda=True),
}
CPU_DEFAULTS: dict[str, Any] = {
    # Sized so that ResNet-50 at 224x224 takes about a minute on a small CPU.
    "data": "cifar10-test",
    "batch_sizes": (1, 8, 32),
    "precisions": ("fp32",),
    "modes": ("eager",),
    "images": 32,
    "warmup_batches": 1,
    "min_timed_batches": 3,
    "min_time_s": 0.0,
    "models": ("resnet50",),
    **device_defaults(INFERENCE, cuda=False),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class InferenceSettings(Windowed):
    """Attributes:
    include_transfer: time the host-to-device copy of each batch as well (pinned host memory).
    repeats: timed windows per case (:class:`accelbench.core.spec.Windowed`).
    calibration_images: images that calibrate a static int8 precision, disjoint from the measured ones
        (:func:`accelbench.quant.calibration.plan`).
    label_space: which class each model output is (``imagenet-1k``, ``cifar10``, ``folder``), for every
        model; None: the model's own (:mod:`accelbench.models`).
    mean, std: input normalisation, 3 floats on the 0..1 scale (TOML/flags also take a preset name,
        :data:`accelbench.data.labels.NORM_PRESETS`); None: the model's own.
    resize: shorter side in pixels before the center crop to the input size; crop_pct: input side / that
        side (timm's crop_pct); None: the model's own (torchvision weights, timm pretrained_cfg) or no crop.
    labels: a labels file, line k naming output k (:func:`accelbench.data.labels.read_labels_file`).
    The fields are declared in :data:`accelbench.core.options.inference.INFERENCE` and (the evaluation fields)
    :data:`accelbench.core.options.evaluation.EVALUATION`.
    """

    include_transfer: bool = INFERENCE["include_transfer"].field()
    calibration_images: int = INFERENCE["calibration_images"].field()
    label_space: str | None = EVALUATION["label_space"].field()
    mean: tuple[float, ...] | None = EVALUATION["mean"].field()
    std: tuple[float, ...] | None = EVALUATION["std"].field()
    resize: int | None = EVALUATION["resize"].field()
    crop_pct: float | None = EVALUATION["crop_pct"].field()
    labels: str | None = EVALUATION["labels"].field()

    def __post_init__(self) -> None:
        from accelbench.data.evaluation import check_eval_settings

        Windowed.__post_init__(self)
        check_declared(self)
        check_eval_settings(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class InferenceExtras(Extras):
    include_transfer: bool = False


class Inference(Scenario):
    name, kind, dist_kind = "inference", kinds.INFERENCE, kinds.INFERENCE_DP
    workload, dist_workload = kinds.INFERENCE, kinds.INFERENCE_DP
    quantizes = True
    command = "accelbench run"
    settings_type, extras_type = InferenceSettings, InferenceExtras
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        from accelbench.data.evaluation import normalize_eval

        return normalize_eval(merged)

    def check(self, spec) -> None:
        """The models and data (:meth:`Scenario.check`), and a labels file against the label space and folders.

        Raises:
            UnknownModelError, MissingDependencyError, DataError: one line each.
        """
        from accelbench.data import list_images, source_path
        from accelbench.data.labels import check_labels, read_labels_file

        super().check(spec)
        if spec.settings.labels:
            names = read_labels_file(spec.settings.labels)
            path = source_path(spec.data)
            classes = tuple(sorted({c for c, _ in list_images(path)})) if path is not None else None
            check_labels(names, spec.settings.labels, spec.settings.label_space, classes)

    def unsupported_reason(self, case, device) -> str | None:
        """The backend's reason, or the precision's; a quantized precision with no kernel path here is measured
        anyway: :meth:`measure` simulates its accuracy (:mod:`accelbench.quant.simulate`)."""
        from accelbench import backends, precisions

        if precisions.quant_scheme(case.precision) and not self.training:
            return backends.get(case.mode).unsupported_reason(device, self.backend_workload)
        return super().unsupported_reason(case, device)

    def export_extra(self, store, run_id: int, doc: dict) -> None:
        """``cheapest_meeting_target``: per model, the cheapest precision meeting the accuracy target."""
        from accelbench.quant.accuracy import cheapest_meeting_target

        doc["cheapest_meeting_target"] = cheapest_meeting_target(doc.get("results", []))

    def extras(self, spec) -> InferenceExtras:
        return InferenceExtras(include_transfer=spec.settings.include_transfer)

    def prepare(self, spec, device, store):
        """The images (:meth:`Scenario.prepare`) and the per-sweep model builds
        (:class:`accelbench.models.SeededBuilds`): ``(inputs, builds)``."""
        from accelbench.models import SeededBuilds

        return super().prepare(spec, device, store), SeededBuilds()

    def measure(self, case, spec, state, rank, sink):
        import torch

        from accelbench import backends, precisions
        from accelbench.core.ci import window_columns
        from accelbench.core.rank import add_telemetry
        from accelbench.core.stats import stat_columns, summarize
        from accelbench.core.timing import steps_needed, time_windows, warm_up
        from accelbench.quant import case as quant_case
        from accelbench.scenarios.base import case_monitor

        inputs, builds = state
        dev = rank.device
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        module, info, cl = _prepared_model(case, dev, builds.create(case.model, spec.seed))
        size = case.image_size or info.image_size
        ev, bs, images, data = _batches(case, spec, inputs, rank, info, size, cl)
        info, raw = ev.info, ev.raw
        batches, blabels, n_real, feed = data
        backend, qcols = backends.get(case.mode), {}
        if precisions.quant_scheme(case.precision):
            why = quant_case.unsupported_here(case.precision, module, batches[0].to(dev), dev)
            if why:  # raises Unsupported: a row with simulated accuracy and no speed
                quant_case.simulated_row(case, spec, module, info, size, data, dev, ev, why)
            module, qcols = quant_case.quantized(case, spec, module, info, size, backend, data, dev, ev.transform)
        with precisions.context(case.precision, dev):
            fwd, compile_s = backend.build(module, batches[0].to(dev), dev)
            step = lambda xb: fwd(feed(xb))  # noqa: E731
            scored, first_s = _untimed_first(fwd, data, dev, ev.n_classes)
            batch_s = warm_up(step, batches, spec.warmup_batches, dev) or first_s
            n_steps = int(rank.agree_max(steps_needed(spec.min_timed_batches, spec.min_time_s, batch_s)))
            with case_monitor(spec, case, dev, rank.pids()) as mon:
                windows, clocks = rank.timed_window(
                    lambda: time_windows(step, batches, n_steps, dev, spec.settings.repeats)
                )
        hits = scored.hits
        lat_ms, wall_s = [x for w in windows for x in w[0]], sum(w[1] for w in windows)
        samples = len(lat_ms) * bs
        throughput = samples / wall_s
        rec = {
            "weights": info.weights,
            "pretrained": info.pretrained,
            "image_size": size,
            "channels_last": cl,
            "data_description": raw.description,
            "compile_s": compile_s,
            "pass_batches": len(batches),
            "batches_timed": len(lat_ms),
            "samples_timed": samples,
            "timed_wall_s": wall_s,
            "device_time_s": sum(lat_ms) / 1e3,
            "throughput_samples_per_s": throughput,
            "total_time_s": case.images / throughput,
            **stat_columns(summarize(lat_ms), "latency"),
            **scored.columns(n_real, ev),
        }
        if rank.distributed:
            rec.update(
                clocks,
                rank_batch_size=bs,
                rank_images=images,
                top1_correct=hits[1] if hits else None,
                top5_correct=hits[5] if hits else None,
                **rank.fields(),
            )
        rec.update(backend.columns(fwd), **quant_case.with_reference(qcols, hits, n_real))
        add_telemetry(rec, mon, dev)
        ci_cols, ci_series = window_columns(windows, bs, "latency")
        rec.update(ci_cols)
        return rec, {"latency_ms": lat_ms, **ci_series, **mon.series()}


def _untimed_first(fwd, data, dev, n_classes: int | None = None):
    """The untimed steps between the build and the warm-up: with labels the accuracy pass over every batch, else
    the first step alone (lazy initialisation, cuDNN set-up: kept out of the warm-up's time per step, which sizes
    the timed window); either checks the outputs (:func:`accelbench.data.evaluation.accuracy_pass`).

    Returns:
        ``(Scored, seconds per step)``; the time per step stands in when ``warmup_batches`` is 0.
    """
    import time

    from accelbench.core import stage
    from accelbench.core.timing import sync

    stage.enter("the untimed first pass (outputs checked)")
    batches, blabels, n_real, feed = data
    t0 = time.perf_counter()
    labelled = bool(blabels) and blabels[0] is not None
    n = len(batches) if labelled else 1
    scored = accuracy_pass(fwd, batches[:n], blabels[:n] if labelled else [None], n_real, feed, n_classes)
    sync(dev)
    return scored, (time.perf_counter() - t0) / n


def _batches(case, spec, inputs, rank, info, size: int, cl: bool):
    """The case's batches: ``(eval inputs, per-rank batch size, images, (batches, labels, n_real, feed))``;
    labels as model outputs where they can be mapped (:func:`accelbench.data.evaluation.eval_inputs`)."""
    from accelbench import precisions
    from accelbench.data.batches import make_batches
    from accelbench.data.evaluation import eval_inputs

    dev, transfer = rank.device, case.extras.include_transfer
    ev = eval_inputs(info, spec.settings, inputs, size, on_host=transfer)
    xs, ys = rank.shard(ev.x_all, ev.labels)
    bs = rank.per_rank_batch(case.batch_size)
    images = xs.shape[0] if rank.distributed else case.images
    batches, blabels, n_real = make_batches(
        xs, ys, bs, images, precisions.input_dtype(case.precision), cl, pin=transfer and dev.type == "cuda"
    )
    feed = (lambda xb: xb.to(dev, non_blocking=True)) if transfer else (lambda xb: xb)
    return ev, bs, images, (batches, blabels, n_real, feed)


def _prepared_model(case, dev, loaded):
    """The case's model (``loaded``, as built) in its precision and memory format on ``dev``:
    ``(module, info, channels_last)``."""
    import torch

    from accelbench import precisions

    cl = precisions.channels_last_for(case.channels_last, case.precision, loaded.module, dev)
    module = precisions.prepare(case.precision, loaded.module, dev)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    return module, loaded.info, cl


register(Inference())
