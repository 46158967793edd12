"""Charts of a comparison: per group of matched cases that differ only in batch size, run A and run B on the same
axes against batch size (one colour per run, each run's own 95 % interval as whiskers where it stored one), and the
ratio B/A of each metric with compare's 95 % interval as a band, the equivalence margin shaded and a line at 1.

Every figure is read from the :class:`accelbench.core.compare.Comparison` (the stored figures A and B, the ratio and
its interval); only the whiskers come from the runs' rows (``sides``: their rows by case id)."""

from __future__ import annotations

import textwrap

from accelbench.core.columns import MetricMap, named
from accelbench.core.compare import MATCH_FIELDS, case_label, map_of
from accelbench.report.charts import log_batch_axis, set_log_y_if_decades, svg
from accelbench.report.compare_table import case_map
from accelbench.report.plots import pyplot

A_COLOR, B_COLOR = "#1f77b4", "#d62728"
RATIO_COLORS = ("#2ca02c", "#9467bd", "#ff7f0e")


def panels(m: MetricMap) -> tuple[tuple[str, str, str, float], ...]:
    """``(metric name, unit, title, scale)`` of the three overlays of a scenario's cases: its throughput (in its
    unit), its latency p50, then its first extra metric (a generate case's TTFT p50) or else the energy per sample."""
    third = (
        (m.extra[0], "ms", m.label(m.extra[0]), 1.0)
        if m.extra
        else ("energy_per_sample", "mJ", f"Energy per {m.sample}", 1e3)
    )
    return (
        ("throughput", m.throughput_unit, m.throughput_label, 1.0),
        ("latency_p50", "ms", m.label("latency_p50"), 1.0),
        third,
    )


def groups(comparison) -> dict[str, list]:
    """The matched cases by their match key less the batch size (label: :func:`accelbench.core.compare.case_label`
    of that key), each group sorted by batch size; cases without a batch size are left out."""
    out: dict[str, list] = {}
    for c in comparison.cases:
        if c.key.get("batch_size") is None:
            continue
        key = tuple((f, c.key.get(f)) for f in MATCH_FIELDS if f != "batch_size")
        out.setdefault(case_label(key), []).append(c)
    return {k: sorted(v, key=lambda c: c.key["batch_size"]) for k, v in out.items()}


def _ci_columns(metric: str, rec: dict) -> tuple[str, str] | None:
    """The row's own 95 % interval columns of a compared metric, as its scenario names them, or None (energy, TTFT,
    a generate row's throughput: no per-run interval stored)."""
    m = map_of(rec)
    if metric == "throughput":
        return m.throughput_ci
    if metric == "latency_p50" and m.latency is not None:
        return f"{m.latency}_p50_ci95_low_ms", f"{m.latency}_p50_ci95_high_ms"
    return None


def _whiskers(ax, xs, ys, recs, metric: str, scale: float, color: str) -> None:
    bars = []
    for x, y, rec in zip(xs, ys, recs):
        cols = _ci_columns(metric, rec) if rec else None
        lo, hi = (rec.get(cols[0]), rec.get(cols[1])) if cols else (None, None)
        if y is not None and lo is not None and hi is not None:
            bars.append((x, y, max(y - lo * scale, 0), max(hi * scale - y, 0)))
    if bars:
        ax.errorbar(
            [b[0] for b in bars],
            [b[1] for b in bars],
            yerr=[[b[2] for b in bars], [b[3] for b in bars]],
            fmt="none",
            ecolor=color,
            capsize=2.5,
            lw=0.9,
        )


