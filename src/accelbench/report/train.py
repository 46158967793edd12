"""Tables and plots of training results (rich tables; matplotlib only in :func:`plot_convergence`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from rich.table import Table

from accelbench.report.table import _present, results_table
from accelbench.report.views import view


def _pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def sweep_table(records: Iterable[dict], title: str | None = None, compact: bool = False) -> Table:
    """The step-throughput sweep, one row per case (``compact``: the columns that fit 80 columns): the training
    map's tables (:func:`accelbench.report.runs.scenario_table`)."""
    from accelbench.core import kinds
    from accelbench.core.columns import for_kind
    from accelbench.report.table import scenario_table

    return scenario_table(for_kind(kinds.TRAINING), records, compact, title)


def summary_table(records: Iterable[dict], title: str | None = None) -> Table:
    """One row per batch size of a convergence run."""
    return results_table([r for r in records if r.get("row_type") == "summary"], title=title, columns=view("summary"))


def pipeline_table(records: Iterable[dict], title: str | None = None) -> Table:
    return results_table(records, title=title, columns=view("pipeline"))


def epoch_table(records: Iterable[dict], title: str | None = None) -> Table:
    """Accuracy per epoch, batch sizes side by side: top-1, train loss and elapsed time for each."""
    rows = [r for r in records if r.get("row_type") == "epoch"]
    sizes = sorted({r["batch_size"] for r in rows})
    by = {(r["batch_size"], int(r["epoch"])): r for r in rows}
    table = Table(title=title)
    table.add_column("Epoch", justify="right")
    for b in sizes:
        for h in (f"bs={b} Top-1", f"bs={b} Loss", f"bs={b} Time (s)"):
            table.add_column(h, justify="right")
    for e in sorted({int(r["epoch"]) for r in rows}):
        cells = [str(e)]
        for b in sizes:
            r = by.get((b, e))
            cells += [_pct(r["eval_top1"]), f"{r['train_loss']:.3f}", f"{r['elapsed_s']:.1f}"] if r else ["-"] * 3
        table.add_row(*cells)
    return table


def epoch_markdown(records: Iterable[dict]) -> str:
    """The :func:`epoch_table` as a GitHub markdown table (for benchmark write-ups)."""
    rows = [r for r in records if r.get("row_type") == "epoch"]
    sizes = sorted({r["batch_size"] for r in rows})
    by = {(r["batch_size"], int(r["epoch"])): r for r in rows}
    head = ["Epoch"] + [f"bs={b} {h}" for b in sizes for h in ("top-1", "train loss", "time (s)")]
    lines = ["| " + " | ".join(head) + " |", "|" + " ---: |" * len(head)]
    for e in sorted({int(r["epoch"]) for r in rows}):
        cells = [str(e)]
        for b in sizes:
            r = by.get((b, e))
            cells += [_pct(r["eval_top1"]), f"{r['train_loss']:.3f}", f"{r['elapsed_s']:.1f}"] if r else ["-"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_convergence(records: Iterable[dict], path: str | Path, title: str | None = None) -> Path:
    """PNG with top-1 vs epoch and top-1 vs elapsed wall time, one line per batch size.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    from accelbench.report.plots import pyplot

    plt = pyplot()
    rows = [r for r in records if r.get("row_type") == "epoch" and _present(r.get("eval_top1"))]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for b in sorted({r["batch_size"] for r in rows}):
        pts = sorted((r for r in rows if r["batch_size"] == b), key=lambda r: r["epoch"])
        label = f"batch {b}, lr {pts[0]['lr_peak']:.3g}"
        axes[0].plot([r["epoch"] for r in pts], [100 * r["eval_top1"] for r in pts], marker=".", label=label)
        axes[1].plot([r["elapsed_s"] for r in pts], [100 * r["eval_top1"] for r in pts], marker=".", label=label)
    axes[0].set(xlabel="epoch", ylabel="test top-1 (%)")
    axes[1].set(xlabel="wall time incl. evaluation (s)")
    for ax in axes:
        ax.grid(alpha=0.3)
    axes[0].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
