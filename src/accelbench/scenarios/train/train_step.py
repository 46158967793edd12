"""The training-step scenario (``accelbench train``): step throughput, one process or DDP.

Per case: a model with random weights, the images resized and normalised on the device (each rank keeps
every ``world``-th one under torchrun), cut into batches, and :func:`accelbench.training.step.build_step`'s
step: forward, cross-entropy, backward and the optimizer step in the precision (autocast, GradScaler for
amp-fp16, weights cast for bf16), compiled by the backend when it is ``compile``; under torchrun the
module is wrapped in ``DistributedDataParallel`` (gradients all-reduced by DDP's bucketed hooks,
overlapped with the backward pass: PyTorch DDP notes). The first step (compilation) is timed as
``compile_s``, then ``warmup_batches`` untimed steps, then whole passes are timed. With DDP, eager
cases also time the same step under ``no_sync()``: the difference is the communication the backward pass
did not hide (``comm_exposed_share``). ``loader_workers`` also times a DataLoader and flags cases it
cannot feed (``input_bound``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.config import check_int, check_number
from accelbench.core.errors import ConfigError
from accelbench.core.options.evaluation import EVALUATION
from accelbench.core.spec import Extras, Windowed
from accelbench.scenarios.base import Scenario, register
from accelbench.training.step import SWEEP_OPTIMIZER

GPU_DEFAULTS: dict[str, Any] = {
    "models": ("resnet50",),
    "batch_sizes": (64, 128, 256, 512),
    "precisions": ("fp32", "tf32", "amp-bf16"),
    "modes": ("eager", "compile"),
    "images": 1024,
    "warmup_batches": 10,
    "min_timed_batches": 30,
    "min_time_s": 1.0,
    "data": "cifar10-train-5k",
}
CPU_DEFAULTS: dict[str, Any] = {
    # cifar-resnet20 at 32x32: a few seconds on 2 cores. ResNet-50 training on a CPU takes seconds a step.
    "models": ("cifar-resnet20",),
    "batch_sizes": (8, 32),
    "precisions": ("fp32",),
    "modes": ("eager",),
    "images": 64,
    "warmup_batches": 1,
    "min_timed_batches": 3,
    "min_time_s": 0.0,
    "data": "cifar10-train-5k",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSettings(Windowed):
    """Attributes:
    optimizer, lr, momentum, weight_decay: the step's optimizer (see ``StepConfig``).
    loader_workers: when set (and the data is real), also measure the DataLoader (decode, augmentation,
        collate with this many workers) and flag cases it cannot feed (input-bound).
    repeats: timed windows per case (:class:`accelbench.core.spec.Windowed`).
    fused_optimizer: the optimizer's fused kernels (``StepConfig.fused``): True fused, False ``foreach``,
        None (default: no suffix on the case key) fused on CUDA where torch has it.
    label_space, labels: how the data's classes map to the model's outputs (as ``accelbench run``'s); None:
        each class folded into the model's outputs by its sorted position. mean, std: input normalisation (all four
        declared once: :data:`accelbench.core.options.evaluation.EVALUATION`).
    """

    optimizer: str = SWEEP_OPTIMIZER["optimizer"]
    lr: float = SWEEP_OPTIMIZER["lr"]
    momentum: float = SWEEP_OPTIMIZER["momentum"]
    weight_decay: float = SWEEP_OPTIMIZER["weight_decay"]
    loader_workers: int | None = None
    fused_optimizer: bool | None = None
    label_space: str | None = EVALUATION["label_space"].field()
    labels: str | None = EVALUATION["labels"].field()
    mean: tuple[float, ...] | None = EVALUATION["mean"].field()
    std: tuple[float, ...] | None = EVALUATION["std"].field()

    def __post_init__(self) -> None:
        from accelbench.data.evaluation import check_eval_settings
        from accelbench.training.step import OPTIMIZERS

        Windowed.__post_init__(self)
        check_eval_settings(self)
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError("optimizer", self.optimizer, ", ".join(OPTIMIZERS))
        for name in ("lr", "momentum", "weight_decay"):
            check_number(name, getattr(self, name))
        if self.loader_workers is not None:
            check_int("loader_workers", self.loader_workers, 0)
        if self.fused_optimizer is not None and not isinstance(self.fused_optimizer, bool):
            raise ConfigError("fused_optimizer", self.fused_optimizer, "true or false")


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainExtras(Extras):
    optimizer: str = "sgd"
    fused: bool | None = None

    def key_suffix(self) -> str:
        # the default (None: fused where torch has it) adds nothing
        return f"|{self.optimizer}" + {True: "|fused", False: "|foreach"}.get(self.fused, "")


def labels_for(raw, n_out: int | None, n: int, seed: int):
    """Real labels (folded into the model's classes) or, for synthetic data, seeded random labels ``(n,)``."""
    import torch

    classes = n_out or 10
    if raw.labels is not None:
        return raw.labels % classes
    return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))


