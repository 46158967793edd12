"""Charts of the HTML report, rendered in memory: inline SVG (line charts) or base64 PNG (dense scatter
plots such as rooflines), so the report is one file that needs nothing from the network."""

from __future__ import annotations

import base64
import io
import re

from accelbench.core.errors import OK
from accelbench.report.plots import pyplot

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")


def svg(fig) -> str:
    """The figure as an ``<svg>`` element for inline HTML: no XML prolog, no DOCTYPE, no comments (matplotlib
    writes each text as a comment beside its glyphs); the figure is closed."""
    plt = pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = re.sub(r"<!--.*?-->", "", buf.getvalue(), flags=re.S)
    return text[text.index("<svg") :]


def png_base64(fig, dpi: int = 110) -> str:
    """The figure as base64 PNG (for ``<img src="data:image/png;base64,...">``); the figure is closed."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def series_by(records: list[dict], group: tuple[str, ...]) -> dict[str, list[dict]]:
    """``ok`` rows with a batch size, grouped by the ``group`` columns (label: their values joined), each
    group sorted by batch size."""
    out: dict[str, list[dict]] = {}
    for r in records:
        if r.get("status") == OK and r.get("batch_size") is not None:
            out.setdefault(" ".join(str(r.get(g)) for g in group if r.get(g) is not None), []).append(r)
    return {k: sorted(v, key=lambda r: r["batch_size"]) for k, v in out.items()}


def log_batch_axis(ax, sizes: list[int]) -> None:
    """Batch sizes on the x axis: log base 2 when they span more than 8x (batch 1 and 1024 both readable), a tick
    at each size (every other one above 8 sizes), no minor ticks."""
    if not sizes:
        return
    if sizes[-1] > 8 * sizes[0]:
        ax.set_xscale("log", base=2)
    ticks = sizes if len(sizes) <= 8 else sizes[::2]  # 1 .. 1024: every other power of two stays legible
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(b) for b in ticks], fontsize=8)
    ax.minorticks_off()


def spans_decades(values) -> bool:
    """Positive values whose largest is more than 10x the smallest: a linear axis would flatten the small ones."""
    v = [x for x in values if x is not None and x > 0]
    return bool(v) and max(v) > 10 * min(v)


def set_log_y_if_decades(ax, values) -> None:
    """A log y axis where ``values`` span more than a decade (:func:`spans_decades`)."""
    if spans_decades(values):
        ax.set_yscale("log")


def batch_chart(records: list[dict], column: str, ylabel: str, title: str, **kw) -> str | None:
    """:func:`batch_figure` as inline SVG, or None when it draws nothing."""
    fig = batch_figure(records, column, ylabel, title, **kw)
    return svg(fig) if fig is not None else None


def batch_figure(
    records: list[dict],
    column: str,
    ylabel: str,
    title: str,
    *,
    scale: float = 1.0,
    ci: tuple[str, str] | None = None,
    group=("model", "precision", "mode"),
    logy: bool | None = None,
    context: str = "",
):
    """``column`` (times ``scale``) against batch size, one line per ``group``; the ``ci`` columns (low,
    high) as error bars where stored. x: log base 2 when the batch sizes span more than 8x; ``logy``: a log y axis
    (None: where the values span more than a decade); ``context``: a second title line naming the model, device and
    run, so a chart shared alone says what it is. Returns an open figure, or None when no series has two batch sizes
    with the column (a single point is a table row, not a chart)."""
    groups = {k: [r for r in rs if r.get(column) is not None] for k, rs in series_by(records, group).items()}
    groups = {k: rs for k, rs in groups.items() if len({r["batch_size"] for r in rs}) >= 2}
    if not groups:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    values = []
    for i, (label, rs) in enumerate(groups.items()):
        xs, ys = [r["batch_size"] for r in rs], [r[column] * scale for r in rs]
        values += ys
        color = _COLORS[i % len(_COLORS)]
        ax.plot(xs, ys, "o-", ms=3.5, lw=1.3, color=color, label=label)
        if ci:
            bars = [(x, y, r.get(ci[0]), r.get(ci[1])) for x, y, r in zip(xs, ys, rs)]
            bars = [(x, y, lo * scale, hi * scale) for x, y, lo, hi in bars if lo is not None and hi is not None]
            if bars:
                ax.errorbar(
                    [b[0] for b in bars],
                    [b[1] for b in bars],
                    yerr=[[max(b[1] - b[2], 0) for b in bars], [max(b[3] - b[1], 0) for b in bars]],
                    fmt="none",
                    ecolor=color,
                    capsize=2.5,
                    lw=0.9,
                )
    log_batch_axis(ax, sorted({int(r["batch_size"]) for rs in groups.values() for r in rs}))
    if logy or (logy is None and spans_decades(values)):
        ax.set_yscale("log")
    ax.set(xlabel="batch size", ylabel=ylabel, title=title + (f"\n{context}" if context else ""))
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def epoch_chart(records: list[dict], context: str = "") -> str | None:
    """Test top-1 against epoch and against wall time, one line per batch size (a convergence run); ``context``
    (model, device, run) as the figure's title."""
    rows = [r for r in records if r.get("row_type") == "epoch" and r.get("eval_top1") is not None]
    if not rows:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True, constrained_layout=True)
    for i, b in enumerate(sorted({r["batch_size"] for r in rows})):
        pts = sorted((r for r in rows if r["batch_size"] == b), key=lambda r: r["epoch"])
        kw = {"marker": ".", "color": _COLORS[i % len(_COLORS)], "label": f"batch {int(b)}"}
        axes[0].plot([r["epoch"] for r in pts], [100 * r["eval_top1"] for r in pts], **kw)
        axes[1].plot([r["elapsed_s"] for r in pts], [100 * r["eval_top1"] for r in pts], **kw)
    axes[0].set(xlabel="epoch", ylabel="test top-1 (%)", title="Accuracy per epoch")
    axes[1].set(xlabel="wall time incl. evaluation (s)", title="Accuracy against time")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.title.set_fontsize(10)
    axes[0].legend(fontsize=7)
    if context:
        fig.suptitle(context, fontsize=9)
    return svg(fig)
