"""The blocks a report section is made of (see :mod:`accelbench.report.sections`): a table, charts side by side.

Every string is data: the writers escape it."""

from __future__ import annotations

from accelbench.report.table import _present, cell_value, format_cell
from accelbench.report.views import with_display


def table_block(records: list[dict], columns, title: str | None = None, notes: list[str] = ()) -> dict | None:
    """A table of ``records`` in ``columns`` (``(header, key, formatter)``: :func:`accelbench.report.views.view`, as the
    terminal tables); columns without a value in any row are left out. None when there is no row."""
    if not records:
        return None
    records = with_display(records)
    cols = [c for c in columns if c[1] == "status" or any(_present(cell_value(r, c[1])) for r in records)]
    rows = [[format_cell(fmt, cell_value(r, key)) for _, key, fmt in cols] for r in records]
    return {"type": "table", "title": title, "headers": [c[0] for c in cols], "rows": rows, "notes": list(notes)}


def charts_block(items: list[dict]) -> dict | None:
    """Charts shown side by side (None without any)."""
    return {"type": "charts", "title": "Charts", "items": items} if items else None
