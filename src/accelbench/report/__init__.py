"""Reports: tables (rich), charts (matplotlib, only here), and which table shows which kind of run
(:mod:`accelbench.report.runs`: a scenario's run as its metric map lays it out)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def table_for(kind: str) -> Callable[..., Any]:
    """The table function of a run kind: ``fn(records, compact=False)`` -> a rich renderable
    (:func:`accelbench.report.runs.table_for`)."""
    from accelbench.report.runs import table_for as of_kind

    return of_kind(kind)
