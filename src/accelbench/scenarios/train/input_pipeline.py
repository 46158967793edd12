"""The input-pipeline scenario (``accelbench input-pipeline``): the data path alone, without a model.

Cases: one per DataLoader worker count (``source`` ``loader``: decode, resize, crop/flip, collate, pinned
memory on CUDA machines; each image resized on its own, as ``run`` and ``train`` do, to ``--image-size``, or
when the data's images differ in size to :data:`accelbench.scenarios.train.pipeline.MIXED_SIZES_SIDE`), the device-resident set (``resident``: crop/flip and normalisation on the device,
no decode), and the storage read test (``storage|cold``, then ``storage|warm``: the dataset files read with
their pages evicted, then cached). Compare ``loader_samples_per_s`` with a training step's
``throughput_samples_per_s`` (``accelbench train``): a loader slower than the step makes training
input-bound. Reads are made cold with ``posix_fadvise(DONTNEED)`` on the files read; dropping the host's
whole page cache (``/proc/sys/vm/drop_caches``, root only) hurts every other job and needs ``evict =
drop_caches`` explicitly.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.config import check_bool, check_int
from accelbench.core.errors import ConfigError
from accelbench.core.spec import Case, Extras, Settings
from accelbench.scenarios.base import Scenario, register


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineSettings(Settings):
    """Attributes:
    workers: DataLoader worker counts to measure.
    pin_memory: pin batches (CUDA machines only); augment: crop/flip on (else decode + collate only).
    min_batches: batches timed after the first, per row.
    storage: run the cold/warm read test; evict: how reads are made cold, ``fadvise`` (the files read) or
        ``drop_caches`` (the host's whole page cache; ``drop-caches`` too); ``auto``, deprecated, means
        ``fadvise`` (:data:`accelbench.scenarios.train.pipeline.EVICT_METHODS`).
    resident: also measure the device-resident path.
    """

    workers: tuple[int, ...] = (0, 2)
    pin_memory: bool = True
    augment: bool = True
    min_batches: int = 10
    storage: bool = True
    evict: str = "fadvise"
    resident: bool = True

    def __post_init__(self) -> None:
        from accelbench.scenarios.train.pipeline import EVICT_METHODS

        if (
            not isinstance(self.workers, tuple)
            or not self.workers
            or any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in self.workers)
        ):
            raise ConfigError("workers", self.workers, "integers >= 0, e.g. 0,2,4,8")
        if len(set(self.workers)) != len(self.workers):
            raise ConfigError("workers", self.workers, "distinct worker counts")
        check_int("min_batches", self.min_batches, 1)
        for name in ("pin_memory", "augment", "storage", "resident"):
            check_bool(name, getattr(self, name))
        if self.evict not in EVICT_METHODS:
            raise ConfigError("evict", self.evict, ", ".join(EVICT_METHODS))


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineExtras(Extras):
    source: str = "loader"
    workers: int | None = None


class InputPipeline(Scenario):
    name, kind, workload = "input_pipeline", kinds.INPUT_PIPELINE, kinds.INPUT_PIPELINE
    settings_type, extras_type = PipelineSettings, PipelineExtras
    uses_models = False
    aliases = {"batch_size": "batch_sizes"}
    cpu_defaults = gpu_defaults = {"data": "cifar10-train-5k", "batch_sizes": (256,), "models": ()}
    derived_keys = {"samples_key": None, "work_seconds_key": None, "work_samples_key": None, "spread_key": None}

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        if isinstance(merged.get("workers"), (int, str)):
            from accelbench.core.config import parse_list

            merged["workers"] = parse_list("batch_sizes", merged["workers"])
        elif isinstance(merged.get("workers"), list):
            merged["workers"] = tuple(merged["workers"])
        return merged

    def validate(self, spec) -> None:
        if spec.data == "synthetic":
            raise ConfigError("data", spec.data, "an image source to decode (cifar10-train-5k, cifar10-test, a path)")
        if len(spec.batch_sizes) != 1:
            raise ConfigError("batch_size", spec.batch_sizes, "one batch size")

    def cases(self, spec, device: str) -> list[Case]:
        s = spec.settings
        base = dict(
            scenario=self.name,
            batch_size=spec.batch_sizes[0],
            data=spec.data,
            image_size=spec.image_size,
            images=spec.images,
            device=device,
        )
        out = [
            Case(**base, name=f"loader|workers={w}", extras=PipelineExtras(source="loader", workers=w))
            for w in s.workers
        ]
        if s.resident:
            out.append(Case(**base, name="resident", extras=PipelineExtras(source="resident")))
        if s.storage:
            out += [
                Case(**base, name=f"storage|{state}", extras=PipelineExtras(source="storage"))
                for state in ("cold", "warm")
            ]
        return out

    def check(self, spec) -> None:
        from accelbench.data import check_data

        check_data(spec.data, spec.skip_bad_images)

    def unsupported_reason(self, case, device) -> str | None:
        return None

    def prepare(self, spec, device, store) -> dict:
        return {}  # the encoded files, read by the first case that needs them

    def base_record(self, case, device) -> dict[str, Any]:
        return {
            "case_key": case.key,
            "workload": self.workload,
            "source": case.extras.source,
            "data": case.data,
            "batch_size": case.batch_size,
            "image_size": case.image_size,
            "device": str(device),
            "started_at": time.time(),
        }

    def oom_group(self, case) -> None:
        return None

    def measure(self, case, spec, cache, rank, sink):
        from accelbench.scenarios.train import pipeline
        from accelbench.scenarios.train.datasets import load_encoded, resident_from_encoded

        s = spec.settings
        if case.extras.source == "storage":
            files = pipeline.dataset_files(spec.data)
            rec = (
                pipeline.storage_cold(files, method=pipeline.evict_method(s.evict))
                if case.key.endswith("cold")
                else pipeline.storage_warm(files)
            )
            return rec, {"read_mb_per_s": rec.pop("read_mb_per_s_samples")}
        if "encoded" not in cache:
            cache["encoded"] = load_encoded(spec.data, spec.images, skip_bad=spec.skip_bad_images)
            cache["side"] = pipeline.loader_side(cache["encoded"], spec.image_size)
        (size, transform), bs = cache["side"], case.batch_size
        rec = {"augment": s.augment, "image_size": size, "transform": transform}
        if case.extras.source == "resident":
            images = resident_from_encoded(cache["encoded"], size, rank.device).images
            return {**rec, **pipeline.resident_throughput(images, bs, s.min_batches, spec.seed)}, {}
        return {
            **rec,
            **pipeline.loader_throughput(
                cache["encoded"], size, bs, case.extras.workers, s.pin_memory, s.augment, s.min_batches, spec.seed
            ),
        }, {}


register(InputPipeline())
