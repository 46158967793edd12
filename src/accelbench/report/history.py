"""The history view of the report (``accelbench report --history``): one chart per case and metric of its figure
in every run, in time order, with 95 % whiskers, the steps ``compare`` calls significant marked, and one table of
every point (run, commit, value, interval, verdict against the previous run). The figures are
:func:`accelbench.core.history.history`'s; this module only draws and formats them."""

from __future__ import annotations

import datetime as dt
from typing import Any

from accelbench.report.charts import svg
from accelbench.report.plots import pyplot
from accelbench.report.units import ms, number, rate

# a step's colour: compare's verdict words (throughput: faster/slower; latency: the same words)
STEP_COLORS = {"faster": "#2ca02c", "slower": "#d62728"}
LINE = "#1f77b4"


def _value(metric: str, v: float | None) -> str:
    return ms(v) if metric == "latency_p50" else rate(v)


def _commit(c: str | None) -> str:
    return c[:8] if isinstance(c, str) and c else "-"


def _tick(p) -> str:
    return f"{p.label}\n{_commit(p.commit)}"


def history_chart(series) -> str:
    """One :class:`accelbench.core.history.Series` as inline SVG: x the runs' start times (UTC), labelled with the
    run's name or id and its commit; y the figure with its 95 % whiskers; a step that ``compare`` calls faster or
    slower drawn in that colour and labelled with its ratio."""
    plt = pyplot()
    pts = series.points
    xs = [dt.datetime.fromtimestamp(p.created_at, dt.timezone.utc) for p in pts]
    ys = [p.value for p in pts]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(xs, ys, "o-", ms=4, lw=1.2, color=LINE)
    bars = [(x, p) for x, p in zip(xs, pts) if p.ci_low is not None and p.ci_high is not None]
    if bars:
        ax.errorbar(
            [x for x, _ in bars],
            [p.value for _, p in bars],
            yerr=[[max(p.value - p.ci_low, 0) for _, p in bars], [max(p.ci_high - p.value, 0) for _, p in bars]],
            fmt="none",
            ecolor=LINE,
            capsize=3,
            lw=0.9,
        )
    for i in range(1, len(pts)):
        color = STEP_COLORS.get(pts[i].verdict or "")
        if color is None:
            continue
        ax.plot(xs[i - 1 : i + 1], ys[i - 1 : i + 1], "-", lw=2.6, color=color)
        ax.annotate(
            f"{pts[i].verdict} x{number(pts[i].ratio)}",
            (xs[i], ys[i]),
            textcoords="offset points",
            xytext=(0, 8),
            ha="center",
            fontsize=7,
            color=color,
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([_tick(p) for p in pts], fontsize=7)
    ax.set(ylabel=series.title, title=f"{series.label}: {series.title}")
    ax.title.set_fontsize(10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return svg(fig)


def history_rows(series_list) -> tuple[list[str], list[list[str]]]:
    """``(headers, rows)`` of the history table: a row per point (case, metric, run, start, commit, value, 95 %
    interval, the verdict of the step from the previous run with its ratio)."""
    heads = ["Case", "Metric", "Run", "Started (UTC)", "Commit", "Value", "95% CI", "vs previous"]
    rows = []
    for s in series_list:
        for p in s.points:
            when = dt.datetime.fromtimestamp(p.created_at, dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
            ci = f"{_value(s.metric, p.ci_low)} .. {_value(s.metric, p.ci_high)}" if p.ci_low is not None else "-"
            step = f"{p.verdict} (x{number(p.ratio)})" if p.verdict and p.ratio is not None else (p.verdict or "-")
            rows.append([s.label, s.title, p.label, when, _commit(p.commit), _value(s.metric, p.value), ci, step])
    return heads, rows


def history_section(series_list, *, margin: float, cases: list[str] = ()) -> dict[str, Any]:
    """The report section of :func:`accelbench.core.history.history`'s series: charts, the table, and a note of
    the significant steps (the document's section format: ``id``, ``title``, ``provenance``, ``spec``,
    ``blocks``)."""
    heads, rows = history_rows(series_list)
    steps = [
        f"{s.label} ({s.title}): {p.label} is {p.verdict} than the run before (x{number(p.ratio)})"
        for s in series_list
        for p in s.points
        if p.verdict in STEP_COLORS
    ]
    which = f" of cases {' | '.join(cases)}" if cases else ""
    blocks = [
        {
            "type": "charts",
            "title": "History (95% whiskers; coloured steps: compare's verdict)",
            "items": [{"title": f"{s.label}: {s.title}", "svg": history_chart(s)} for s in series_list],
        },
        {
            "type": "table",
            "title": f"Every run (margin {100 * margin:g}%)",
            "headers": heads,
            "rows": rows,
            "notes": [],
        },
        {"type": "notes", "title": "Significant steps", "lines": steps},
    ]
    return {
        "id": "history",
        "title": f"History{which}: {len(series_list)} series",
        "provenance": [],
        "spec": None,
        "blocks": blocks
        if series_list
        else [{"type": "notes", "title": "History", "lines": ["no case matched (see --case)"]}],
    }
