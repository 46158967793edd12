"""Rich tables for telemetry (the seed study's utilisation / power / energy / cost layout) and costs."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from accelbench.report.table import results_table
from accelbench.report.views import view


def telemetry_table(records: Iterable[dict], title: str | None = None) -> Table:
    """Per case: utilisation (NVML and GPM), power min/avg/max, idle power, temperature, clocks,
    energy per image (total and above idle), $ per 1,000 images and validity."""
    return results_table(records, title=title, columns=view("telemetry"))


def cost_table(records: Iterable[dict], title: str | None = None) -> Table:
    """The reference study's cost comparison: configuration, time, throughput, $/hour, total cost,
    $/1,000 images (one row per record given; see :func:`accelbench.cost.best_rows`)."""
    return results_table(records, title=title, columns=view("cost"))
