"""Training specs: ``TrainSpec`` (step-throughput sweep) and ``ConvergeSpec`` (training to accuracy).

Pure code, no torch import; validation raises :class:`ConfigError` naming the field and what is allowed.
Defaults depend on whether the work runs on a GPU (the full study) or on a CPU (seconds on 2 cores).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from accelbench.errors import ConfigError
from accelbench.spec import CHANNELS_LAST, _DEVICE_RE, is_number, parse_list
from accelbench.train.step import OPTIMIZERS, TRAIN_MODES, TRAIN_PRECISIONS

SCHEDULES = ("cosine", "step")
PLACEMENTS = ("loader", "resident")

TRAIN_GPU_DEFAULTS: dict[str, Any] = {
    "models": ("resnet50",), "batch_sizes": (64, 128, 256, 512), "precisions": ("fp32", "tf32", "amp-bf16"),
    "modes": ("eager", "compile"), "images": 1024, "warmup_batches": 10, "min_timed_batches": 30,
    "min_time_s": 1.0,
}
TRAIN_CPU_DEFAULTS: dict[str, Any] = {
    # cifar-resnet20 at 32x32: a few seconds on 2 cores. ResNet-50 training on a CPU takes seconds a step.
    "models": ("cifar-resnet20",), "batch_sizes": (8, 32), "precisions": ("fp32",), "modes": ("eager",),
    "images": 64, "warmup_batches": 1, "min_timed_batches": 3, "min_time_s": 0.0,
}


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(dataclasses.asdict(obj), sort_keys=True, default=str).encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainSpec:
    """A step-throughput sweep: models x batch_sizes x precisions x modes.

    Attributes:
        models, batch_sizes, precisions (subset of ``TRAIN_PRECISIONS``), modes (``eager``, ``compile``),
        channels_last (``auto``/``on``/``off``), device: as in :class:`accelbench.spec.SweepSpec`.
        data: ``cifar10-train-5k`` (bundled real), ``synthetic``, or an ImageFolder dir / .tar(.gz).
        images: distinct images the batches cycle through (decoded, resized, on the device).
        image_size: input side in pixels; None takes the model's native size.
        optimizer, lr, momentum, weight_decay: the optimizer of the step (see ``StepConfig``).
        warmup_batches: steps after the first (compiling) one, untimed.
        min_timed_batches, min_time_s: timed passes over the batches repeat until both are reached.
        loader_workers: when set (and the data is real), also measure the DataLoader (decode +
            augmentation + collate with this many workers) and flag cases it cannot feed (input-bound).
        seed: seed for weights, synthetic data and labels.
        skip_bad_images: drop image files that do not decode (counted) instead of stopping with an error.
    """

    models: tuple[str, ...] = TRAIN_CPU_DEFAULTS["models"]
    batch_sizes: tuple[int, ...] = TRAIN_CPU_DEFAULTS["batch_sizes"]
    precisions: tuple[str, ...] = TRAIN_CPU_DEFAULTS["precisions"]
    modes: tuple[str, ...] = TRAIN_CPU_DEFAULTS["modes"]
    channels_last: str = "auto"
    data: str = "cifar10-train-5k"
    images: int = TRAIN_CPU_DEFAULTS["images"]
    image_size: int | None = None
    device: str = "auto"
    optimizer: str = "sgd"
    lr: float = 0.01
    momentum: float = 0.9
    weight_decay: float = 5e-4
    warmup_batches: int = TRAIN_CPU_DEFAULTS["warmup_batches"]
    min_timed_batches: int = TRAIN_CPU_DEFAULTS["min_timed_batches"]
    min_time_s: float = TRAIN_CPU_DEFAULTS["min_time_s"]
    loader_workers: int | None = None
    seed: int = 0
    skip_bad_images: bool = False

    def __post_init__(self) -> None:
        _validate_common(self)
        _positive_ints("batch_sizes", self.batch_sizes)
        _choices("precision", self.precisions, TRAIN_PRECISIONS)
        _choices("mode", self.modes, TRAIN_MODES)
        if not self.models or any(not isinstance(m, str) or not m for m in self.models):
            raise ConfigError("model", self.models, "one or more model names")
        _int_at_least("images", self.images, 1)
        for name in ("warmup_batches", "min_timed_batches"):
            _int_at_least(name, getattr(self, name), 0)
        for name in ("min_time_s", "lr", "momentum", "weight_decay"):
            if not is_number(getattr(self, name), low=0):
                raise ConfigError(name, getattr(self, name), "a number >= 0")
        if self.loader_workers is not None:
            _int_at_least("loader_workers", self.loader_workers, 0)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def spec_hash(self) -> str:
        """Stable 16-hex digest, used to find the run to ``--resume``."""
        return _digest(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainCase:
    """One point of a step-throughput sweep; ``key`` identifies it within a run (resume)."""

    model: str
    batch_size: int
    precision: str
    mode: str
    channels_last: str
    images: int
    data: str
    image_size: int | None
    device: str
    optimizer: str

    @property
    def key(self) -> str:
        return f"{self.model}|bs={self.batch_size}|{self.precision}|{self.mode}|cl={self.channels_last}|{self.optimizer}"


def expand(spec: TrainSpec, device: str | None = None) -> list[TrainCase]:
    """One case per (model, precision, mode, batch size), batch size innermost (contiguous OOM boundary)."""
    dev = device or spec.device
    return [
        TrainCase(model=m, batch_size=b, precision=p, mode=mode, channels_last=spec.channels_last,
                  images=spec.images, data=spec.data, image_size=spec.image_size, device=dev, optimizer=spec.optimizer)
        for m, p, mode, b in itertools.product(spec.models, spec.precisions, spec.modes, spec.batch_sizes)
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergeSpec:
    """Training from scratch to accuracy, once per batch size (the comparison is one run).

    Attributes:
        model: one model name, created with random weights; its classifier is resized to the data's classes.
        data / eval_data: training and evaluation sets (bundled names or ImageFolder paths).
        train_images / eval_images: how many to use (None: all; a class-balanced subset otherwise).
        epochs: passes over the training set.
        batch_sizes: each trains a separate model; lr = base_lr * batch_size / base_batch_size
            (linear scaling rule, Goyal et al. 2017, "Accurate, Large Minibatch SGD").
        schedule: ``cosine`` (linear warm-up over ``warmup_epochs``, then cosine to 0; Loshchilov &
            Hutter 2017) or ``step`` (warm-up, then /10 at 50 % and 75 % of the epochs, as He et al.
            2016 s. 4.2 at 32k/48k of 64k iterations).
        optimizer, momentum, weight_decay, nesterov: see ``StepConfig``.
        precision, mode, channels_last: as in the sweep (one value each).
        image_size: None = the model's native size (32 for cifar-resnet*); images are resized first.
        pad: random-crop padding in pixels at 32x32 (scaled with image_size / 32).
        placement: ``loader`` (DataLoader decodes and augments PNGs in ``workers`` processes) or
            ``resident`` (the decoded set lives on the device; augmentation runs there).
        deterministic: cuDNN deterministic algorithms, benchmark off (recorded with the results).
        target_top1: accuracy (0..1) whose first crossing gives the time to accuracy.
        checkpoint_dir: where per-epoch checkpoints go (None: next to the results store).
        skip_bad_images: drop image files that are not images (counted) instead of stopping with an error.
    """

    model: str = "cifar-resnet20"
    data: str = "cifar10-train-5k"
    eval_data: str = "cifar10-test"
    train_images: int | None = None
    eval_images: int | None = None
    epochs: int = 30
    batch_sizes: tuple[int, ...] = (128,)
    base_lr: float = 0.1
    base_batch_size: int = 128
    schedule: str = "cosine"
    warmup_epochs: float = 2.0
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    precision: str = "fp32"
    mode: str = "eager"
    channels_last: str = "auto"
    image_size: int | None = None
    pad: int = 4
    placement: str = "loader"
    workers: int = 0
    eval_batch_size: int = 1000
    deterministic: bool = False
    target_top1: float | None = None
    device: str = "auto"
    seed: int = 0
    checkpoint_dir: str | None = None
    skip_bad_images: bool = False

    def __post_init__(self) -> None:
        _validate_common(self)
        if not isinstance(self.model, str) or not self.model:
            raise ConfigError("model", self.model, "one model name")
        _positive_ints("batch_sizes", self.batch_sizes)
        _choices("precision", (self.precision,), TRAIN_PRECISIONS)
        _choices("mode", (self.mode,), TRAIN_MODES)
        _choices("schedule", (self.schedule,), SCHEDULES)
        _choices("placement", (self.placement,), PLACEMENTS)
        for name, low in (("epochs", 1), ("base_batch_size", 1), ("pad", 0), ("workers", 0), ("eval_batch_size", 1)):
            _int_at_least(name, getattr(self, name), low)
        for name in ("train_images", "eval_images"):
            if getattr(self, name) is not None:
                _int_at_least(name, getattr(self, name), 1)
        for name in ("base_lr", "warmup_epochs", "momentum", "weight_decay"):
            if not is_number(getattr(self, name), low=0):
                raise ConfigError(name, getattr(self, name), "a number >= 0")
        if self.target_top1 is not None and not (is_number(self.target_top1) and 0 < self.target_top1 <= 1):
            raise ConfigError("target_top1", self.target_top1, "a fraction in (0, 1], e.g. 0.8 (or a percentage > 1)")
        for name in ("nesterov", "deterministic"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(name, getattr(self, name), "true or false")
        if not isinstance(self.eval_data, str) or not self.eval_data:
            raise ConfigError("eval_data", self.eval_data, "cifar10-test or a path")
        if self.checkpoint_dir is not None and (not isinstance(self.checkpoint_dir, str) or not self.checkpoint_dir):
            raise ConfigError("checkpoint_dir", self.checkpoint_dir, "a folder path")

    def lr_for(self, batch_size: int) -> float:
        """Peak learning rate for ``batch_size`` by the linear scaling rule (Goyal et al. 2017)."""
        return self.base_lr * batch_size / self.base_batch_size

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def spec_hash(self) -> str:
        """Digest of everything that changes the result (the checkpoint folder does not)."""
        return _digest(dataclasses.replace(self, checkpoint_dir=None))


def _validate_common(spec: Any) -> None:
    for name in ("skip_bad_images",):
        if not isinstance(getattr(spec, name), bool):
            raise ConfigError(name, getattr(spec, name), "true or false")
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int):
        raise ConfigError("seed", spec.seed, "an integer")
    if spec.channels_last not in CHANNELS_LAST:
        raise ConfigError("channels_last", spec.channels_last, ", ".join(CHANNELS_LAST))
    if not isinstance(spec.device, str) or not _DEVICE_RE.match(spec.device):
        raise ConfigError("device", spec.device, "auto, cpu, cuda, cuda:N")
    if not isinstance(spec.data, str) or not spec.data:
        raise ConfigError("data", spec.data, "cifar10-train-5k, synthetic, or a path")
    if spec.image_size is not None and (isinstance(spec.image_size, bool) or not isinstance(spec.image_size, int) or spec.image_size < 8):
        raise ConfigError("image_size", spec.image_size, "an integer >= 8")
    _choices("optimizer", (spec.optimizer,), OPTIMIZERS)


def _choices(name: str, values: tuple, allowed: tuple[str, ...]) -> None:
    if not values:
        raise ConfigError(name, values, "a non-empty list of " + ", ".join(allowed))
    for v in values:
        if v not in allowed:
            raise ConfigError(name, v, ", ".join(allowed))


def _positive_ints(name: str, values: tuple) -> None:
    if not values or any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in values):
        raise ConfigError(name, values, "positive integers, e.g. 64,256")


def _int_at_least(name: str, v: Any, low: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ConfigError(name, v, f"an integer >= {low}")


_ALIASES = {"model": "models", "precision": "precisions", "mode": "modes", "batch_size": "batch_sizes"}


def _merge(cls, defaults: dict[str, Any], layers, aliases: dict[str, str]) -> dict[str, Any]:
    merged = dict(defaults)
    known = {f.name for f in dataclasses.fields(cls)}
    for layer in layers:
        for key, value in layer.items():
            key = key.replace("-", "_")
            key = aliases.get(key, key)
            if value is None:
                continue
            if key not in known:
                raise ConfigError("config key", key, ", ".join(sorted(known)))
            if key in ("models", "precisions", "modes", "batch_sizes"):
                value = parse_list(key, value)
            merged[key] = value
    if isinstance(merged.get("channels_last"), bool):
        merged["channels_last"] = "on" if merged["channels_last"] else "off"
    return merged


def build_train_spec(*layers: dict[str, Any], cuda: bool) -> TrainSpec:
    """Merge device defaults then each layer (later wins, None skipped) into a :class:`TrainSpec`.

    Raises:
        ConfigError: unknown field or invalid value.
    """
    return TrainSpec(**_merge(TrainSpec, TRAIN_GPU_DEFAULTS if cuda else TRAIN_CPU_DEFAULTS, layers, _ALIASES))


def build_converge_spec(*layers: dict[str, Any], cuda: bool) -> ConvergeSpec:
    """Like :func:`build_train_spec` for a :class:`ConvergeSpec`. On a GPU the defaults are
    ``amp-bf16`` and 8 DataLoader workers; ``target_top1`` above 1 is read as a percentage.

    Raises:
        ConfigError: unknown field or invalid value.
    """
    defaults: dict[str, Any] = {"precision": "amp-bf16", "workers": 8} if cuda else {}
    aliases = {"batch_size": "batch_sizes", "lr": "base_lr", "models": "model", "precisions": "precision", "modes": "mode"}
    merged = _merge(ConvergeSpec, defaults, layers, aliases)
    for key in ("model", "precision", "mode"):  # one value each (accept the sweep's plural spelling too)
        if key not in merged:
            continue
        v = merged[key]
        items = list(v) if isinstance(v, (tuple, list)) else [s.strip() for s in v.split(",")] if isinstance(v, str) else [v]
        if len(items) != 1:
            raise ConfigError(key, v, f"one {key} for a training run")
        merged[key] = items[0]
    t = merged.get("target_top1")
    if is_number(t) and t > 1:
        merged["target_top1"] = t / 100
    return ConvergeSpec(**merged)
