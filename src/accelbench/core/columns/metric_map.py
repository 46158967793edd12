"""What a scenario's numbers mean: its :class:`MetricMap`, declared once beside the scenario's columns.

A result row's meaning is read from the scenario that wrote it (the row's ``workload``), never from which of its
columns are filled. Every reader asks the map: the store's measured cases and their windows
(:mod:`accelbench.core.rundata`), ``compare`` and ``report --history`` (which column is the throughput, which the
latency, which figures compare), the tables (their columns, the compact table's statistic), the report's section,
the latency histograms and ``results --hist`` (the per-batch series).

To declare a scenario's map: in its columns module (``core/columns/<area>.py``) set ``METRIC_MAPS`` beside
``DECLARED``::

    METRIC_MAPS = (
        MetricMap(
            name="serve", workloads=(kinds.SERVE,), kinds=(kinds.SERVE,),
            throughput="output_tokens_per_s", throughput_unit="output tokens/s", sample="output token",
            latency="tpot", latency_series="itl_ms", latency_label="TPOT",
            table=("model", "request_rate", ..., "status"), compact=(...), statistic="TPOT: p50 of every request",
        ),
    )

and name the module once in :data:`accelbench.core.columns.registry.AREAS` (the line that also declares its
columns). :mod:`accelbench.core.columns.maps` gathers the maps; ``report`` lays a run out by the map's ``section``
(a section of :data:`accelbench.report.sections.SECTIONS`; ``"sweep"`` is the table, charts against batch size and the
latency histograms, and needs nothing new). Pure: no torch, no store.
"""

from __future__ import annotations

from dataclasses import dataclass

# how a case's timed windows are read from its stored series (accelbench.core.rundata.windows_of)
BATCHES = "batches"  # windows of timed batches (window_wall_s/window_samples; one window: timed_wall_s)
GENERATIONS = "generations"  # a window per timed generation, its decode steps (tpot_window_ms)


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricMap:
    """What the rows of one scenario mean.

    Attributes:
        name: the map's name (the scenario's rows: ``inference``, ``training``, ``generate``); also the name of its
            tables (``<name>`` and ``<name>-compact`` in :mod:`accelbench.report.views`).
        workloads: the row workloads (``cases.workload``, :mod:`accelbench.core.kinds`) the map reads.
        kinds: the run kinds (``runs.kind``) whose table and report section the map lays out.
        throughput: the column of the scenario's one throughput (higher is better; what ``compare`` and the table
            call throughput), or None when the scenario has none to compare.
        throughput_unit: what that column counts per second (``images/s``, ``output tokens/s``).
        throughput_label: the throughput's name in comparisons and charts (``Throughput``, ``Decode tok/s``).
        sample: what one sample is (``image``, ``output token``, ``query``): the unit of energy and cost per sample.
        per: the short word of a sample in the comparison's headers (``sample``, ``token``).
        latency: the prefix of the latency columns (``latency`` -> ``latency_p50_ms``, ``latency_p99_ms``), or None.
        latency_series: the stored per-batch series of that latency (``latency_ms``), or None.
        latency_label: the latency's name (``Latency``, ``Step time``, ``TPOT``).
        series_label: what a histogram of ``latency_series`` shows (``Latency per batch``).
        windows: how a case's windows are read (:data:`BATCHES` or :data:`GENERATIONS`).
        extra: further comparable metrics (names of :data:`accelbench.core.compare.METRICS`: ``ttft_p50``).
        tracked: the metrics ``report --history`` follows, in order.
        compared: the metrics ``compare``'s compact table shows, in order; empty: the throughput, then the first
            ``extra`` metric or else the latency p50.
        table: the wide table's columns, in order (columns declared with ``views=<name>`` join before its Validity).
        compact: the compact (80-column) table's columns; all its figures from one statistic.
        statistic: the line under the compact table: which statistic its figures are.
        section: the report section that lays out a run (:data:`accelbench.report.sections.SECTIONS`).
        group: the fields a batch-size series holds fixed (a chart's line, an out-of-memory boundary).
        throughput_ci: the row's 95 % interval columns of the throughput (low, high), or None.
    """

    name: str
    workloads: tuple[str, ...]
    kinds: tuple[str, ...] = ()
    throughput: str | None = None
    throughput_unit: str = "samples/s"
    throughput_label: str = "Throughput"
    sample: str = "sample"
    per: str = "sample"
    latency: str | None = None
    latency_series: str | None = None
    latency_label: str = "Latency"
    series_label: str = "Latency per batch"
    windows: str = BATCHES
    extra: tuple[str, ...] = ()
    tracked: tuple[str, ...] = ("throughput",)
    compared: tuple[str, ...] = ()
    table: tuple[str, ...] = ()
    compact: tuple[str, ...] = ()
    statistic: str = ""
    section: str = "sweep"
    group: tuple[str, ...] = ("model", "precision", "mode")
    throughput_ci: tuple[str, str] | None = None

    def __post_init__(self):
        if not self.workloads:
            raise ValueError(f"metric map {self.name}: no workload")
        if self.windows not in (BATCHES, GENERATIONS):
            raise ValueError(f"metric map {self.name}: windows {self.windows!r} is not {BATCHES} or {GENERATIONS}")
        if self.latency is None and self.latency_series is not None:
            raise ValueError(f"metric map {self.name}: a latency series without its latency columns")

    def column(self, metric: str) -> str | None:
        """The row's column of a compared metric (:data:`accelbench.core.compare.METRICS`): ``throughput`` is
        :attr:`throughput`, ``latency_p50``/``latency_p99`` the latency's percentiles, ``ttft_p50`` and the per-sample
        figures their own columns; None where the scenario has none."""
        if metric == "throughput":
            return self.throughput
        if metric in ("latency_p50", "latency_p99"):
            return None if self.latency is None else f"{self.latency}_{metric[8:]}_ms"
        return {
            "energy_per_sample": "energy_per_sample_j",
            "cost_per_1000": "cost_per_1000_samples_usd",
            "ttft_p50": "ttft_p50_ms",
        }.get(metric)

    def label(self, metric: str) -> str:
        """A compared metric's short name in this scenario's words (``Decode tok/s``, ``TPOT p50``, ``Energy/token``)."""
        if metric == "throughput":
            return self.throughput_label
        if metric in ("latency_p50", "latency_p99"):
            return f"{self.latency_label} {metric[8:]}"
        words = {
            "energy_per_sample": f"Energy/{self.per}",
            "cost_per_1000": f"$/1k {self.per}s",
            "ttft_p50": "TTFT p50",
        }
        return words.get(metric, metric)

    def compares(self) -> tuple[str, ...]:
        """The metrics ``compare`` judges for this scenario: throughput, latency p50 and p99, energy and cost per
        sample, then :attr:`extra`."""
        return ("throughput", "latency_p50", "latency_p99", "energy_per_sample", "cost_per_1000") + self.extra
