"""``accelbench tune``'s output: the trials and the Pareto front as rich tables, the front as a matplotlib chart
(throughput vs p99 latency), and the summary lines (winner, verdict, gain over the default configuration)."""

from __future__ import annotations

from typing import Any

from accelbench.core.errors import OK
from accelbench.report.table import rate, results_table
from accelbench.report.units import ms
from accelbench.report.views import view


def interval(lo: float, hi: float) -> str:
    return f"{lo:.3f}..{hi:.3f}"


def mode_label(r: dict[str, Any]) -> str:
    """The row's mode, with ``fused`` / ``foreach`` when a training-step trial set its optimizer kernels."""
    from accelbench.studies.tune_search import KERNEL_WORDS

    fused = r.get("fused_optimizer")
    return str(r["mode"]) + ("" if fused is None else " " + KERNEL_WORDS[bool(fused)])


def _p99(r: dict[str, Any]) -> float | None:
    """The p99 latency, a training step's p99 step time for a stored train trial."""
    return r.get("latency_p99_ms") if r.get("latency_p99_ms") is not None else r.get("step_time_p99_ms")


def _shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as the tables show them: the mode with its optimizer kernels, the p99 of a training step (memory:
    the ``memory_bytes`` display cell of :mod:`accelbench.report.views`)."""
    return [{**r, "mode": mode_label(r), "latency_p99_ms": _p99(r)} for r in rows]


def front_table(
    rows: list[dict[str, Any]], title: str = "Pareto front: throughput vs latency p99", compact: bool = True
):
    """One line per Pareto-optimal trial: configuration, throughput, p50/p99 latency, energy per sample, memory;
    compact fits 80 columns."""
    return results_table(_shown(rows), title=title, columns=view("tune-front", compact=True), compact=compact)


def trials_table(rows: list[dict[str, Any]], compact: bool = False):
    """Every trial in the order it ran: stage, configuration, status, throughput, p99, wall seconds (``compact``:
    fits 80 columns; else also p50 and energy)."""
    cols = view("tune-compact" if compact else "tune", compact=True)
    return results_table(_shown(rows), title="Trials", columns=cols, compact=compact)


def summary_lines(out, objective: str) -> list[str]:
    """The winner, whether it beats the runner-up beyond noise, and what it gained over the default."""
    lines = []
    w = out.winner
    if w is None:
        return ["no winner: " + "; ".join(out.notes or ["no trial finished"])]
    lines.append(
        f"winner ({objective}): {w['precision']} {mode_label(w)} batch {int(w['batch_size'])}: "
        f"{rate(w['throughput_samples_per_s'])} samples/s, p50 {ms(w['latency_p50_ms'])}, "
        f"p99 {ms(w['latency_p99_ms'])} over {w['final_windows']} windows"
    )
    if out.verdict is not None and out.runner_up is not None:
        v, r = out.verdict, out.runner_up
        ci = interval(v.ci_low, v.ci_high) if v.ci_low is not None else "no interval"
        word = {
            "within noise": "the top two are within noise",
            "too few windows": "too few windows to tell the top two apart",
        }.get(v.verdict, v.verdict)
        lines.append(
            f"vs runner-up {r['precision']} {mode_label(r)} batch {int(r['batch_size'])}: ratio {v.ratio:.3f} "
            f"(95% CI {ci}): {word}"
        )
    if out.gain is not None and out.baseline is not None:
        g, b = out.gain, out.baseline
        ci = interval(g.ci_low, g.ci_high) if g.ci_low is not None else "no interval"
        from accelbench.studies.tune_search import OBJECTIVES

        column, higher = OBJECTIVES[objective]
        gain = g.ratio if higher or not g.ratio else 1 / g.ratio  # "x N better" whichever way the metric points
        lines.append(
            f"gain over the default ({b['precision']} {mode_label(b)} batch {int(b['batch_size'])}): "
            f"x{gain:.3f} {'higher' if higher else 'lower'} {column} (ratio winner/default {g.ratio:.3f}, "
            f"95% CI {ci}, {g.verdict})"
        )
    elif out.baseline is not None:
        lines.append("the winner is the default configuration")
    return lines


def front_title(trials: list[dict[str, Any]], objective: str | None = None) -> str:
    """``Pareto front, objective throughput`` and a line naming the model, the device and the run (from the trials'
    rows), so a chart shared alone says what it is."""
    models = ", ".join(dict.fromkeys(str(r["model"]) for r in trials if r.get("model")))
    device = next(
        (r.get("device_name") or r.get("device") for r in trials if r.get("device_name") or r.get("device")), None
    )
    run = next((r["run_id"] for r in trials if r.get("run_id") is not None), None)
    where = " ".join(p for p in (models, f"on {device}" if device else "", f"(run {run})" if run else "") if p)
    return (
        "Pareto front: throughput vs latency p99"
        + (f", objective {objective}" if objective else "")
        + (f"\n{where}" if where else "")
    )


def front_figure(rows: list[dict[str, Any]], trials: list[dict[str, Any]], objective: str | None = None):
    """Every measured trial (grey) and the Pareto front (labelled) on throughput vs p99 latency, titled
    (:func:`front_title`): a figure."""
    from accelbench.report.plots import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.7), constrained_layout=True)
    ok = [r for r in trials if r.get("status") == OK and r.get("latency_p99_ms") is not None]
    ax.scatter(
        [r["latency_p99_ms"] for r in ok], [r["throughput_samples_per_s"] for r in ok], c="0.75", s=14, label="trials"
    )
    xs = [r["latency_p99_ms"] for r in rows]
    ys = [r["throughput_samples_per_s"] for r in rows]
    ax.plot(xs, ys, "o-", color="tab:blue", label="Pareto front")
    for i, (r, x, y) in enumerate(zip(rows, xs, ys)):  # alternate above/below: near-equal points stay legible
        ax.annotate(
            f"{r['precision']} {mode_label(r)} bs{int(r['batch_size'])}",
            (x, y),
            fontsize=7,
            xytext=(4, 4 if i % 2 == 0 else -10),
            textcoords="offset points",
        )
    ax.set_xlabel("latency p99 (ms)")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(front_title(trials, objective), fontsize=9)
    ax.legend(loc="best", fontsize=8)
    return fig


def front_chart(rows: list[dict[str, Any]], trials: list[dict[str, Any]], path, objective: str | None = None) -> None:
    """:func:`front_figure` as a PNG at ``path``."""
    from accelbench.report.plots import pyplot

    fig = front_figure(rows, trials, objective)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def tune_blocks(run: dict, records: list[dict[str, Any]]) -> list[dict]:
    """The HTML/markdown report's blocks of a ``tune`` run: every trial, the Pareto front of the acceptable
    trials (the run's constraints) with the tune's winner, verdict, gain and command lines (column
    ``tune_summary``, written by ``accelbench tune``), and its chart."""
    from accelbench.report import charts
    from accelbench.report.blocks import charts_block, table_block
    from accelbench.studies import tune_search as ts

    doc = (run.get("spec") or {}).get("tune") or {}
    settings = ts.TuneSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})
    rows = [ts.as_trial(r, settings.workload) for r in records]  # a training step's latency is its step time
    front = ts.latest_front(rows, lambda r: ts.violation(r, settings) is None)
    chart = charts.svg(front_figure(front, rows, settings.objective)) if front else None
    shown = lambda rs: [{**r, "mode": mode_label(r)} for r in rs]  # noqa: E731  (fused / foreach in the mode cell)
    # the winner, verdict, gain and command `accelbench tune` printed, stored on the winner's last final trial
    summary = next((str(r["tune_summary"]).split("\n") for r in reversed(records) if r.get("tune_summary")), [])
    return [
        {"type": "notes", "title": "Winner", "lines": summary} if summary else None,
        table_block(shown(rows), view("tune", compact=True), "Trials"),
        table_block(shown(front), view("tune", compact=True), "Pareto front: throughput vs latency p99"),
        charts_block([{"title": "Pareto front", "svg": chart}] if chart else []),
    ]
