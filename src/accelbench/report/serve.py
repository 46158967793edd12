"""The report of a serve run: output tokens/s against the load (concurrency or request rate), latency against
throughput (the curve a serving system is sized by: vLLM's and MLPerf's plots of TPOT/TTFT against tokens/s), and
the TTFT and inter-token-latency distributions of each level (the histograms of ``accelbench results --hist``), the
served engine's output tokens/s beside the in-process ceiling's over the load, the server's own queue and KV-cache
gauges over each level (from its Prometheus ``/metrics``), and a short reading a model
(:func:`reading`): where a request's time goes, what the device could do, energy and cost at the best level, and the
SLO search's answer, every number taken from the rows.

SLO-search probes are detail rows: the load charts draw them beside the levels (a search's probes are its levels),
the table leaves them out (``accelbench export`` has them).
"""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.errors import OK
from accelbench.report.plots import pyplot
from accelbench.report.units import missing, ms, number, quantity, rate, usd

# (column, label) of the latency curves drawn against throughput: the median and the tail of each phase
LATENCIES = (
    ("tpot_p50_ms", "TPOT p50"),
    ("tpot_p99_ms", "TPOT p99"),
    ("ttft_p50_ms", "TTFT p50"),
    ("ttft_p99_ms", "TTFT p99"),
)
TIMELINE_PANELS = 8  # stacked panels of the server's gauges: more levels than this do not fit a page


# per load column (:attr:`accelbench.scenarios.serve.load.Load.column`): its axis label and its name in a sentence
LOAD_WORDS = {
    "concurrency": ("concurrency (requests in flight)", "concurrency"),
    "request_rate_per_s": ("request rate (requests/s)", "request rate"),
}


def load_of(r: dict) -> tuple[str, float] | None:
    """``(axis label, value)`` of a row's load: its concurrency or its request rate, or None."""
    from accelbench.scenarios.serve.load import Load

    load = Load.of_row(r)
    return (LOAD_WORDS[load.column][0], float(load.value)) if load is not None else None


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


