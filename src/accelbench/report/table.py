"""Rich tables of stored results, in the reference study's layout.

Two widths: the *compact* tables (``compact=True``, the default of ``run`` and ``train``) hold the figures
a reader compares first and fit an 80-column terminal; a failed row shows only its status there and its
reason is listed under the table (:func:`case_notes`). The full tables (``--wide``, ``results``) hold every
column. Cells are plain :class:`rich.text.Text`, never parsed as markup: a model name or an exception
message with ``[brackets]`` prints as it is.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from rich import box
from rich.table import Table
from rich.text import Text

from accelbench.core.errors import ERROR, OK, OOM, SKIPPED, UNSUPPORTED
from accelbench.core.rundata import DETAIL_ROW_TYPES, is_detail  # noqa: F401  (re-exported for the reports)
from accelbench.core.validity import VALID
from accelbench.report.notes import case_label, case_notes  # noqa: F401  (re-exported for the reports)
from accelbench.report.units import number, rate, usd  # noqa: F401  (rate re-exported for the reports)


def _int(v: Any) -> str:
    return str(int(v))  # stored integers come back as floats from a DataFrame with empty cells


def interval(lo: float, hi: float) -> str:
    """A 95 % interval cell: ``low..high`` at the precision of the figure it brackets."""
    return f"{lo:,.1f}..{hi:,.1f}" if lo >= 100 else f"{lo:.2f}..{hi:.2f}"


def ci_columns(prefix: str, label: str) -> list[tuple[str, tuple[str, str], Any]]:
    """The wide tables' interval columns (``--repeats`` >= 2): throughput and ``<prefix>`` p50 / p99."""
    return [("Throughput 95% CI", ("throughput_ci95_low_samples_per_s", "throughput_ci95_high_samples_per_s"), interval),
            (f"{label} p50 95% CI (ms)", (f"{prefix}_p50_ci95_low_ms", f"{prefix}_p50_ci95_high_ms"), interval),
            (f"{label} p99 95% CI (ms)", (f"{prefix}_p99_ci95_low_ms", f"{prefix}_p99_ci95_high_ms"), interval)]


# (header, record key, formatter); a key may be a tuple of keys (the formatter gets each value)
INFERENCE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch Size", "batch_size", _int),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("NHWC", "channels_last", lambda v: "yes" if v else "no"),
    ("Inference Time (s)", "total_time_s", lambda v: f"{v:.3f}"),
    ("Throughput (img/s)", "throughput_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Latency p50 (ms)", "latency_p50_ms", number),
    ("Latency p99 (ms)", "latency_p99_ms", number),
    ("Spread", "latency_spread", lambda v: f"{100 * v:.1f}%"),
    *ci_columns("latency", "Latency"),
    ("GPU Util (%)", "gpu_util_mean_pct", lambda v: f"{v:.0f}"),
    ("Memory Used (MB)", "device_mem_used_bytes", lambda v: f"{v / 1e6:,.0f}"),
    ("Peak Alloc (MB)", "peak_mem_bytes", lambda v: f"{v / 1e6:,.0f}"),
    ("Top-1", "top1", lambda v: f"{100 * v:.2f}%"),
    ("Top-1 fp32", "top1_fp32_ref", lambda v: f"{100 * v:.2f}%"),
    ("Top-1 Δ (pts)", "top1_delta_pts", lambda v: f"{v:+.2f}"),
    ("Target Met", "accuracy_target_met", lambda v: "yes" if v else "no"),
    ("Simulated", "simulated", lambda v: "yes" if v else "no"),
    ("FP8 Linear", ("fp8_linear_layers", "fp8_linear_layers_skipped"), lambda a, b: f"{a:.0f} (+{b:.0f} bf16)"),
    ("FP8 FLOPs", "fp8_flops_share", lambda v: f"{100 * v:.0f}%"),
    ("Power avg (W)", "power_mean_w", lambda v: f"{v:.0f}"),
    ("Energy/img (mJ)", "energy_per_sample_j", lambda v: number(1e3 * v)),
    ("$/1k img", "cost_per_1000_samples_usd", usd),
    ("Validity", "validity", str),
    ("Status", "status", str),
]

# What fits 80 columns: the case, throughput, latency, accuracy, energy, status.
COMPACT_INFERENCE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch", "batch_size", _int),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("img/s", "throughput_samples_per_s", rate),
    ("p50 ms", "latency_p50_ms", number),
    ("p99 ms", "latency_p99_ms", number),
    ("Top-1", "top1", lambda v: f"{100 * v:.1f}%"),
    ("Δ pts", "top1_delta_pts", lambda v: f"{v:+.2f}"),
    ("mJ/img", "energy_per_sample_j", lambda v: number(1e3 * v)),
    ("Status", "status", str),
]

_STATUS_STYLE = {OK: "green", OOM: "red", ERROR: "red", UNSUPPORTED: "yellow", SKIPPED: "dim"}
_TEXT_KEYS = ("model", "precision", "mode", "status", "validity", "source", "step", "schedule", "op", "link",
              "loadgen_scenario", "result_validity", "figure_of_merit_text")


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))




def cell_value(r: dict, key: str | tuple[str, ...]) -> Any:
    """``r[key]``, or for a tuple of keys the tuple of values (None unless every one is present)."""
    if isinstance(key, tuple):
        vals = tuple(r.get(k) for k in key)
        return vals if all(_present(v) for v in vals) else None
    return r.get(key)


