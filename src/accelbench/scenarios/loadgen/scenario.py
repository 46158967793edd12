"""The loadgen scenario (``accelbench loadgen``): MLPerf Inference's SingleStream, MultiStream, Server and
Offline scenarios, driven by LoadGen in this process, with telemetry, energy and cost on every row.

Per case (model x precision x mode x LoadGen scenario x batch size; SingleStream runs batch 1, MultiStream
its 8 samples a query, Offline and Server each ``--max-batch``):
1. the model in its precision and backend, built for the batch sizes the SUT will run
   (:func:`accelbench.scenarios.loadgen.sut.batch_sizes_built`), and the forward timed alone at each size;
2. the real images pre-processed and resident on the device (the QSL);
3. one LoadGen test in PerformanceOnly mode under the telemetry monitor; for Server without a target QPS,
   a bisection for the highest VALID QPS (:mod:`accelbench.scenarios.loadgen.search`), each probe a detail row;
4. with ``--accuracy``, an AccuracyOnly test: top-1/top-5 from LoadGen's accuracy log;
5. LoadGen's summary and detail logs kept beside the store (``loadgen_log_dir`` on the row).

A result LoadGen calls INVALID is data (``result_validity``, ``invalid_reasons``), not a failure.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.options import aliases as declared_aliases
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.evaluation import EVALUATION
from accelbench.core.options.loadgen import LOADGEN, SCENARIOS
from accelbench.core.spec import Case, Extras, Settings
from accelbench.data.evaluation import check_eval_settings, normalize_eval
from accelbench.scenarios.base import Scenario, register
from accelbench.scenarios.loadgen.settings import MULTISTREAM_SAMPLES, check_server

GPU_DEFAULTS: dict[str, Any] = {
    "models": ("resnet50",),
    "precisions": ("amp-bf16",),
    "modes": ("eager",),
    "batch_sizes": (256,),
    "images": 1024,
    "warmup_batches": 5,
    **device_defaults(LOADGEN, cuda=True),
}
# cifar-resnet20 with its bundled weights: every scenario VALID (and an accuracy) in about a minute on 2 cores
CPU_DEFAULTS: dict[str, Any] = {
    "models": ("cifar-resnet20",),
    "precisions": ("fp32",),
    "modes": ("eager",),
    "batch_sizes": (32,),
    "images": 256,
    "warmup_batches": 2,
    **device_defaults(LOADGEN, cuda=False),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadgenSettings(Settings):
    """The settings of :data:`accelbench.core.options.loadgen.LOADGEN` and the evaluation settings (defaults and
    checks from their declarations).

    Attributes:
    scenarios: LoadGen scenarios, a subset of SingleStream, MultiStream, Server, Offline.
    min_duration_s, min_query_count: each test's minimums (MLPerf's own under ``mlperf_rules``; no
        ``min_query_count`` takes the scenario's, :data:`accelbench.scenarios.loadgen.settings.MIN_QUERIES`).
    server_target_qps: Server's arrival rate (queries/s); None searches for the highest VALID one.
    server_latency_ms: Server's p99 latency bound (MLPerf ResNet-50: 15 ms).
    server_search_steps: probes of the Server search.
    batch_timeout_us: Server batching: the longest a batch waits for more queries after its first.
    mlperf_rules: LoadGen's built-in MLPerf settings (600 s, official query counts, early stopping).
    accuracy: also run LoadGen's AccuracyOnly mode (top-1/top-5 on the same samples).
    log_dir: LoadGen's logs go under this folder (default: ``<store>-loadgen`` beside the store).
    label_space, labels, mean, std, resize, crop_pct: as ``accelbench run``'s
        (:data:`accelbench.core.options.evaluation.EVALUATION`): the QSL's preprocessing and accuracy labels.
    """

    volatile = ("log_dir",)
    scenarios: tuple[str, ...] = LOADGEN["scenarios"].field()
    min_duration_s: float = LOADGEN["min_duration_s"].field()
    min_query_count: int | None = LOADGEN["min_query_count"].field()
    server_target_qps: float | None = LOADGEN["server_target_qps"].field()
    server_latency_ms: float = LOADGEN["server_latency_ms"].field()
    server_search_steps: int = LOADGEN["server_search_steps"].field()
    batch_timeout_us: int = LOADGEN["batch_timeout_us"].field()
    mlperf_rules: bool = LOADGEN["mlperf_rules"].field()
    accuracy: bool = LOADGEN["accuracy"].field()
    log_dir: str | None = LOADGEN["log_dir"].field()
    label_space: str | None = EVALUATION["label_space"].field()
    labels: str | None = EVALUATION["labels"].field()
    mean: tuple[float, ...] | None = EVALUATION["mean"].field()
    std: tuple[float, ...] | None = EVALUATION["std"].field()
    resize: int | None = EVALUATION["resize"].field()
    crop_pct: float | None = EVALUATION["crop_pct"].field()

    def __post_init__(self) -> None:
        check_declared(self)
        check_eval_settings(self)
        check_server(
            self.server_target_qps, self.server_latency_ms, self.min_duration_s, self.min_query_count, self.mlperf_rules
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadgenExtras(Extras):
    loadgen_scenario: str = "Offline"

    def key_suffix(self) -> str:
        return f"|{self.loadgen_scenario}"


def scenario_names(value) -> tuple[str, ...]:
    """``"singlestream,server"`` -> ``("SingleStream", "Server")`` (case-insensitive, LoadGen's spelling)."""
    items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else list(value)
    by_lower = {s.lower(): s for s in SCENARIOS}
    return tuple(by_lower.get(str(v).lower(), str(v)) for v in items)


class Loadgen(Scenario):
    name, kind, workload = "loadgen", kinds.LOADGEN, kinds.LOADGEN
    command = "accelbench loadgen"
    requires = {"mlcommons-loadgen": "accelbench loadgen"}
    settings_type, extras_type = LoadgenSettings, LoadgenExtras
    aliases = {"max_batch": "batch_sizes", **declared_aliases(LOADGEN)}
    rejects = ("min_timed_batches", "min_time_s")
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS
    # cost and energy per sample over the test's window; latency spread is no validity check here (a Server's
    # latency varies by design: its percentiles are the result)
    derived_keys = {
        "samples_key": "samples_timed",
        "work_seconds_key": "timed_wall_s",
        "work_samples_key": "samples_timed",
        "spread_key": "none",
    }

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        if "scenarios" in merged:
            merged["scenarios"] = scenario_names(merged["scenarios"])
        return normalize_eval(merged)

    def check(self, spec) -> None:
        from accelbench.scenarios.loadgen.lib import loadgen

        loadgen()  # a missing extra is one line before anything runs
        super().check(spec)

    def cases(self, spec, device: str) -> list[Case]:
        out = []
        for m, p, mode, sc in itertools.product(spec.models, spec.precisions, spec.modes, spec.settings.scenarios):
            sizes = {"SingleStream": (1,), "MultiStream": (MULTISTREAM_SAMPLES,)}.get(sc, spec.batch_sizes)
            out += [
                Case(
                    scenario=self.name,
                    model=m,
                    batch_size=b,
                    precision=p,
                    mode=mode,
                    device=device,
                    channels_last=spec.channels_last,
                    images=spec.images,
                    data=spec.data,
                    image_size=spec.image_size,
                    extras=LoadgenExtras(loadgen_scenario=sc),
                )
                for b in sizes
            ]
        return out

    def oom_group(self, case) -> tuple:
        return (case.model, case.precision, case.mode, case.channels_last, case.extras.loadgen_scenario)

    def prepare(self, spec, device, store):
        inputs = super().prepare(spec, device, store)
        root = spec.settings.log_dir or str(Path(store.path).with_suffix("")) + "-loadgen"
        return inputs, Path(root)

    def measure(self, case, spec, state, rank, sink):
        from accelbench.scenarios.loadgen.run import measure_case

        inputs, root = state
        folder = root / f"run{sink.run_id}" / re.sub(r"[^A-Za-z0-9._-]+", "_", case.key)
        return measure_case(case, spec, inputs, rank, sink, folder)


register(Loadgen())
