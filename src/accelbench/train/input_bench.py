"""The input-pipeline benchmark: ``run_input_pipeline(spec, store)`` (run kind ``input-pipeline``).

Rows (workload ``input-pipeline``): one per DataLoader worker count (``source`` ``loader``: decode +
resize + crop/flip + collate, pinned memory on CUDA machines), one for the device-resident set
(``source`` ``resident``: crop/flip + normalisation on the device, no decode: the pure compute
figure's input path), and two storage rows (``source`` ``storage``, ``cache_state`` cold / warm).
Compare ``loader_samples_per_s`` with a training step's ``throughput_samples_per_s`` (``accelbench
train``): a loader slower than the step makes training input-bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from accelbench.errors import ConfigError
from accelbench.measure import ERROR, OK, one_line, resolve_device
from accelbench.train.pipeline import EVICT_METHODS

KIND = "input-pipeline"


@dataclass(frozen=True, kw_only=True, slots=True)
class PipelineSpec:
    """Attributes:
        data: bundled set name or ImageFolder path; images: how many to load (None: all).
        workers: DataLoader worker counts to measure; batch_size; image_size (None: as stored, 32 for CIFAR).
        pin_memory: pin batches (CUDA machines only); augment: crop/flip on (else decode + collate only).
        min_batches: batches timed after the first, per row.
        storage: run the cold/warm read test; evict: how reads are made cold, ``fadvise`` (the files read) or
            ``drop_caches`` (the host's whole page cache; ``drop-caches`` too); ``auto``, deprecated, is kept
            as written and means ``fadvise`` (:data:`accelbench.train.pipeline.EVICT_METHODS`).
        resident: also measure the device-resident path; device: where it lives.
    """

    data: str = "cifar10-train-5k"
    images: int | None = None
    workers: tuple[int, ...] = (0, 2)
    batch_size: int = 256
    image_size: int | None = None
    pin_memory: bool = True
    augment: bool = True
    min_batches: int = 10
    storage: bool = True
    evict: str = "fadvise"
    resident: bool = True
    device: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.workers or any(isinstance(w, bool) or not isinstance(w, int) or w < 0 for w in self.workers):
            raise ConfigError("workers", self.workers, "integers >= 0, e.g. 0,2,4,8")
        for name, low in (("batch_size", 1), ("min_batches", 1)):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(name, v, f"an integer >= {low}")
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 8):
            raise ConfigError("image_size", self.image_size, "an integer >= 8")
        if self.evict not in EVICT_METHODS:
            raise ConfigError("evict", self.evict, "fadvise, drop-caches (auto: deprecated, = fadvise)")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def spec_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _row(spec: PipelineSpec, key: str, source: str, fn: Callable[[], dict]) -> dict:
    rec = {"case_key": key, "workload": KIND, "source": source, "data": spec.data, "batch_size": spec.batch_size,
           "image_size": spec.image_size, "augment": spec.augment, "started_at": time.time()}
    try:
        rec.update(fn(), status=OK, error=None)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failure is a row
        rec.update(status=ERROR, error=one_line(exc))
    return rec


def _plan_rows(spec: PipelineSpec, device) -> list[tuple[str, str, Callable[[], Any]]]:
    from accelbench.train import pipeline
    from accelbench.train.datasets import load_encoded, resident_from_encoded

    enc: dict = {}

    def encoded():
        if "e" not in enc:
            enc["e"] = load_encoded(spec.data, spec.images)
        return enc["e"]

    jobs = [(f"loader|workers={w}", "loader", lambda w=w: pipeline.loader_throughput(
        encoded(), spec.image_size, spec.batch_size, w, spec.pin_memory, spec.augment, spec.min_batches, spec.seed))
        for w in spec.workers]
    if spec.resident:
        jobs.append(("resident", "resident", lambda: {**pipeline.resident_throughput(
            resident_from_encoded(encoded(), spec.image_size, device).images, spec.batch_size, spec.min_batches,
            spec.seed), "device": str(device)}))
    return jobs


def _storage_rows(spec: PipelineSpec) -> list[tuple[dict, dict | None]]:
    from accelbench.train import pipeline

    base = {"workload": KIND, "source": "storage", "data": spec.data}
    try:
        rows = pipeline.storage_read(pipeline.dataset_files(spec.data), method=spec.evict)
    except Exception as exc:  # a failure is a row
        return [({**base, "case_key": "storage", "status": ERROR, "error": one_line(exc)}, None)]
    out = []
    for r in rows:
        samples = r.pop("read_mb_per_s_samples")
        out.append(({**base, "case_key": f"storage|{r['cache_state']}", "status": OK, "error": None, **r},
                    {"read_mb_per_s": samples}))
    return out


def run_input_pipeline(spec: PipelineSpec, store, on_row: Callable[[dict], None] | None = None) -> tuple[int, list[dict]]:
    """Measure every row of ``spec``, storing each as it finishes. Returns ``(run_id, records)``.

    Raises:
        ConfigError: the device is not available, or synthetic data. DataError: the data cannot be read (before
            the run is created). Measurement errors become rows.
    """
    from accelbench import env as envmod

    from accelbench.data import check_data

    device = resolve_device(spec.device)
    if spec.data == "synthetic":
        raise ConfigError("data", spec.data, "an image source to decode (cifar10-train-5k, cifar10-test, a path)")
    check_data(spec.data)
    run_id = store.begin_run(KIND, spec.to_dict(), spec.spec_hash(), envmod.collect(device))
    out: list[dict] = []

    def keep(rec: dict, series: dict | None = None) -> None:
        rec["case_id"] = store.add_case(run_id, rec, series)
        out.append(rec)
        if on_row:
            on_row(rec)

    for key, source, fn in _plan_rows(spec, device):
        keep(_row(spec, key, source, fn))
    if spec.storage:
        for rec, series in _storage_rows(spec):
            keep(rec, series)
    store.finish_run(run_id, "complete")
    return run_id, out
