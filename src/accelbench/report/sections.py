"""The sections of a report, one per stored run, as plain data the HTML and markdown writers render.

A section is a dict: ``id``, ``title``, ``provenance`` (label, value pairs), ``spec`` (JSON text) and
``blocks``, each a dict with ``type``: ``table`` (``title``, ``headers``, ``rows`` of strings, ``notes``),
``charts`` (``items``: each a ``title`` and ``svg`` (inline) or ``png`` (base64)) or ``notes`` (``lines``). Every string is data: the
writers escape it (jinja2 autoescape, markdown entities).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from typing import Any

from accelbench.core import kinds
from accelbench.core.columns import MetricMap, named
from accelbench.core.errors import OK
from accelbench.report import charts
from accelbench.report.blocks import charts_block, table_block
from accelbench.report.runs import section_of
from accelbench.report.table import case_notes, is_detail
from accelbench.report.views import scale_view, throughput_unit, view

PROVENANCE = (
    ("Device", "device_name"),
    ("GPU", "gpu_name"),
    ("Driver", "driver_version"),
    ("CUDA", "cuda"),
    ("cuDNN", "cudnn"),
    ("torch", "torch"),
    ("torchvision", "torchvision"),
    ("Python", "python"),
    ("accelbench", "accelbench"),
    ("Git commit", "git_commit"),
    ("CPU", "cpu_model"),
    ("CPU count", "cpu_count"),
    ("Host", "host"),
    ("OS", "os"),
    ("Power limit (W)", "power_limit_w"),
    ("SM clock max (MHz)", "sm_clock_max_mhz"),
    ("Memory clock max (MHz)", "mem_clock_max_mhz"),
    ("Idle power (W)", "idle_power_w"),
)


def _shown(value: Any) -> str:
    """A provenance value as a reader wants it: floats to 4 significant digits with separators (``122.2``, never
    ``122.20963628989499``), integers with separators above 9,999 (``85,520,809,984``), text as it is."""
    from accelbench.report.units import number

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) > 9999 else str(value)
    return number(value, 4)


def cudnn_version(number: int) -> str:
    """``torch.backends.cudnn.version()``'s integer as cuDNN's dotted version: 91900 -> ``9.19.0`` (cuDNN 9 encodes
    major * 10000 + minor * 100 + patch), 8907 -> ``8.9.7`` (cuDNN 8 and older: major * 1000 + minor * 100 + patch),
    as ``cudnn_version.h`` defines ``CUDNN_VERSION``."""
    major = number // 10000 if number >= 90000 else number // 1000
    minor = (number - major * (10000 if number >= 90000 else 1000)) // 100
    return f"{major}.{minor}.{number % 100}"


def provenance(run: dict) -> list[tuple[str, str]]:
    """``(label, value)`` rows of a run's provenance, values formatted (:func:`_shown`; cuDNN as its version)."""
    env = run["env"]
    when = dt.datetime.fromtimestamp(run["created_at"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    out = [("Run", str(run["run_id"])), ("Kind", run["kind"]), ("Status", run["status"]), ("Created", when)]

    def shown(key: str, value: Any) -> str:
        return cudnn_version(value) if key == "cudnn" and isinstance(value, int) else _shown(value)

    return out + [(label, shown(k, env[k])) for label, k in PROVENANCE if env.get(k) is not None]


def _ci_lines(records: list[dict]) -> list[str]:
    if not any((r.get("windows") or 0) >= 2 for r in records):
        return ["95% confidence intervals: needs --repeats >= 2 (one timed window per case)."]
    from accelbench.report.notes import fold_similar

    notes = fold_similar(sorted({r["ci95_note"] for r in records if isinstance(r.get("ci95_note"), str)}))
    return [
        "95% intervals: bootstrap over the timed windows (throughput, p50); order statistics over every batch (p99)."
    ] + notes


def _flag_lines(kind: str, records: list[dict]) -> list[str]:
    from accelbench.report.runs import oom_lines

    lines = [f"{label} {text}" for label, text in case_notes(r for r in records if not is_detail(r))]
    return lines + oom_lines(kind, records)


def _sweep_charts(m: MetricMap, rows: list[dict], context: str) -> list[dict]:
    """The charts against batch size of a sweep: the scenario's throughput and latency (with their intervals), then
    memory, utilisation, power, energy and cost."""
    lat, what = m.latency, m.latency_label
    specs = [
        (m.throughput, m.throughput_unit, m.throughput_label, 1.0, m.throughput_ci),
        *(
            (f"{lat}_{p}_ms", "ms", f"{what} {p}", 1.0, (f"{lat}_{p}_ci95_low_ms", f"{lat}_{p}_ci95_high_ms"))
            for p in ("p50", "p99")
            if lat is not None
        ),
        ("peak_mem_bytes", "MB", "Peak allocated memory", 1e-6, None),
        ("device_mem_used_bytes", "MB", "Device memory used (NVML)", 1e-6, None),
        ("process_rss_max_bytes", "MB", "Process RSS (CPU)", 1e-6, None),
        ("gpu_util_mean_pct", "%", "GPU utilisation", 1.0, None),
        ("power_mean_w", "W", "Mean power", 1.0, None),
        ("energy_per_sample_j", "mJ", f"Energy per {m.sample}", 1e3, None),
        ("cost_per_1000_samples_usd", "USD", f"Cost per 1,000 {m.sample}s", 1.0, None),
    ]
    items = [
        {
            "title": title,
            "svg": charts.batch_chart(
                rows, col, unit, f"{title} against batch size", scale=scale, ci=ci, context=context
            ),
        }
        for col, unit, title, scale, ci in specs
        if col is not None
    ]
    return [i for i in items if i["svg"]]


def sweep_blocks(kind: str, records: list[dict], context: str = "") -> list[dict]:
    """A scenario's sweep (inference, training step, or any scenario whose map names the default section): its wide
    table, charts against batch size (``context``: the model, device and run, a second title line), notes."""
    from accelbench.report.runs import quality_lines

    m = section_of(kind)[1] or named("inference")
    rows = [r for r in records if r.get("aggregate") != 0]
    windowed = m.latency_series is not None
    blocks = [
        table_block(rows, view(m.name), "Results", _ci_lines(rows) if windowed else []),
        table_block(
            [r for r in rows if r.get("status") == OK],
            [c for c in view("telemetry") if c[1] not in ("validity", "status")],
            "Utilisation, power, energy and cost",
        ),
        charts_block(_sweep_charts(m, rows, context)),
    ]
    lines = _flag_lines(kind, rows) + quality_lines(kind, rows)
    blocks.append({"type": "notes", "title": "Validity, failures, OOM boundary", "lines": lines})
    return blocks


def convergence_blocks(records: list[dict], context: str = "") -> list[dict]:
    """Convergence: the summary per batch size (time to accuracy), accuracy per epoch (table and chart)."""
    epochs = sorted((r for r in records if r.get("row_type") == "epoch"), key=lambda r: (r["batch_size"], r["epoch"]))
    blocks = [
        table_block(
            [r for r in records if r.get("row_type") == "summary"], view("summary"), "Time to accuracy per batch size"
        ),
        table_block(epochs, view("epoch"), "Accuracy per epoch"),
    ]
    chart = charts.epoch_chart(records, context)
    return blocks + [charts_block([{"title": "Accuracy per epoch", "svg": chart}] if chart else [])]


def profile_blocks(store, run: dict, records: list[dict], context: str = "") -> list[dict]:
    """Profile: the per-case table and the model roofline against the ceilings the run was measured against (its
    own, an imported run's; else the device's as of the run: :func:`accelbench.ceilings.cache.run_ceilings`)."""
    from accelbench.ceilings.cache import run_ceilings
    from accelbench.report.roofline import figure, summary_points

    blocks = [table_block(records, view("profile"), "Profiled steps")]
    name = run["env"].get("device_name")
    ceilings = run_ceilings(store, run)
    points = summary_points(records)
    if ceilings is not None and points:
        fig = figure(ceilings, points, f"Model roofline: {context or name}")
        blocks.append({**charts_block([{"title": "Roofline", "png": charts.png_base64(fig)}]), "title": "Roofline"})
    elif points:
        blocks.append({"type": "notes", "title": "Roofline", "lines": [f"no ceilings stored for {name}"]})
    from accelbench.report.profile_table import phase_line, replay_note

    phases = [line for line in map(phase_line, records) if line]  # a language model's prefill and decode steps
    if phases:
        blocks.append({"type": "notes", "title": "Prefill and decode on the roofline", "lines": phases})
    replays = [line for line in map(replay_note, records) if line]  # ncu's kernel sum far from the step's own time
    if replays:
        blocks.append({"type": "notes", "title": "ncu's kernel times against the step", "lines": replays})
    return blocks


def multi_blocks(kind: str, records: list[dict], context: str = "") -> list[dict]:
    """Multi-GPU runs: scaling (aggregate rows), collectives and GPU pairs, concurrent jobs, input pipeline."""
    aggs = [r for r in records if r.get("aggregate") == 1]
    section = section_of(kind)[0]
    if section == "interconnect":
        return [
            table_block(
                [r for r in records if r.get("workload") == kinds.COLLECTIVE], view("collective"), "Collectives"
            ),
            table_block([r for r in records if r.get("workload") == kinds.P2P], view("p2p"), "GPU pair copies"),
        ]
    if section == "concurrent":
        return [table_block(aggs, view("concurrent"), "Concurrent and sequential jobs")]
    if section == "pipeline":
        return [table_block(records, view("pipeline"), "Input pipeline")]
    blocks = [table_block(aggs, scale_view(aggs), "Scaling (aggregate rows)")]
    chart = charts.batch_chart(
        aggs,
        "throughput_samples_per_s",
        throughput_unit(aggs),
        "Throughput against batch size",
        group=("model", "precision", "mode", "world_size"),
        context=context,
    )
    return blocks + [charts_block([{"title": "Throughput", "svg": chart}] if chart else [])]


def loadgen_blocks(records: list[dict]) -> list[dict]:
    """MLPerf LoadGen scenarios: the results row per case, the Server search's probes, INVALID reasons."""
    rows = [r for r in records if not is_detail(r)]
    probes = [r for r in records if r.get("row_type") == "server-probe"]
    return [
        table_block(rows, view("loadgen"), "MLPerf LoadGen scenarios"),
        table_block(probes, view("loadgen"), "Server search: every probe"),
        {"type": "notes", "title": "Validity, failures", "lines": _flag_lines(kinds.LOADGEN, records)},
    ]


def _generate(store, run: dict, records: list[dict], context: str) -> list:
    from accelbench.report.generate import generate_blocks

    return generate_blocks(store, run, records, context)


def _serve(store, run: dict, records: list[dict], context: str) -> list:
    from accelbench.report.serve import serve_blocks

    return serve_blocks(store, run, records, context)


def _tune(store, run: dict, records: list[dict], context: str) -> list:
    from accelbench.report.tune import tune_blocks

    return tune_blocks(run, records)


def _multi(store, run: dict, records: list[dict], context: str) -> list:
    return multi_blocks(run["kind"], records, context)


# a section's blocks: fn(store, run, records, context); a scenario names its section in its metric map
# (accelbench.core.columns.MetricMap.section), a run no map lays out in accelbench.report.runs.RUN_SECTIONS
SECTIONS: dict[str, Callable[[Any, dict, list[dict], str], list]] = {
    "sweep": lambda store, run, records, context: sweep_blocks(run["kind"], records, context),
    "convergence": lambda store, run, records, context: convergence_blocks(records, context),
    "profile": profile_blocks,
    "loadgen": lambda store, run, records, context: loadgen_blocks(records),
    "generate": _generate,
    "serve": _serve,
    "tune": _tune,
    "scale": _multi,
    "concurrent": _multi,
    "interconnect": _multi,
    "pipeline": _multi,
}


def run_section(store, run_id: int) -> dict[str, Any]:
    """The section of one run (see the module docstring).

    Raises:
        KeyError: no such run.
    """
    run = store.run(run_id)
    records = store.records(run_id)
    kind = run["kind"]
    models = ", ".join(dict.fromkeys(str(r["model"]) for r in records if isinstance(r.get("model"), str)))
    where = run["env"].get("device_name") or run["env"].get("device")
    context = (f"{models} on {where}" if models else f"on {where}") + f", run {run_id}"  # a chart shared alone
    section, m = section_of(kind)
    blocks = SECTIONS.get(section, _multi)(store, run, records, context)
    if m is not None and m.latency_series is not None:  # a scenario that stores per-batch latencies
        from accelbench.report.distributions import latency_items

        hist = latency_items(store, records, context)
        blocks.append({**charts_block(hist), "title": "Latency distributions"} if hist else None)
    named = f" '{run['name']}'" if run.get("name") else ""
    return {
        "id": f"run-{run_id}",
        "title": f"Run {run_id}{named}: {kind}" + (f", {models}" if models else "") + f" on {where}",
        "provenance": provenance(run),
        "spec": json.dumps(run["spec"], indent=1, default=str),
        "blocks": [b for b in blocks if b is not None],
    }
