"""The table of a loadgen run: one row per case, read like an MLPerf Inference results row (scenario,
figure of merit, VALID/INVALID) with the latency percentiles, energy and cost MLPerf's rows lack.
Server search probes (detail rows) are left out; ``accelbench export`` has them."""

from __future__ import annotations

from collections.abc import Iterable

from accelbench.core import kinds
from accelbench.core.columns import for_kind
from accelbench.report.table import scenario_table
from accelbench.report.views import figure_text  # noqa: F401  (figure_text re-exported)


def loadgen_table(records: Iterable[dict], compact: bool = False, title: str | None = None):
    """The case rows of a loadgen run (probes left out) as a rich table; compact fits 80 columns
    (:func:`accelbench.report.runs.scenario_table` of the loadgen map)."""
    return scenario_table(for_kind(kinds.LOADGEN), records, compact, title)