def format_cell(fmt, v: Any) -> str:
    """A formatted cell, ``-`` for a missing value (a tuple value is spread over the formatter's arguments)."""
    if not _present(v):
        return "-"
    return fmt(*v) if isinstance(v, tuple) else fmt(v)


def _status_cell(r: dict, compact: bool) -> Text:
    v = r.get("status")
    text = str(v)
    if v == OK and compact and isinstance(r.get("validity"), str) and r["validity"] != VALID:
        text = "ok, flagged"
    elif v == UNSUPPORTED and compact and r.get("simulated") and r.get("simulated") == r.get("simulated"):
        text = "simulated"  # unsupported for speed; its accuracy was measured in simulation (not NaN)
    elif v != OK and not compact and r.get("error"):
        text += f": {r['error']}"
    style = "yellow" if text == "ok, flagged" else _STATUS_STYLE.get(v, "")
    return Text(text, style=style)


def results_table(records: Iterable[dict], title: str | None = None, columns=None, compact: bool = False):
    """A rich Table of case records; columns with no value in any row are left out.

    Args:
        columns: ``(header, key, formatter)`` triples (default: every inference column, or the compact set).
        compact: failed rows show only their status (reasons go under the table, :func:`case_notes`), the
            table has no vertical rules, and several models get one table each under their name instead
            of a Model column: the compact column sets then fit 80 columns.
    Returns:
        A :class:`rich.table.Table`, or a :class:`rich.console.Group` of per-model tables (compact, several models).
    """
    rows = list(records)
    models = list(dict.fromkeys(str(r.get("model")) for r in rows))
    if compact and len(models) > 1:
        from rich.console import Group

        parts = [] if title is None else [Text(title)]
        for m in models:
            parts += [Text(m, style="bold"), results_table([r for r in rows if str(r.get("model")) == m],
                                                          columns=columns, compact=True)]
        return Group(*parts)
    default = COMPACT_INFERENCE_COLUMNS if compact else INFERENCE_COLUMNS
    cols = [c for c in (columns or default) if c[1] == "status" or any(_present(cell_value(r, c[1])) for r in rows)]
    if len(models) <= 1:
        cols = [c for c in cols if c[1] != "model"]
    # Compact: one space between columns (the box's blank rule), no outer edge.
    table = Table(title=title, show_lines=False, box=box.SIMPLE_HEAD if compact else box.HEAVY_HEAD,
                  padding=(0, 0) if compact else (0, 1), show_edge=not compact)
    for header, key, _ in cols:
        text = isinstance(key, str) and key in _TEXT_KEYS
        # Wide tables never squeeze a column below its header; compact ones are sized to fit 80 columns.
        table.add_column(header, justify="left" if text else "right", no_wrap=not (text and key in ("model", "status")),
                         overflow="fold", min_width=None if compact else len(header))
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


def oom_boundary(records: list[dict]) -> dict[tuple, dict[str, int | None]]:
    """Per (model, precision, mode): the largest batch size that ran and the smallest that ran out of memory."""
    out: dict[tuple, dict[str, int | None]] = {}
    for r in records:
        if is_detail(r):
            continue
        g = out.setdefault((r.get("model"), r.get("precision"), r.get("mode")), {"largest_ok": None, "smallest_oom": None})
        bs = r.get("batch_size")
        if not _present(bs):
            continue
        if r["status"] == OK and (g["largest_ok"] is None or bs > g["largest_ok"]):
            g["largest_ok"] = int(bs)
        if r["status"] == OOM and (g["smallest_oom"] is None or bs < g["smallest_oom"]):
            g["smallest_oom"] = int(bs)
    return out


def natural_width(table, console) -> int:
    """The width ``table`` takes with no column squeezed (a wide table is printed at this width, even
    beyond the terminal's: cut cells would hide figures)."""
    from rich.measure import Measurement

    return Measurement.get(console, console.options.update(width=10_000), table).maximum


def runs_table(runs: list[dict]) -> Table:
    import datetime as dt

    t = Table(title="Runs")
    for h in ("Run", "Created (UTC)", "Kind", "Status", "Cases"):
        t.add_column(h)
    for r in runs:
        when = dt.datetime.fromtimestamp(r["created_at"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        t.add_row(str(r["run_id"]), when, r["kind"], r["status"], str(r["cases"]))
    return t


def cheapest_lines(records: Iterable[dict]) -> list[str]:
    """One line per model with accuracy: the cheapest precision that meets the accuracy target (MLPerf: >= 99 % of
    the fp32 top-1), :func:`accelbench.quant.accuracy.cheapest_meeting_target`."""
    from accelbench.quant.accuracy import TARGET_RATIO, cheapest_meeting_target

    out = []
    for c in cheapest_meeting_target(list(records)):
        head = f"{c['model']}: cheapest precision meeting the target (top-1 at least {100 * TARGET_RATIO:.0f} % of fp32 " \
               f"{100 * c['top1_fp32_ref']:.2f} %): "
        missed = f"; below target: {', '.join(c['missed'])}" if c["missed"] else ""
        if c["precision"] is None:
            out.append(head + "none measured (simulated and failed cases have no speed)" + missed)
            continue
        what = (f"{usd(c['value'])}/1k img" if c["by"] == "cost_per_1000_samples_usd"
                else f"{rate(c['value'])} img/s (no price: by throughput)")
        out.append(head + f"{c['precision']} ({c['mode']}, batch {_int(c['batch_size'])}), {what}, top-1 "
                   f"{100 * c['top1']:.2f} % ({c['top1_delta_pts']:+.2f} pts){missed}")
    return out
