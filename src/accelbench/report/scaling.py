"""Tables and a plot for distributed results: scaling study, interconnect, concurrent jobs."""

from __future__ import annotations

from typing import Any, Iterable

from rich.table import Table

from accelbench.core import kinds
from accelbench.core.errors import OK
from accelbench.report.table import results_table


def human_bytes(n: float) -> str:
    """``1024 -> "1 KiB"``, ``1073741824 -> "1 GiB"`` (binary prefixes, as message sizes are chosen)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if float(n).is_integer() else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _gbps(v: float) -> str:
    from accelbench.report.units import number

    return number(v / 1e9)


SCALE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Workload", "workload", str),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("GPUs", "world_size", lambda v: f"{int(v)}"),
    ("Batch", "batch_size", lambda v: f"{int(v)}"),
    ("Batch/GPU", "rank_batch_size", lambda v: f"{int(v)}"),
    ("Throughput (samples/s)", "throughput_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Per GPU", "throughput_per_gpu_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Speed-up", "speedup", lambda v: f"{v:.2f}x"),
    ("Efficiency", "scaling_efficiency", _pct),
    ("Straggler gap", "straggler_gap_share", _pct),
    ("Comm share", "comm_exposed_share", _pct),
    ("GPU Util (%)", "gpu_util_mean_pct", lambda v: f"{v:.0f}"),
    ("Status", "status", str),
]

COLLECTIVE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Op", "op", str),
    ("Size", "size_bytes", human_bytes),
    ("Ranks", "world_size", lambda v: f"{int(v)}"),
    ("Backend", "backend", str),
    ("Time (us)", "time_s", lambda v: f"{v * 1e6:,.1f}"),
    ("algbw (GB/s)", "algbw_bytes_per_s", _gbps),
    ("busbw (GB/s)", "busbw_bytes_per_s", _gbps),
    ("Status", "status", str),
]

CONCURRENT_COLUMNS: list[tuple[str, str, Any]] = [
    ("Schedule", "schedule", str),
    ("Job", "job", lambda v: f"{int(v)}"),
    ("Model", "model", str),
    ("Workload", "workload", str),
    ("GPUs", "world_size", lambda v: f"{int(v)}"),
    ("Throughput (samples/s)", "throughput_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Status", "status", str),
]


def scale_table(rows: Iterable[dict], title: str | None = None) -> Table:
    """GPUs, samples/s, per-GPU samples/s, speed-up, efficiency, straggler gap, comm share per aggregate row."""
    return results_table(rows, title=title, columns=SCALE_COLUMNS)


def collective_table(rows: Iterable[dict], title: str | None = None) -> Table:
    return results_table([r for r in rows if r.get("workload") == kinds.COLLECTIVE], title=title, columns=COLLECTIVE_COLUMNS)


def p2p_table(rows: Iterable[dict], title: str = "GPU pair copy bandwidth, GB/s (link)") -> Table | None:
    """Source GPU per row, destination per column: ``bandwidth (link)``; None without pair rows."""
    pairs = {(int(r["src_device"]), int(r["dst_device"])): r for r in rows if r.get("workload") == kinds.P2P}
    if not pairs:
        return None
    n = 1 + max(max(k) for k in pairs)
    t = Table(title=title)
    t.add_column("src \\ dst")
    for j in range(n):
        t.add_column(f"GPU{j}", justify="right")
    for i in range(n):
        cells = []
        for j in range(n):
            r = pairs.get((i, j))
            cells.append("X" if i == j else (f"{r['bandwidth_bytes_per_s'] / 1e9:,.1f} ({r.get('link') or '?'})" if r else "-"))
        t.add_row(f"GPU{i}", *cells)
    return t


def concurrent_table(rows: Iterable[dict], title: str | None = None) -> Table:
    aggs = sorted((r for r in rows if r.get("aggregate") == 1), key=lambda r: (r["schedule"], r["job"], r["case_key"]))
    return results_table(aggs, title=title, columns=CONCURRENT_COLUMNS)


def plot_scaling(rows: list[dict], path: str) -> None:
    """Throughput against process count, one line per case, with the ideal linear line; saved to ``path``.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    from accelbench.report.plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("status") == OK:
            groups.setdefault(f"{r['workload']} {r['model']} bs={int(r['batch_size'])} {r['precision']}", []).append(r)
    for label, rs in groups.items():
        rs = sorted(rs, key=lambda r: r["world_size"])
        xs, ys = [r["world_size"] for r in rs], [r["throughput_samples_per_s"] for r in rs]
        ax.plot(xs, ys, "o-", label=label)
        ax.plot(xs, [ys[0] * x / xs[0] for x in xs], ":", color="grey")
    ax.set_xlabel("GPUs (processes)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title("Data-parallel scaling (dotted: linear)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)