def ceiling_figure(rows: list[dict], context: str = ""):
    """The served engine's output tokens/s and the in-process ceiling's (at each level's batch) against the load,
    a pair of lines a model. An open matplotlib figure (None when no level has a ceiling)."""
    by_model = {m: [r for r in rs if r.get("ceiling_output_tokens_per_s")] for m, rs in _by_model(rows).items()}
    by_model = {m: rs for m, rs in by_model.items() if rs}
    if not by_model:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 3.4), constrained_layout=True)
    for model, rs in by_model.items():
        x = [load_of(r)[1] for r in rs]
        (line,) = ax.plot(x, [r["output_tokens_per_s"] for r in rs], marker="o", label=f"{model}: served")
        ceiling = [r["ceiling_output_tokens_per_s"] for r in rs]
        ax.plot(x, ceiling, marker="s", ls="--", color=line.get_color(), label=f"{model}: in-process ceiling")
    ax.set_xlabel(load_of(rows[0])[0])
    ax.set_ylabel("output tokens/s")
    ax.set_title("Served engine against the in-process ceiling" + (f"\n{context}" if context else ""), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _pct(v: float) -> str:
    return f"{100 * v:.1f} %"


def _time_line(rs: list[dict], best: dict) -> str | None:
    """Where a request's time goes at the best level: TTFT and decode shares of the mean end-to-end latency, and
    the queueing: TTFT p50 beyond the unloaded one (the lowest concurrency's, when it is 1)."""
    ttft, e2e = best.get("ttft_mean_ms"), best.get("e2e_latency_mean_ms")
    if missing(ttft) or missing(e2e) or not e2e:
        return None
    text = (
        f"Time: at {_load_text(best)}, TTFT is {_pct(ttft / e2e)} of the mean end-to-end latency "
        f"({ms(e2e)}) and decode {_pct(1 - ttft / e2e)}"
    )
    unloaded = next((r for r in rs if r.get("concurrency") == 1 and not missing(r.get("ttft_p50_ms"))), None)
    if unloaded is not None and best is not unloaded and not missing(best.get("ttft_p50_ms")):
        queued = best["ttft_p50_ms"] - unloaded["ttft_p50_ms"]
        text += (
            f"; queueing adds {ms(max(0.0, queued))} to the TTFT p50 over the unloaded {ms(unloaded['ttft_p50_ms'])}"
        )
    return text + "."


def _device_line(best: dict) -> str | None:
    """What the device could do at the best level: the served decode's MBU and the engine's share of the ceiling."""
    parts = []
    if not missing(best.get("mbu")):
        parts.append(
            f"the served decode reads {_pct(best['mbu'])} of the measured memory bandwidth (MBU, mean decode batch "
            f"{number(best['mean_decode_batch'])})"
        )
    if not missing(best.get("engine_share_of_ceiling")):
        parts.append(
            f"the engine delivers {_pct(best['engine_share_of_ceiling'])} of the "
            f"{rate(best['ceiling_output_tokens_per_s'])} output tok/s {_ceiling_where(best)} at batch "
            f"{best['ceiling_batch']} ({best.get('ceiling_mode')}, TPOT p50 {ms(best['ceiling_tpot_p50_ms'])} "
            f"against the served {ms(best['tpot_p50_ms'])})"
        )
    elif best.get("ceiling_note"):
        parts.append(f"no in-process ceiling ({best['ceiling_note']})")
    return f"Device at {_load_text(best)}: " + "; ".join(parts) + "." if parts else None


def _ceiling_where(best: dict) -> str:
    """Where the ceiling was decoded: this device in process, or split over ``ceiling_tp_degree`` GPUs."""
    tp = best.get("ceiling_tp_degree")
    return f"{tp} GPUs decode split (tensor parallel)" if not missing(tp) else "this device decodes in process"


def _cost_line(best: dict) -> str | None:
    """Energy per output token and cost per million output tokens at the best level (a serve row's sample is an
    output token)."""
    parts = []
    if not missing(best.get("energy_per_sample_j")):
        parts.append(f"{quantity(best['energy_per_sample_j'], 'J')} per output token")
    if not missing(best.get("cost_per_1000_samples_usd")):
        parts.append(f"{usd(1000 * best['cost_per_1000_samples_usd'])} per million output tokens")
    return f"Energy and cost at {_load_text(best)}: " + ", ".join(parts) + "." if parts else None


def slo_lines(rows: list[dict]) -> list[str]:
    """Per model of a serve run's level rows, its SLO's answer (:func:`_slo_line`), model named where the run has
    several."""
    models = _by_model(rows)
    lines = [(m, _slo_line(rs)) for m, rs in models.items()]
    return [f"{m}: {line}" if len(models) > 1 else line for m, line in lines if line]


def _slo_line(rows: list[dict]) -> str | None:
    """The SLO search's answer (its row), else the highest level meeting the SLO."""
    search = next((r for r in rows if r.get("slo_search")), None)
    if search is not None:
        from accelbench.scenarios.serve.load import Load

        load = Load.of_row(search)
        unit = load.column if load is not None else "request_rate_per_s"
        what = LOAD_WORDS[unit][1]
        best, missed = search.get(f"slo_max_{unit}"), search.get(f"slo_lowest_missed_{unit}")
        if best is None:
            return f"SLO {search.get('slo')}: no {what} searched meets it."
        more = f" ({missed:g} misses it)" if missed is not None else ""
        return f"SLO {search.get('slo')}: the highest {what} meeting it is {best:g}{more}."
    met = [r for r in rows if r.get("slo_met") is not None]
    if not met:
        return None
    good = [r for r in met if r["slo_met"]]
    if not good:
        return f"SLO {met[0].get('slo')}: no level meets it."
    return f"SLO {met[0].get('slo')}: met up to {_load_text(max(good, key=lambda r: load_of(r)[1]))}."


def _load_text(r: dict) -> str:
    from accelbench.scenarios.serve.load import Load

    return Load.of_row(r).label


def reading(records: list[dict]) -> list[str]:
    """A few lines a model on its ``ok`` level rows: the best level (highest output tokens/s), where its time goes,
    what the device could do, energy and cost there, and the SLO's answer. Only what the rows hold is said."""
    lines = []
    answers = [r for r in records if r.get("slo_search") and r.get("status") == OK]
    for model, rs in _by_model([r for r in levels(records) if r.get("workload") == kinds.SERVE]).items():
        best = max(rs, key=lambda r: r["output_tokens_per_s"])
        said = [_time_line(rs, best), _device_line(best), _cost_line(best)]
        said.append(_slo_line(rs + [r for r in answers if str(r.get("model")) == model]))
        lines += [f"{model}: {t}" for t in said if t]
    return lines


def distribution_items(store, rows: list[dict], context: str = "") -> list[dict]:
    """The TTFT and ITL histograms of each level (its stored ``ttft_ms`` and ``itl_ms`` series), p50 and p99
    marked (:func:`accelbench.report.distributions.histogram_figure`)."""
    from accelbench.report.charts import svg
    from accelbench.report.distributions import MAX_PANELS, histogram_figure
    from accelbench.scenarios.serve.load import Load

    items = []
    for series, what in (("ttft_ms", "Time to first token"), ("itl_ms", "Inter-token latency")):
        cases = []
        for r in rows:
            values = store.series(r["case_id"], series) if r.get("case_id") is not None else None
            if values:
                cases.append((Load.of_row(r).key_suffix().lstrip("|"), list(values)))
        if cases:
            title = f"{what} a level, p50 solid, p99 dashed" + (f"\n{context}" if context else "")
            items.append({"title": what, "svg": svg(histogram_figure(cases[:MAX_PANELS], title)), "natural": True})
    return items


def server_timeline_figure(store, rows: list[dict], context: str = ""):
    """The server's own queue and KV-cache gauges (the ``server_*`` series its ``/metrics`` gave,
    :mod:`accelbench.scenarios.serve.scrape`) over each level's time, a panel a level (the first
    :data:`TIMELINE_PANELS`). An open matplotlib figure (None when no level has them)."""
    panels = []
    for r in rows:
        got = store.all_series(r["case_id"]) if r.get("case_id") is not None else {}
        gauges = {k[len("server_") :]: v for k, v in got.items() if k.startswith("server_") and k != "server_t_s"}
        if gauges and got.get("server_t_s"):
            panels.append((r, got["server_t_s"], gauges))
    if not panels:
        return None
    panels = panels[:TIMELINE_PANELS]
    plt = pyplot()
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(5.2, 1.6 + 1.4 * len(panels)), constrained_layout=True, squeeze=False
    )
    for ax, (r, t, gauges) in zip(axes[:, 0], panels, strict=True):
        for name, values in sorted(gauges.items()):
            ax.plot(t, values, label=name)
        ax.set_title(f"{r.get('model')}, {_load_text(r)}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    axes[-1, 0].set_xlabel("s since the level's start")
    fig.suptitle("The server's queue and KV cache" + (f"\n{context}" if context else ""), fontsize=9)
    return fig


def serve_charts(store, records: list[dict], context: str = "") -> list[dict]:
    """The report's chart items of a serve run: throughput against load, latency against throughput, the TTFT and
    ITL distributions of each level."""
    from accelbench.report.charts import svg

    rows = levels(records)
    items = []
    for title, fig in (
        ("Throughput against load", throughput_figure(rows, context)),
        ("Latency against throughput", latency_figure(rows, context)),
        ("Served engine against the in-process ceiling", ceiling_figure(rows, context)),
        (
            "The server's queue and KV cache",
            server_timeline_figure(store, [r for r in rows if r.get("workload") == kinds.SERVE], context),
        ),
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
    said = reading(records)
    blocks = [
        {"type": "notes", "title": "Reading", "lines": said} if said else None,
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


def run_label(run: dict, rows: list[dict]) -> str:
    """A serve run as a line's label: its server kind, model and served precision (``llama.cpp hf:llama-3.1-8b
    q8_0``), and its name."""
    r = rows[0]
    served = r.get("served_precision") or run.get("spec", {}).get("served_precision")
    parts = [str(r.get("server_engine") or "server"), str(r.get("model") or "")] + ([str(served)] if served else [])
    return " ".join(p for p in parts if p) + (f" ({run['name']})" if run.get("name") else "")


def engines_figure(runs: list[tuple[str, list[dict]]], x, y, xlabel: str, ylabel: str, title: str):
    """One line a serve run (``(label, level rows)``) of ``y(row)`` against ``x(row)``, each run's levels in load
    order: several engines, models or precisions on one chart. An open matplotlib figure (None when fewer than two
    runs have a point)."""
    points = [(label, [(x(r), y(r)) for r in rows]) for label, rows in runs]
    lines = [(label, [(a, b) for a, b in pts if a is not None and b is not None]) for label, pts in points]
    lines = [(label, pts) for label, pts in lines if pts]
    if len(lines) < 2:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.8), constrained_layout=True)
    for label, pts in lines:
        ax.plot(*zip(*pts), marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    return fig


def _millijoules(r: dict) -> float | None:
    e = r.get("energy_per_sample_j")
    return None if e is None else e * 1e3


def engines_section(store, run_ids: list[int]) -> dict | None:
    """The report's section that puts every serve run of ``run_ids`` on shared axes (None with fewer than two):
    output tokens/s against TPOT p50 (what a user gets at each latency), and energy per output token against the
    load. Open-loop and search runs join by their levels like any other."""
    from accelbench.report.blocks import charts_block
    from accelbench.report.charts import svg

    runs = []
    for i in run_ids:
        run = store.run(i)
        if run["kind"] != kinds.SERVE:
            continue
        rows = [r for r in levels(store.records(i)) if r.get("status") == OK]
        if rows:
            runs.append((run_label(run, rows), rows))
    if len(runs) < 2:
        return None
    items = []
    for title, fig in (
        (
            "Throughput against TPOT p50",
            engines_figure(runs, lambda r: r.get("tpot_p50_ms"), lambda r: r.get("output_tokens_per_s"),
                           "TPOT p50 (ms)", "output tokens/s", "Output tokens/s against TPOT p50, one line a run"),
        ),
        (
            "Energy per output token against the load",
            engines_figure(runs, lambda r: load_of(r)[1], _millijoules, "concurrency or request rate (/s)",
                           "mJ per output token", "Energy per output token against the load, one line a run"),
        ),
    ):  # fmt: skip
        if fig is not None:
            items.append({"title": title, "svg": svg(fig)})
    return {
        "id": "serve-engines",
        "title": "Serving runs on shared axes: " + ", ".join(label for label, _ in runs),
        "provenance": [],
        "spec": None,
        "blocks": [charts_block(items)] if items else [],
    }


def _by_model(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(str(r.get("model")), []).append(r)
    return out
