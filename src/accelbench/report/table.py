"""Rich tables of stored results, in the reference study's layout.

Two widths: the *compact* tables (``compact=True``, the default of ``run`` and ``train``) hold the figures
a reader compares first and fit an 80-column terminal; a failed row shows only its status there and its
reason is listed under the table (:func:`case_notes`). The full tables (``--wide``, ``results``) hold every
column. Cells are plain :class:`rich.text.Text`, never parsed as markup: a model name or an exception
message with ``[brackets]`` prints as it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from accelbench.core.errors import ERROR, OK, OOM, SKIPPED, UNSUPPORTED
from accelbench.core.rundata import DETAIL_ROW_TYPES, is_detail  # noqa: F401  (re-exported for the reports)
from accelbench.core.validity import VALID
from accelbench.report.notes import case_label, case_notes  # noqa: F401  (re-exported for the reports)
from accelbench.report.units import number, rate, usd  # noqa: F401  (rate re-exported for the reports)
from accelbench.report.views import is_text, view, with_display


def _int(v: Any) -> str:
    return str(int(v))


_STATUS_STYLE = {OK: "green", OOM: "red", ERROR: "red", UNSUPPORTED: "yellow", SKIPPED: "dim"}
_TEXT_KEYS = (
    "model",
    "precision",
    "mode",
    "status",
    "validity",
    "source",
    "step",
    "schedule",
    "op",
    "link",
    "loadgen_scenario",
    "result_validity",
    "figure_of_merit_text",
)


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def cell_value(r: dict, key: str) -> Any:
    """The value of column ``key`` in row ``r`` (None when missing)."""
    return r.get(key)


def format_cell(fmt, v: Any) -> str:
    """A formatted cell, ``-`` for a missing value."""
    return fmt(v) if _present(v) else "-"


def _status_cell(r: dict, compact: bool) -> Text:
    v = r.get("status")
    text = str(v)
    if v == OK and compact and isinstance(r.get("validity"), str) and r["validity"] != VALID:
        text = "ok, flagged"
    elif v == UNSUPPORTED and compact and r.get("simulated"):
        text = "simulated"  # unsupported for speed; its accuracy was measured in simulation (not NaN)
    elif v != OK and not compact and r.get("error"):
        text += f": {r['error']}"
    style = "yellow" if text == "ok, flagged" else _STATUS_STYLE.get(v, "")
    return Text(text, style=style)


def results_table(
    records: Iterable[dict], title: str | None = None, columns=None, compact: bool = False, caption: str | None = None
):
    """A rich Table of case records; columns with no value in any row are left out.

    Args:
        columns: ``(header, key, formatter)`` triples (default: the ``inference`` table of
            :mod:`accelbench.report.views`, or ``inference-compact``).
        compact: failed rows show only their status (reasons go under the table, :func:`case_notes`), the
            table has no vertical rules, and several models get one table each under their name instead
            of a Model column: the compact column sets then fit 80 columns.
        caption: a line under the table saying what its figures are (:func:`accelbench.report.views.caption`).
    Returns:
        A :class:`rich.table.Table`, or a :class:`rich.console.Group` of per-model tables (compact, several models).
    """
    rows = with_display(records)
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    if compact and len(models) > 1:
        from rich.console import Group

        parts = [] if title is None else [Text(title)]
        for m in models:
            parts += [
                Text(m, style="bold"),
                results_table(
                    [r for r in rows if str(r.get("model")) == m], columns=columns, compact=True, caption=caption
                ),
            ]
        return Group(*parts)
    default = view("inference-compact") if compact else view("inference")
    cols = [c for c in (columns or default) if c[1] == "status" or any(_present(cell_value(r, c[1])) for r in rows)]
    if len(models) <= 1:
        cols = [c for c in cols if c[1] != "model"]
    # Compact: one space between columns (the box's blank rule), no outer edge.
    table = Table(
        title=title,
        caption=caption,
        caption_justify="left",
        show_lines=False,
        box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
        padding=(0, 0) if compact else (0, 1),
        show_edge=not compact,
    )
    for header, key, _ in cols:
        text = is_text(key)
        # Wide tables never squeeze a column below its header; compact ones are sized to fit 80 columns.
        table.add_column(
            header,
            justify="left" if text else "right",
            no_wrap=not (text and key in ("model", "status")),
            overflow="fold",
            min_width=None if compact else len(header),
        )
    for r in rows:
        cells = []
        for _, key, fmt in cols:
            v = cell_value(r, key)
            if key == "status":
                cells.append(_status_cell(r, compact))
            elif key == "validity" and _present(v) and v != VALID:
                cells.append(Text(str(v), style="yellow"))
            else:
                cells.append(Text(format_cell(fmt, v)))
        table.add_row(*cells)
    return table


def oom_boundary(
    records: list[dict], group: tuple[str, ...] = ("model", "precision", "mode")
) -> dict[tuple, dict[str, int | None]]:
    """Per ``group`` (default model, precision, mode; a generate run adds prompt and new tokens): the largest batch
    size that ran and the smallest that ran out of memory."""
    out: dict[tuple, dict[str, int | None]] = {}
    for r in records:
        if is_detail(r):
            continue
        g = out.setdefault(tuple(r.get(k) for k in group), {"largest_ok": None, "smallest_oom": None})
        bs = r.get("batch_size")
        if not _present(bs):
            continue
        if r["status"] == OK and (g["largest_ok"] is None or bs > g["largest_ok"]):
            g["largest_ok"] = int(bs)
        if r["status"] == OOM and (g["smallest_oom"] is None or bs < g["smallest_oom"]):
            g["smallest_oom"] = int(bs)
    return out


def scenario_table(m, records: Iterable[dict], compact: bool = False, title: str | None = None):
    """The case rows (detail rows left out) of a run of the scenario ``m`` (its
    :class:`~accelbench.core.columns.MetricMap`) in its table (``compact``: its 80-column table, captioned with the
    statistic its figures are)."""
    from accelbench.report.views import caption

    name = f"{m.name}-compact" if compact else m.name
    rows = [r for r in records if not is_detail(r)]
    return results_table(rows, title=title, columns=view(name), compact=compact, caption=caption(name))


def natural_width(table, console) -> int:
    """The width ``table`` takes with no column squeezed (a wide table is printed at this width, even
    beyond the terminal's: cut cells would hide figures)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def runs_table(runs: list[dict]) -> Table:
    import datetime as dt

    # words wrap at spaces and a word too long for its column ends in an ellipsis, never broken mid-word; one space
    # between columns and no rules, so nine columns fit 80 terminal columns
    t = Table(title="Runs (created: UTC)", box=box.SIMPLE_HEAD, padding=(0, 0), show_edge=False)
    for h in ("Run", "Name", "Created", "Kind", "Model", "Device", "Status", "Cases", "Tags"):
        t.add_column(h, overflow="ellipsis", no_wrap=h in ("Run", "Cases"))
    for r in runs:
        when = dt.datetime.fromtimestamp(r["created_at"], dt.timezone.utc).strftime("%Y-%m-%d\n%H:%M")
        tags = " ".join(f"{k}={v}" for k, v in (r.get("tags") or {}).items())
        t.add_row(
            str(r["run_id"]),
            r.get("name") or "-",
            when,
            r["kind"],
            r.get("models") or "-",
            r.get("device") or "-",
            r["status"],
            str(r["cases"]),
            tags or "-",
        )
    return t


def cheapest_lines(records: Iterable[dict]) -> list[str]:
    """One line per model with accuracy: the cheapest precision that meets the accuracy target (MLPerf: >= 99 % of
    the fp32 top-1), :func:`accelbench.quant.accuracy.cheapest_meeting_target`."""
    from accelbench.quant.accuracy import TARGET_RATIO, cheapest_meeting_target

    out = []
    for c in cheapest_meeting_target(list(records)):
        head = (
            f"{c['model']}: cheapest precision meeting the target (top-1 at least {100 * TARGET_RATIO:.0f} % of fp32 "
            f"{100 * c['top1_fp32_ref']:.2f} %): "
        )
        missed = f"; below target: {', '.join(c['missed'])}" if c["missed"] else ""
        if c["precision"] is None:
            out.append(head + "none measured (simulated and failed cases have no speed)" + missed)
            continue
        what = (
            f"{usd(c['value'])}/1k img"
            if c["by"] == "cost_per_1000_samples_usd"
            else f"{rate(c['value'])} img/s (no price: by throughput)"
        )
        out.append(
            head + f"{c['precision']} ({c['mode']}, batch {_int(c['batch_size'])}), {what}, top-1 "
            f"{100 * c['top1']:.2f} % ({c['top1_delta_pts']:+.2f} pts){missed}"
        )
    return out
