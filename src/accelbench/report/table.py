"""Rich tables of stored results, in the reference study's layout."""

from __future__ import annotations

import math
from typing import Any, Iterable

from rich.table import Table

# (header, record key, formatter)
INFERENCE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch Size", "batch_size", str),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("NHWC", "channels_last", lambda v: "yes" if v else "no"),
    ("Inference Time (s)", "total_time_s", lambda v: f"{v:.3f}"),
    ("Throughput (img/s)", "throughput_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Latency p50 (ms)", "latency_p50_ms", lambda v: f"{v:.2f}"),
    ("Latency p99 (ms)", "latency_p99_ms", lambda v: f"{v:.2f}"),
    ("Spread", "latency_spread", lambda v: f"{100 * v:.1f}%"),
    ("GPU Util (%)", "gpu_util_mean_pct", lambda v: f"{v:.0f}"),
    ("Memory Used (MB)", "device_mem_used_bytes", lambda v: f"{v / 1e6:,.0f}"),
    ("Peak Alloc (MB)", "peak_mem_bytes", lambda v: f"{v / 1e6:,.0f}"),
    ("Top-1", "top1", lambda v: f"{100 * v:.2f}%"),
    ("Power avg (W)", "power_mean_w", lambda v: f"{v:.0f}"),
    ("Energy/img (mJ)", "energy_per_sample_j", lambda v: f"{1e3 * v:.2f}"),
    ("$/1k img", "cost_per_1000_samples_usd", lambda v: f"{v:.5f}"),
    ("Validity", "validity", lambda v: str(v) if v == "ok" else f"[yellow]{v}[/]"),
    ("Status", "status", str),
]

_STATUS_STYLE = {"ok": "green", "oom": "red", "error": "red", "unsupported": "yellow", "skipped": "dim"}


def _present(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def results_table(records: Iterable[dict], title: str | None = None, columns=None) -> Table:
    """A rich Table of case records; columns with no value in any row are left out, and a failed
    row shows its one-line reason under Status."""
    rows = list(records)
    cols = [c for c in (columns or INFERENCE_COLUMNS) if c[1] == "status" or any(_present(r.get(c[1])) for r in rows)]
    if len({r.get("model") for r in rows}) <= 1:
        cols = [c for c in cols if c[1] != "model"]
    table = Table(title=title, show_lines=False)
    for header, key, _ in cols:
        table.add_column(header, justify="left" if key in ("model", "precision", "mode", "status") else "right")
    for r in rows:
        cells = []
        for _, key, fmt in cols:
            v = r.get(key)
            if key == "status":
                text = str(v) + (f": {r['error']}" if v != "ok" and r.get("error") else "")
                cells.append(f"[{_STATUS_STYLE.get(v, '')}]{text}[/]" if v in _STATUS_STYLE else text)
            else:
                cells.append(fmt(v) if _present(v) else "-")
        table.add_row(*cells)
    return table


def runs_table(runs: list[dict]) -> Table:
    import datetime as dt

    t = Table(title="Runs")
    for h in ("Run", "Created (UTC)", "Kind", "Status", "Cases"):
        t.add_column(h)
    for r in runs:
        when = dt.datetime.fromtimestamp(r["created_at"], dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        t.add_row(str(r["run_id"]), when, r["kind"], r["status"], str(r["cases"]))
    return t