def _overlay(ax, comparison, cases, panel, sides) -> None:
    metric, unit, title, scale = panel
    xs = [c.key["batch_size"] for c in cases]
    shown = []
    for side, name, color in (("a", comparison.a, A_COLOR), ("b", comparison.b, B_COLOR)):
        ys = [
            getattr(c.metrics[metric], side) * scale
            if metric in c.metrics and getattr(c.metrics[metric], side) is not None
            else None
            for c in cases
        ]
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None]
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            "o-",
            ms=3.5,
            lw=1.3,
            color=color,
            label=f"{'A' if side == 'a' else 'B'}: {name}",
        )
        rows = (sides or ({}, {}))[0 if side == "a" else 1]
        _whiskers(ax, xs, ys, [rows.get(getattr(c, f"{side}_case_id")) for c in cases], metric, scale, color)
        shown += [p[1] for p in pts]
    set_log_y_if_decades(ax, shown)
    ax.set(ylabel=unit, title=title)
    if not shown:  # no energy counter (a CPU), no price: say so rather than draw empty axes
        ax.text(
            0.5,
            0.5,
            "not measured on either run",
            transform=ax.transAxes,
            ha="center",
            va="center",
            fontsize=8,
            color="0.4",
        )
        ax.set_yticks([])


def _ratios(ax, comparison, cases, panels) -> None:
    xs = [c.key["batch_size"] for c in cases]
    m = comparison.margin
    ax.axhspan(1 - m, 1 + m, color="0.85", alpha=0.6, lw=0, label=f"margin {100 * m:g}%")
    ax.axhline(1.0, color="k", lw=0.8)
    for (metric, _, title, _), color in zip(panels, RATIO_COLORS):
        res = [c.metrics.get(metric) for c in cases]
        pts = [(x, r) for x, r in zip(xs, res) if r is not None and r.ratio is not None]
        if not pts:
            continue
        ax.plot([x for x, _ in pts], [r.ratio for _, r in pts], "o-", ms=3, lw=1.2, color=color, label=title)
        band = [(x, r.ci_low, r.ci_high) for x, r in pts if r.ci_low is not None and r.ci_high is not None]
        if band:
            ax.fill_between(
                [b[0] for b in band], [b[1] for b in band], [b[2] for b in band], color=color, alpha=0.2, lw=0
            )
    ax.set(ylabel="B / A", title="Ratio B/A, 95% interval")


def figure(comparison, label: str, cases: list, sides=None, context: str = ""):
    """One group's figure: three overlays (A and B against batch size) and the ratios B/A (a 2 x 2 grid); an open
    matplotlib figure. ``sides``: ``(rows of A, rows of B)`` by case id, for each run's own whiskers."""
    found = {case_map(c).name for c in cases}
    shown = panels(named(found.pop()) if len(found) == 1 else named("inference"))
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(6.5, 4.6), constrained_layout=True)  # two side by side on a screen
    sizes = sorted({int(c.key["batch_size"]) for c in cases})
    for ax, panel in zip(axes.flat[:3], shown):
        _overlay(ax, comparison, cases, panel, sides)
    _ratios(axes.flat[3], comparison, cases, shown)
    for ax in axes.flat:
        log_batch_axis(ax, sizes)
        ax.title.set_fontsize(9)
        ax.grid(alpha=0.3)
        ax.set_xlabel("batch size", fontsize=8)
    axes.flat[0].legend(fontsize=7, loc="best")
    axes.flat[3].legend(fontsize=7, loc="best")
    lines = [label, f"B {comparison.b} against A {comparison.a}", context]
    fig.suptitle("\n".join(textwrap.fill(x, 80) for x in lines if x), fontsize=9)  # long store paths wrap
    return fig


def comparison_charts(comparison, sides=None, context: str = "") -> list[dict]:
    """The report's chart items (``title``, ``svg``, ``natural``: drawn at the figure's own size) of a comparison: one figure per group of matched cases
    with two batch sizes or more (a group of one batch size is a table row, not a chart)."""
    return [
        {"title": label, "svg": svg(figure(comparison, label, cases, sides, context)), "natural": True}
        for label, cases in groups(comparison).items()
        if len({c.key["batch_size"] for c in cases}) >= 2
    ]
