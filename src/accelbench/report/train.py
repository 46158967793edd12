"""Tables and plots of training results (rich tables; matplotlib only in :func:`plot_convergence`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from rich.table import Table

from accelbench.report.table import _present, ci_columns, rate, results_table
from accelbench.report.units import number


def _pct(v: float) -> str:
    return f"{100 * v:.2f}%"


def _int(v) -> str:
    return str(int(v))  # stored integers come back as floats from a DataFrame with empty cells


TRAIN_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch Size", "batch_size", str),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("NHWC", "channels_last", lambda v: "yes" if v else "no"),
    ("Throughput (img/s)", "throughput_samples_per_s", lambda v: f"{v:,.1f}"),
    ("Step p50 (ms)", "step_time_p50_ms", lambda v: f"{v:.2f}"),
    ("Step p99 (ms)", "step_time_p99_ms", lambda v: f"{v:.2f}"),
    ("Spread", "step_time_spread", lambda v: f"{100 * v:.1f}%"),
    *ci_columns("step_time", "Step"),
    ("Compile (s)", "compile_s", lambda v: f"{v:.1f}"),
    ("GPU Util (%)", "gpu_util_mean_pct", lambda v: f"{v:.0f}"),
    ("Peak Alloc (MB)", "peak_mem_bytes", lambda v: f"{v / 1e6:,.0f}"),
    ("Loader (img/s)", "loader_samples_per_s", lambda v: f"{v:,.0f}"),
    ("Input-bound", "input_bound", lambda v: "YES" if v else "no"),
    ("Status", "status", str),
]

# What fits 80 columns (``accelbench train`` without --wide).
COMPACT_TRAIN_COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch", "batch_size", _int),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("img/s", "throughput_samples_per_s", rate),
    ("p50 ms", "step_time_p50_ms", lambda v: f"{v:.2f}"),
    ("Comp. s", "compile_s", lambda v: f"{v:.1f}"),
    ("Loader/s", "loader_samples_per_s", rate),
    ("mJ/img", "energy_per_sample_j", lambda v: f"{1e3 * v:.1f}"),
    ("Status", "status", str),
]

SUMMARY_COLUMNS: list[tuple[str, str, Any]] = [
    ("Batch Size", "batch_size", str),
    ("Peak LR", "lr_peak", lambda v: number(v, 4)),
    ("Epochs", "epochs_done", _int),
    ("Final Top-1", "final_eval_top1", _pct),
    ("Best Top-1", "best_eval_top1", _pct),
    ("Best Epoch", "best_epoch", _int),
    ("Epochs to Target", "epochs_to_target", _int),
    ("Time to Target (s)", "time_to_target_s", lambda v: f"{v:.1f}"),
    ("Train (img/s)", "samples_per_s_mean", lambda v: f"{v:,.0f}"),
    ("Total Time (s)", "total_wall_s", lambda v: f"{v:.1f}"),
    ("Input-bound Epochs", "input_bound_epochs", _int),
    ("Status", "status", str),
]

PIPELINE_COLUMNS: list[tuple[str, str, Any]] = [
    ("Source", "source", str),
    ("Workers", "loader_workers", str),
    ("Pinned", "loader_pin_memory", lambda v: "yes" if v else "no"),
    ("Batch Size", "batch_size", str),
    ("Image Size", "image_size", str),
    ("Throughput (img/s)", "loader_samples_per_s", lambda v: f"{v:,.0f}"),
    ("Start-up (s)", "loader_startup_s", lambda v: f"{v:.2f}"),
    ("Cache", "cache_state", str),
    ("Evicted by", "cold_method", str),
    ("Read (MB)", "read_bytes", lambda v: f"{v / 1e6:,.1f}"),
    ("Read (MB/s)", "read_mb_per_s", lambda v: f"{v:,.0f}"),
    ("Cached Before", "page_cache_resident_fraction", lambda v: f"{100 * v:.0f}%"),
    ("Status", "status", str),
]


def sweep_table(records: Iterable[dict], title: str | None = None, compact: bool = False) -> Table:
    """The step-throughput sweep, one row per case (``compact``: the columns that fit 80 columns)."""
    return results_table(records, title=title, columns=COMPACT_TRAIN_COLUMNS if compact else TRAIN_COLUMNS,
                         compact=compact)


def summary_table(records: Iterable[dict], title: str | None = None) -> Table:
    """One row per batch size of a convergence run."""
    return results_table([r for r in records if r.get("row_type") == "summary"], title=title, columns=SUMMARY_COLUMNS)


def pipeline_table(records: Iterable[dict], title: str | None = None) -> Table:
    return results_table(records, title=title, columns=PIPELINE_COLUMNS)


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
