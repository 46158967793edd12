"""Latency distributions in the report: per case a small histogram of its stored per-batch latencies (the series its
scenario's metric map names: a batch's latency, a training step's step time, a generate case's inter-token latencies), all cases of a run in one grid.

A histogram rather than a CDF: the report asks "is there a second mode or a tail?" (a slow first batch, a GC pause,
a throttled stretch), which a histogram shows as a separate bar and a CDF as a barely visible kink; and its bins are
those of ``accelbench results --hist`` (:func:`accelbench.report.histogram.bins`, numpy's ``"auto"`` estimator), so
the terminal and the report draw the same distribution. p50 (solid) and p99 (dashed) are marked (numpy's
linear-interpolation percentiles, as ``results --hist`` prints them).
"""

from __future__ import annotations

from accelbench.core.columns import of_row
from accelbench.core.errors import OK
from accelbench.core.rundata import is_detail
from accelbench.report.histogram import bins
from accelbench.report.plots import pyplot

NCOLS = 6
MAX_PANELS = 64  # a larger run's grid would be taller than a page of panels a reader compares


def _fields(r: dict, several_models: bool) -> list[str]:
    """A case's identity as short texts: model (when the run has several), batch size, precision, mode, and prompt +
    new tokens for a generate case."""
    parts = ([str(r.get("model"))] if several_models else []) + [
        f"bs={r.get('batch_size')}",
        str(r.get("precision")),
        str(r.get("mode")),
    ]
    if r.get("prompt_len") is not None:
        parts.append(f"p={r['prompt_len']}+{r.get('new_tokens')}")
    return parts


def case_latencies(store, records: list[dict]) -> tuple[list[tuple[str, list[float]]], str]:
    """``(label, latencies in ms)`` of each ``ok`` case with a stored per-batch series, in row order, and what every
    one of them shares. A label names only what differs between the run's cases (of batch size, precision, mode,
    prompt + new tokens, and the model when the run has several): the fields all cases share are returned once,
    for the grid's title (a panel is ~1.7 inches wide: "bs=16 bf16 static-compile-fused p=128+32" overran it)."""
    rows = [r for r in records if r.get("status") == OK and not is_detail(r) and r.get("case_id") is not None]
    several = len({r.get("model") for r in rows}) > 1
    found = []
    for r in rows:
        m = of_row(r)  # the series is the one the row's scenario stores (its metric map)
        values = store.series(r["case_id"], m.latency_series) if m is not None and m.latency_series else []
        if values:
            found.append((_fields(r, several), list(values)))
    if not found:
        return [], ""
    n = len(found[0][0])
    same = [i for i in range(n) if all(f[i] == found[0][0][i] for f, _ in found)] if len(found) > 1 else []
    labels = [(" ".join(f[i] for i in range(n) if i not in same) or " ".join(f), v) for f, v in found]
    return labels, " ".join(found[0][0][i] for i in same)


def histogram_figure(cases: list[tuple[str, list[float]]], title: str):
    """One small histogram per case (:func:`accelbench.report.histogram.bins`, drawn as a filled step: the axes'
    first patch), p50 and p99 marked; ``NCOLS`` panels a row. An open matplotlib figure.

    Raises:
        ValueError: no case.
    """
    import numpy as np

    if not cases:
        raise ValueError("no latencies to draw")
    plt = pyplot()
    ncols = min(NCOLS, len(cases))
    nrows = -(-len(cases) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(max(1.7 * ncols, 4.8), 0.5 + 1.15 * nrows), constrained_layout=True, squeeze=False
    )
    for ax, (label, values) in zip(axes.flat, cases):
        edges, counts = bins(values)
        ax.stairs(counts, edges, fill=True, color="#1f77b4", alpha=0.75)
        for q, style in ((50, "-"), (99, "--")):
            ax.axvline(float(np.percentile(values, q)), color="k", lw=0.8, ls=style)
        ax.set_title(label, fontsize=7)
        ax.tick_params(labelsize=6)
        ax.set_yticks([])
    for ax in list(axes.flat)[len(cases) :]:
        ax.set_axis_off()
    fig.suptitle(title, fontsize=9)
    fig.supxlabel("ms", fontsize=7)
    return fig


def latency_items(store, records: list[dict], context: str = "") -> list[dict]:
    """The report's chart item (``title``, ``svg``, ``natural``: drawn at the figure's own size) of a run's latency histograms, or none without a stored
    series. A run with more than :data:`MAX_PANELS` cases shows its first ones (the title says how many)."""
    from accelbench.report.charts import svg

    cases, shared = case_latencies(store, records)
    if not cases:
        return []
    maps = {m.name: m for m in map(of_row, records) if m is not None and m.latency_series}
    what = " / ".join(dict.fromkeys(m.series_label for m in maps.values())) or "Latency per batch"
    shown = cases[:MAX_PANELS]
    more = f" (first {len(shown)} of {len(cases)} cases)" if len(cases) > len(shown) else ""
    every = f"; every case {shared}" if shared else ""
    title = f"{what}, p50 solid, p99 dashed{more}{every}" + (f"\n{context}" if context else "")
    return [{"title": what, "svg": svg(histogram_figure(shown, title)), "natural": True}]
