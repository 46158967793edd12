"""The table of a loadgen run: one row per case, read like an MLPerf Inference results row (scenario,
figure of merit, VALID/INVALID) with the latency percentiles, energy and cost MLPerf's rows lack.
Server search probes (detail rows) are left out; ``accelbench export`` has them."""

from __future__ import annotations

from typing import Any, Iterable

from accelbench.report.table import _int, is_detail, rate, results_table
from accelbench.report.units import ms, number, usd

_UNITS = {"SingleStream": "p90", "MultiStream": "p99", "Server": "QPS", "Offline": "samples/s"}


def figure_text(r: dict[str, Any]) -> str | None:
    """MLPerf's figure of merit with its unit: ``920 µs p90``, ``26,100 QPS``, ``27,300 samples/s`` (a latency
    figure is stored in ms)."""
    v, sc = r.get("figure_of_merit"), r.get("loadgen_scenario")
    if not isinstance(v, (int, float)) or v != v or sc not in _UNITS:
        return None
    return f"{ms(v)} {_UNITS[sc]}" if sc in ("SingleStream", "MultiStream") else f"{rate(v)} {_UNITS[sc]}"


_MS = number
COMPACT_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Scenario", "loadgen_scenario", str),
    ("Batch", "batch_size", _int),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("Result", "figure_of_merit_text", str),
    ("p99 ms", "latency_p99_ms", _MS),
    ("", "result_validity", str),
    ("mJ/smp", "energy_per_sample_j", lambda v: number(1e3 * v)),
    ("Status", "status", str),
]
COLUMNS: list[tuple[str, str, Any]] = COMPACT_COLUMNS[:6] + [
    ("LoadGen", "result_validity", str),
    ("Samples/s", "throughput_samples_per_s", rate),
    ("QPS", "throughput_qps", rate),
    ("Target QPS", "server_target_qps", rate),
    ("p50 ms", "latency_p50_ms", _MS),
    ("p90 ms", "latency_p90_ms", _MS),
    ("p99 ms", "latency_p99_ms", _MS),
    ("p99.9 ms", "latency_p999_ms", _MS),
    ("Early-stop ms", "early_stopping_latency_ms", _MS),
    ("Batch mean", "batch_size_mean", lambda v: f"{v:.1f}"),
    ("SUT host (us/batch)", "sut_host_us_per_batch", lambda v: f"{v:.0f}"),
    ("SUT host share", "sut_host_share", lambda v: f"{100 * v:.1f}%"),
    ("Top-1", "top1", lambda v: f"{100 * v:.2f}%"),
    ("Power avg (W)", "power_mean_w", lambda v: f"{v:.0f}"),
    ("J/query", "energy_per_query_j", number),
    ("$/1k samples", "cost_per_1000_samples_usd", usd),
    ("Validity", "validity", str),
    ("Status", "status", str),
]


def with_figure(records: Iterable[dict]) -> list[dict]:
    """The records, each with ``figure_of_merit_text`` (:func:`figure_text`) for the Result column."""
    return [{**r, "figure_of_merit_text": figure_text(r)} for r in records]


def loadgen_table(records: Iterable[dict], compact: bool = False, title: str | None = None):
    """The case rows of a loadgen run (probes left out) as a rich table; compact fits 80 columns."""
    rows = with_figure(r for r in records if not is_detail(r))
    return results_table(rows, title=title, columns=COMPACT_COLUMNS if compact else COLUMNS, compact=compact)