class TrainStep(Scenario):
    name, kind, dist_kind = "train_step", kinds.TRAINING, kinds.TRAIN_DDP
    workload, dist_workload = kinds.TRAINING, kinds.TRAIN_DDP
    command = "accelbench train"
    cudnn_benchmark_default = True  # training's usual setting: autotuned convolutions (absorbed by warm-up)
    settings_type, extras_type = TrainSettings, TrainExtras
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS
    training = True
    # cost is quoted for the timed steps; validity reads the step-time spread
    derived_keys = {
        "work_seconds_key": "timed_wall_s",
        "work_samples_key": "samples_timed",
        "spread_key": "step_time_spread",
    }

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        from accelbench.data.evaluation import normalize_eval

        return normalize_eval(merged)

    def extras(self, spec) -> TrainExtras:
        return TrainExtras(optimizer=spec.settings.optimizer, fused=spec.settings.fused_optimizer)

    def prepare(self, spec, device, store):
        return super().prepare(spec, device, store), {}  # the images; DataLoader rates by (size, batch)

    def measure(self, case, spec, state, rank, sink):
        import torch

        from accelbench.core.ci import window_columns
        from accelbench.core.rank import add_telemetry
        from accelbench.scenarios.train.timed import time_steps

        inputs, loader_cache = state
        dev, st = rank.device, spec.settings
        torch.manual_seed(spec.seed)
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
        step, pairs, rec = _build(case, spec, inputs, rank)
        fn = lambda b: step(b[0], b[1])  # noqa: E731  (time_windows feeds one item at a time)
        first_loss = fn(pairs[0])[0].item()  # the first step: compiles in compile mode, builds DDP's buckets
        timed = time_steps(fn, pairs, step, spec, case, rank)
        lat_ms, windows, clocks, mon = timed.lat_ms, timed.windows, timed.clocks, timed.monitor
        rec.update(
            timed.columns(step, first_loss, rec["rank_batch_size"]),
            optimizer_fused=bool(step.optimizer.defaults.get("fused")),
            lr=st.lr,
            momentum=st.momentum,
            weight_decay=st.weight_decay,
        )
        if rank.distributed:
            nosync = rank.nosync_step_ms(fn, pairs, len(lat_ms), case.mode)
            rec.update(clocks, step_time_nosync_mean_ms=nosync, **rank.fields())
        else:
            del rec["rank_batch_size"], rec["rank_images"]
        add_telemetry(rec, mon, dev)
        if not rank.distributed:
            rec.update(loader_check(spec, case, rec["image_size"], rec["throughput_samples_per_s"], loader_cache))
        ci_cols, ci_series = window_columns(
            windows, rec["rank_batch_size"] if rank.distributed else case.batch_size, "step_time"
        )
        rec.update(ci_cols)
        return rec, {"step_time_ms": lat_ms, **ci_series, **mon.series()}


def _build(case, spec, inputs, rank):
    """The model (random weights), this rank's labelled batches on the device, and the training step:
    ``(step, [(x, y), ...], the record's first columns)``."""
    from accelbench import precisions
    from accelbench.data.batches import make_batches
    from accelbench.data.evaluation import mapped_labels
    from accelbench.models import create_model
    from accelbench.scenarios.train.datasets import num_outputs
    from accelbench.training.step import StepConfig, build_step

    dev, st = rank.device, spec.settings
    loaded = create_model(case.model, pretrained=False)
    info, n_out = loaded.info, num_outputs(loaded.module)
    size = case.image_size or info.image_size
    cl = precisions.channels_last_for(case.channels_last, case.precision, loaded.module, dev)
    info, mapped = mapped_labels(info, st, inputs.raw_images())
    x_all, raw = inputs.get(size, info.mean, info.std), inputs.raw_images()
    xs, ys = rank.shard(x_all, mapped if mapped is not None else labels_for(raw, n_out, x_all.shape[0], spec.seed))
    bs = rank.per_rank_batch(case.batch_size)
    images = xs.shape[0] if rank.distributed else case.images
    batches, blabels, _ = make_batches(xs, ys, bs, images, precisions.input_dtype(case.precision), cl)
    pairs = [(xb, yb.to(dev)) for xb, yb in zip(batches, blabels)]
    cfg = StepConfig(
        precision=case.precision,
        mode=case.mode,
        optimizer=st.optimizer,
        lr=st.lr,
        momentum=st.momentum,
        weight_decay=st.weight_decay,
        channels_last=cl,
        fused=st.fused_optimizer,
    )
    rec = {
        "weights": "random",
        "image_size": size,
        "channels_last": cl,
        "data_description": raw.description,
        "num_classes": n_out,
        "rank_batch_size": bs,
        "rank_images": images,
        "label_space": info.label_space,
        "labels_mapped": mapped is not None,
        "fused_optimizer": st.fused_optimizer,
    }
    return build_step(loaded.module, cfg, dev, wrap=rank.wrap), pairs, rec


def loader_check(spec, case, size: int, step_rate: float, cache: dict) -> dict[str, Any]:
    """With ``loader_workers`` set: the DataLoader rate for this batch size and image size, and
    ``input_bound`` = the loader delivers fewer samples/s than the step consumes."""
    from accelbench.core.errors import one_line

    workers = spec.settings.loader_workers
    if workers is None or spec.data == "synthetic":
        return {}
    from accelbench.scenarios.train.datasets import load_encoded
    from accelbench.scenarios.train.pipeline import loader_throughput

    key = (size, case.batch_size)
    if key not in cache:
        try:
            if "encoded" not in cache:
                cache["encoded"] = load_encoded(spec.data, spec.images, skip_bad=spec.skip_bad_images)
            cache[key] = loader_throughput(cache["encoded"], size, case.batch_size, workers, pin=True, seed=spec.seed)
        except Exception as exc:  # the step was measured: keep it, record why the loader was not
            cache[key] = {"loader_error": one_line(exc)}
    out = dict(cache[key])
    if "loader_samples_per_s" in out:
        out["input_bound"] = out["loader_samples_per_s"] < step_rate
    return out


register(TrainStep())
