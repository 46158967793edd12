"""The report of a serve run: output tokens/s against the load (concurrency or request rate), latency against
throughput (the curve a serving system is sized by: vLLM's and MLPerf's plots of TPOT/TTFT against tokens/s), and
the TTFT and inter-token-latency distributions of each level (the histograms of ``accelbench results --hist``).

SLO-search probes are detail rows: the load charts draw them beside the levels (a search's probes are its levels),
the table leaves them out (``accelbench export`` has them).
"""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.errors import OK
from accelbench.report.plots import pyplot

# (column, label) of the latency curves drawn against throughput: the median and the tail of each phase
LATENCIES = (
    ("tpot_p50_ms", "TPOT p50"),
    ("tpot_p99_ms", "TPOT p99"),
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p99_ms", "TTFT p99"),
)


def load_of(r: dict) -> tuple[str, float] | None:
    """``(axis label, value)`` of a row's load: its concurrency or its request rate, or None."""
    if r.get("concurrency") is not None:
        return "concurrency (requests in flight)", float(r["concurrency"])
    if r.get("request_rate_per_s") is not None:
        return "request rate (requests/s)", float(r["request_rate_per_s"])
    return None


def levels(records: list[dict]) -> list[dict]:
    """The ``ok`` level rows (a run's levels and an SLO search's probes) with a load and a throughput, by load."""
    rows = [
        r
        for r in records
        if r.get("status") == OK
        and r.get("workload") in (kinds.SERVE, kinds.SERVE_PROBE)
        and load_of(r)
        and r.get("output_tokens_per_s") is not None
    ]
    seen: dict[tuple, dict] = {}
    for r in rows:  # a search's answer repeats one of its probes: one point a model and load
        seen.setdefault((r.get("model"), load_of(r)[1]), r)
    return sorted(seen.values(), key=lambda r: (str(r.get("model")), load_of(r)[1]))


def throughput_figure(rows: list[dict], context: str = ""):
    """Output tokens/s against the load, a line a model. An open matplotlib figure (None without two levels)."""
    by_model = _by_model(rows)
    if not any(len(v) > 1 for v in by_model.values()):
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.4), constrained_layout=True)
    for model, rs in by_model.items():
        ax.plot([load_of(r)[1] for r in rs], [r["output_tokens_per_s"] for r in rs], marker="o", label=model)
    ax.set_xlabel(load_of(rows[0])[0])
    ax.set_ylabel("output tokens/s")
    ax.set_title("Throughput against load" + (f"\n{context}" if context else ""), fontsize=9)
    ax.grid(alpha=0.3)
    if len(by_model) > 1:
        ax.legend(fontsize=7)
    return fig


def latency_figure(rows: list[dict], context: str = ""):
    """TPOT and TTFT (p50 and p99) against output tokens/s, one point a level, on a log latency axis when they
    span decades. An open matplotlib figure (None without two levels)."""
    from accelbench.report.charts import set_log_y_if_decades

    if len(rows) < 2:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.4), constrained_layout=True)
    drawn = []
    for column, label in LATENCIES:
        pts = sorted((r["output_tokens_per_s"], r[column]) for r in rows if r.get(column) is not None)
        if pts:
            ax.plot(*zip(*pts), marker="o", ls="--" if "p99" in column else "-", label=label)
            drawn += [y for _, y in pts]
    if not drawn:
        plt.close(fig)
        return None
    set_log_y_if_decades(ax, drawn)
    ax.set_xlabel("output tokens/s")
    ax.set_ylabel("ms")
    ax.set_title("Latency against throughput" + (f"\n{context}" if context else ""), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def distribution_items(store, rows: list[dict], context: str = "") -> list[dict]:
    """The TTFT and ITL histograms of each level (its stored ``ttft_ms`` and ``itl_ms`` series), p50 and p99
    marked (:func:`accelbench.report.distributions.histogram_figure`)."""
    from accelbench.report.charts import svg
    from accelbench.report.distributions import MAX_PANELS, histogram_figure

    items = []
    for series, what in (("ttft_ms", "Time to first token"), ("itl_ms", "Inter-token latency")):
        cases = []
        for r in rows:
            values = store.series(r["case_id"], series) if r.get("case_id") is not None else None
            if values:
                axis, load = load_of(r)
                cases.append((f"{'c' if axis.startswith('concurrency') else 'rate'}={load:g}", list(values)))
        if cases:
            title = f"{what} a level, p50 solid, p99 dashed" + (f"\n{context}" if context else "")
            items.append({"title": what, "svg": svg(histogram_figure(cases[:MAX_PANELS], title)), "natural": True})
    return items


def serve_charts(store, records: list[dict], context: str = "") -> list[dict]:
    """The report's chart items of a serve run: throughput against load, latency against throughput, the TTFT and
    ITL distributions of each level."""
    from accelbench.report.charts import svg

    rows = levels(records)
    items = []
    for title, fig in (
        ("Throughput against load", throughput_figure(rows, context)),
        ("Latency against throughput", latency_figure(rows, context)),
    ):
        if fig is not None:
            items.append({"title": title, "svg": svg(fig)})
    return items + distribution_items(store, [r for r in rows if r.get("workload") == kinds.SERVE], context)


def serve_blocks(store, run: dict, records: list[dict], context: str = "") -> list[dict | None]:
    """A serve run's report blocks: its table (the serve map's), the SLO search's probes, the charts, the flagged and
    failed levels."""
    from accelbench.core.columns import named
    from accelbench.report.blocks import charts_block, table_block
    from accelbench.report.table import is_detail
    from accelbench.report.views import view

    rows = [r for r in records if not is_detail(r)]
    probes = [r for r in records if r.get("workload") == kinds.SERVE_PROBE]
    blocks = [
        table_block(rows, view(named("serve").name), "Load levels"),
        table_block(probes, view(named("serve").name), "SLO search: every probe"),
        charts_block(serve_charts(store, records, context)),
    ]
    failed = [
        f"{r.get('case_key')}: {r.get('requests_failed')} of {r.get('requests')} requests failed ({r.get('errors_json')})"
        for r in rows
        if r.get("requests_failed")
    ]
    limited = [
        f"{r.get('case_key')}: the client limited the level (send slip or loop lag)"
        for r in rows
        if r.get("client_limited")
    ]
    if failed or limited:
        blocks.append({"type": "notes", "title": "Failed requests, client-limited levels", "lines": failed + limited})
    return blocks


def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(str(r.get("model")), []).append(r)
    return out
