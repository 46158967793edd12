"""The convergence scenario (``accelbench train --epochs N``): training from scratch to a target accuracy.

One case per batch size (the comparison is one run); each trains a fresh model with the learning rate
scaled linearly, stores one row per epoch as it ends (loss, accuracy on the evaluation set, wall and
device time, data wait, telemetry, energy, cost) and a summary row with the time to accuracy
(DAWNBench's metric, Coleman et al. 2017). The mechanics, checkpoints and resume are
:mod:`accelbench.scenarios.train.convergence`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.config import check_bool, check_int, check_number, is_number
from accelbench.core.errors import ConfigError
from accelbench.core.spec import Case, Settings
from accelbench.scenarios.base import Scenario, register

SCHEDULES = ("cosine", "step")
PLACEMENTS = ("loader", "resident")


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergeSettings(Settings):
    """Training to accuracy (the shared fields give the model, precision, mode, data, batch sizes).

    Attributes:
        epochs: passes over the training set.
        eval_data / eval_images: evaluation set (default all 10,000 CIFAR-10 test images), or a class-balanced
            subset of ``eval_images``.
        base_lr / base_batch_size: each batch size trains with lr = base_lr * batch_size / base_batch_size
            (linear scaling rule, Goyal et al. 2017, "Accurate, Large Minibatch SGD").
        schedule: ``cosine`` (linear warm-up over ``warmup_epochs``, then cosine to 0; Loshchilov & Hutter
            2017) or ``step`` (warm-up, then /10 at 50 % and 75 % of the epochs, as He et al. 2016 s. 4.2).
        optimizer, momentum, weight_decay, nesterov: see ``StepConfig``.
        pad: random-crop padding in pixels at 32x32 (scaled with image_size / 32).
        placement: ``loader`` (a DataLoader decodes and augments the files in ``workers`` processes) or
            ``resident`` (the decoded set lives on the device; augmentation runs there).
        eval_batch_size: batch size of the evaluation.
        deterministic: cuDNN deterministic algorithms, benchmark off (recorded with the results).
        target_top1: accuracy (0..1; a number above 1 is read as a percentage) whose first crossing gives the
            time to accuracy.
        checkpoint_dir: where per-epoch checkpoints go (None: ``<store>-checkpoints`` next to the store).
    """

    volatile = ("checkpoint_dir",)
    epochs: int = 30
    eval_data: str = "cifar10-test"
    eval_images: int | None = None
    base_lr: float = 0.1
    base_batch_size: int = 128
    schedule: str = "cosine"
    warmup_epochs: float = 2.0
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 5e-4
    nesterov: bool = False
    pad: int = 4
    placement: str = "loader"
    workers: int = 0
    eval_batch_size: int = 1000
    deterministic: bool = False
    target_top1: float | None = None
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        from accelbench.training.step import OPTIMIZERS

        for name, allowed in (("schedule", SCHEDULES), ("placement", PLACEMENTS), ("optimizer", OPTIMIZERS)):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), ", ".join(allowed))
        for name, low in (("epochs", 1), ("base_batch_size", 1), ("pad", 0), ("workers", 0), ("eval_batch_size", 1)):
            check_int(name, getattr(self, name), low)
        if self.eval_images is not None:
            check_int("eval_images", self.eval_images, 1)
        for name in ("base_lr", "warmup_epochs", "momentum", "weight_decay"):
            check_number(name, getattr(self, name))
        if self.target_top1 is not None and not (is_number(self.target_top1) and 0 < self.target_top1 <= 1):
            raise ConfigError("target_top1", self.target_top1, "a fraction in (0, 1], e.g. 0.8 (or a percentage > 1)")
        for name in ("nesterov", "deterministic"):
            check_bool(name, getattr(self, name))
        if not isinstance(self.eval_data, str) or not self.eval_data:
            raise ConfigError("eval_data", self.eval_data, "cifar10-test or a path")
        if self.checkpoint_dir is not None and (not isinstance(self.checkpoint_dir, str) or not self.checkpoint_dir):
            raise ConfigError("checkpoint_dir", self.checkpoint_dir, "a folder path")


def default_checkpoint_dir(db_path: str | Path) -> Path:
    """``<db folder>/<db stem>-checkpoints`` (``./accelbench-checkpoints`` for an in-memory store)."""
    p = Path(db_path)
    return Path("accelbench-checkpoints") if str(db_path) == ":memory:" else p.with_name(p.stem + "-checkpoints")


@dataclass
class _State:
    data: Any
    det: dict
    folder: Path


class Converge(Scenario):
    name, kind, workload = "converge", kinds.CONVERGENCE, kinds.CONVERGENCE
    command = "accelbench train"
    settings_type = ConvergeSettings
    training = True
    aliases = {"lr": "base_lr", "train_images": "images"}
    rejects = ("warmup_batches", "min_timed_batches", "min_time_s")
    cpu_defaults = {
        "models": ("cifar-resnet20",),
        "batch_sizes": (128,),
        "data": "cifar10-train-5k",
        "precisions": ("fp32",),
        "modes": ("eager",),
    }
    gpu_defaults = {**cpu_defaults, "precisions": ("amp-bf16",), "workers": 8}
    # the summary row: energy and cost of training the batch size to its last epoch
    derived_keys = {
        "samples_key": "train_samples_total",
        "work_seconds_key": "total_wall_s",
        "work_samples_key": "train_samples_total",
        "spread_key": None,
    }

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        from accelbench.scenarios.train.convergence import one_configuration

        one_configuration(merged)
        t = merged.get("target_top1")
        if is_number(t) and t > 1:
            merged["target_top1"] = t / 100
        return merged

    def validate(self, spec) -> None:
        """One run per batch size in one precision and mode: one that cannot train is an input error, not a run of
        ``unsupported`` rows."""
        from accelbench import backends, precisions
        from accelbench.core.config import check_choices

        super().validate(spec)
        check_choices("precision", spec.precisions, precisions.names(trainable=True))
        check_choices("mode", spec.modes, backends.names(self.backend_workload))
        if spec.settings.deterministic and spec.cudnn_benchmark:
            raise ConfigError(
                "cudnn_benchmark", True, "off with deterministic training (autotuning picks algorithms by timing them)"
            )

    def cudnn_benchmark(self, case, spec) -> bool:
        """Autotuned convolutions, training's usual setting, unless the spec turns them off or training is
        deterministic."""
        return not spec.settings.deterministic and spec.cudnn_benchmark is not False

    def cases(self, spec, device: str) -> list[Case]:
        return [
            Case(
                scenario=self.name,
                model=spec.models[0],
                batch_size=bs,
                precision=spec.precisions[0],
                mode=spec.modes[0],
                channels_last=spec.channels_last,
                images=spec.images,
                data=spec.data,
                image_size=spec.image_size,
                device=device,
                name=f"{spec.models[0]}|bs={bs}|summary",
            )
            for bs in spec.batch_sizes
        ]

    def check(self, spec) -> None:
        from accelbench.data import check_data

        super().check(spec)
        check_data(spec.settings.eval_data, spec.skip_bad_images)

    def prepare(self, spec, device, store) -> _State:
        from accelbench.models import create_model
        from accelbench.scenarios.train.convergence import determinism, prepare_data

        size = spec.image_size or create_model(spec.models[0], pretrained=False).info.image_size
        folder = (
            Path(spec.settings.checkpoint_dir) if spec.settings.checkpoint_dir else default_checkpoint_dir(store.path)
        )
        return _State(prepare_data(spec, device, size), determinism(spec.settings, spec.seed), folder)

    def base_record(self, case, device) -> dict[str, Any]:
        return {**super().base_record(case, device), "row_type": "summary"}

    def measure(self, case, spec, state: _State, rank, sink):
        from accelbench.scenarios.train.convergence import base_fields, train_batch_size

        det = {**state.det, "cudnn_benchmark": self.cudnn_benchmark(case, spec)}  # what the case runner set
        fields = train_batch_size(spec, case.batch_size, state.data, rank.device, det, sink, state.folder)
        return {**base_fields(spec, case.batch_size, det), **fields}, {}

    def oom_group(self, case) -> None:
        return None  # each batch size is its own training run: a larger one may still fit after a smaller OOMs


register(Converge())
