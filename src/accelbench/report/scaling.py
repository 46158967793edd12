"""Tables and a plot for distributed results: scaling study, interconnect, concurrent jobs."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table

from accelbench.core import kinds
from accelbench.core.errors import OK
from accelbench.report.table import results_table
from accelbench.report.views import scale_view, throughput_unit, view


def scale_table(rows: Iterable[dict], title: str | None = None, compact: bool = False) -> Table:
    """GPUs, throughput, per-GPU throughput (in the rows' samples: images or tokens a second), speed-up, efficiency,
    straggler gap, comm share per aggregate row; ``compact``: the columns that fit 80, a table a model."""
    rows = list(rows)
    return results_table(rows, title=title, columns=scale_view(rows, compact), compact=compact)


def collective_table(rows: Iterable[dict], title: str | None = None) -> Table:
    return results_table(
        [r for r in rows if r.get("workload") == kinds.COLLECTIVE], title=title, columns=view("collective")
    )


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
            cells.append(
                "X" if i == j else (f"{r['bandwidth_bytes_per_s'] / 1e9:,.1f} ({r.get('link') or '?'})" if r else "-")
            )
        t.add_row(f"GPU{i}", *cells)
    return t


def concurrent_table(rows: Iterable[dict], title: str | None = None) -> Table:
    aggs = sorted((r for r in rows if r.get("aggregate") == 1), key=lambda r: (r["schedule"], r["job"], r["case_key"]))
    return results_table(aggs, title=title, columns=view("concurrent"))


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
    ax.set_ylabel(f"throughput ({throughput_unit(rows)})")
    ax.set_title("Data-parallel scaling (dotted: linear)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
