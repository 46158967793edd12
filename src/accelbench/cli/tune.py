"""``accelbench tune``: find the best configuration of one model (parsing only; the work is
:func:`accelbench.api.tune`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, err_console
from accelbench.cli.help import HOW, STORE, WHAT, complete_backends, complete_precisions
from accelbench.cli.options import Cost, How, Inputs, Label, Output, What


@command()
def tune(
    what: What = What.take(only=("model", "channels_last", "images", "device")),
    workload: str = typer.Option(
        "inference",
        "--workload",
        rich_help_panel=WHAT,
        help="inference (each trial a run case) or train (each trial accelbench train's training step: samples/s of the step; latency = step time p50).",
    ),
    objective: str = typer.Option(
        "throughput",
        "--objective",
        rich_help_panel=WHAT,
        help="throughput (samples/s), latency (p50 ms), cost (USD per 1,000 samples) or energy (J per sample).",
    ),
    budget_s: float = typer.Option(
        600.0,
        "--budget-s",
        rich_help_panel=WHAT,
        help="Wall seconds the tune may take, kept to +10 % (compilation included; README: the budget).",
    ),
    max_latency_p99_ms: float | None = typer.Option(
        None, "--max-latency-p99-ms", rich_help_panel=WHAT, help="Constraint: p99 latency per batch (ms)."
    ),
    max_memory_bytes: int | None = typer.Option(
        None,
        "--max-memory-bytes",
        rich_help_panel=WHAT,
        help="Constraint: peak GPU memory (bytes; on a CPU the process RSS).",
    ),
    min_top1_ratio: float | None = typer.Option(
        None,
        "--min-top1-ratio",
        rich_help_panel=WHAT,
        help="Constraint: top-1 / fp32 top-1 (e.g. 0.99), when the model reports accuracy.",
    ),
    batch_sizes: str | None = typer.Option(
        None,
        "--batch-sizes",
        "-b",
        rich_help_panel=WHAT,
        help="Batch sizes to try (default: bracketing and bisection; latency: 1).",
    ),
    precisions: str | None = typer.Option(
        None,
        "--precisions",
        "-p",
        rich_help_panel=WHAT,
        autocompletion=complete_precisions,
        help="Precisions, comma-separated: {precisions}. Default: {tune_precisions}.",
    ),
    modes: str | None = typer.Option(
        None,
        "--modes",
        rich_help_panel=WHAT,
        autocompletion=complete_backends,
        help="Backends, comma-separated: {backends}. Default: {tune_modes}.",
    ),
    max_batch: int | None = typer.Option(
        None, "--max-batch", rich_help_panel=WHAT, help="Largest batch bracketing tries (CUDA 1024, CPU 256)."
    ),
    optimizer: str | None = typer.Option(
        None, "--optimizer", rich_help_panel=WHAT, help="--workload train: sgd (default) or adamw."
    ),
    fused_optimizers: str | None = typer.Option(
        None,
        "--fused-optimizers",
        rich_help_panel=WHAT,
        help="--workload train: optimizer kernels to search, on (fused), off (foreach) or default (default: CUDA on,off; CPU default).",
    ),
    screen_time_s: float = typer.Option(
        0.3, "--screen-time-s", rich_help_panel=HOW, help="Shortest timed window (s); each halving rung doubles it."
    ),
    final_rounds: int = typer.Option(
        2, "--final-rounds", rich_help_panel=HOW, help="Interleaved rounds of the final candidates."
    ),
    final_repeats: int = typer.Option(
        3,
        "--final-repeats",
        rich_help_panel=HOW,
        help="Windows per final round (rounds x repeats windows per candidate).",
    ),
    inputs: Inputs = Inputs.take(only=("data", "image_size")),
    how: How = How.take(only=("warmup_batches", "min_timed_batches", "cudnn_benchmark", "seed")),
    cost: Cost = Cost.take(),
    out_toml: Path | None = typer.Option(
        None,
        "--out-toml",
        rich_help_panel=STORE,
        help="Write the winner as a TOML file for accelbench run -c (train -c with --workload train).",
    ),
    plot: Path | None = typer.Option(
        None, "--plot", rich_help_panel=STORE, help="Write the Pareto front (throughput vs p99) as a PNG."
    ),
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        rich_help_panel=WHAT,
        help="TOML file (top level, or a [sweep] table; [train] with --workload train); flags override it.",
    ),
    out: Output = Output.take(),
    label: Label = Label.take(),
) -> None:
    """Search precisions x backends x batch sizes for the best configuration within a time budget."""
    from accelbench import api
    from accelbench.core.config import parse_list
    from accelbench.studies.tune_search import TuneSettings

    lists = {
        k: parse_list(k, v) if v is not None else None
        for k, v in (("precisions", precisions), ("modes", modes), ("batch_sizes", batch_sizes))
    }
    train = workload == "train"
    if optimizer is not None and not train:
        a.fail("--optimizer applies to --workload train")
    settings = TuneSettings(
        objective=objective,
        budget_s=budget_s,
        max_latency_p99_ms=max_latency_p99_ms,
        max_memory_bytes=max_memory_bytes,
        min_top1_ratio=min_top1_ratio,
        max_batch=max_batch,
        screen_time_s=screen_time_s,
        final_rounds=final_rounds,
        final_repeats=final_repeats,
        workload=workload,
        fused_optimizers=_kernels(fused_optimizers),
        **{k: tuple(v) if v else None for k, v in lists.items()},
    )
    flags = {
        **what.fields(),
        **inputs.fields(),
        **how.fields(),
        **cost.fields(),
        **({"optimizer": optimizer} if train else {}),
    }
    layers = a.layers(config, "train" if train else "sweep", flags)
    named = label.of(layers)
    spec = api.spec("train_step" if train else "inference", *layers)
    where, store = a.before_run(spec, None, out.db, outputs=[out.json_path, out_toml, plot])
    console.print(
        f"accelbench tune: {', '.join(spec.models)} ({workload}) on {where}, objective {objective}, "
        f"budget {budget_s:g} s, db {out.db}"
    )
    result = api.tune(spec, store, settings, resume=out.resume, on_trial=_progress, name=named.name, tags=named.tags)
    _report(result, store, wide=out.wide, out_toml=out_toml, plot=plot, json_path=out.json_path)


def _kernels(text: str | None):
    """``--fused-optimizers on,off,default`` as (True, False, None); None when not given."""
    from accelbench.core.config import parse_list
    from accelbench.core.errors import ConfigError

    if text is None:
        return None
    words = {"on": True, "off": False, "default": None}
    got = parse_list("fused_optimizers", text)
    bad = [w for w in got if w not in words]
    if bad:
        raise ConfigError("fused_optimizers", ",".join(bad), "on, off, default")
    return tuple(words[w] for w in got)


def _progress(row: dict) -> None:
    from accelbench.report.tune import mode_label

    thr = row.get("throughput_samples_per_s")
    figure = f"{thr:,.1f} samples/s" if thr else str(row.get("error") or "")
    console.print(
        f"  {row.get('tune_stage')}: {row['precision']} {mode_label(row)} batch {int(row['batch_size'])} "
        f"{row['status']} {figure}"
    )


def _report(out, store, *, wide: bool, out_toml, plot, json_path) -> None:
    """Print the result :func:`accelbench.api.tune` made (tables, summary, command), write the outputs asked for
    (TOML, chart, JSON); then the exit code of the contract."""
    from accelbench import api
    from accelbench.report import tune as rt

    if wide:
        a.print_table(rt.trials_table(out.trials), wide=True)
    if out.pareto:
        a.print_table(rt.front_table(out.pareto, compact=not wide), wide=wide)
    if out.pruned:
        console.print("pruned (slower at every batch tried): " + ", ".join(out.pruned))
    for line in [*out.summary, *out.notes]:
        console.print(line)
    for line in out.explain:
        console.print("  what got it there: " + line)
    if out.command:
        a.print_command("run it: ", out.command)
    if out_toml and out.winner:
        out_toml.write_text(out.toml_text())
        console.print(f"wrote {out_toml}")
    if plot and out.pareto:
        rt.front_chart(out.pareto, out.trials, plot, getattr(out.settings, "objective", None))
        console.print(f"wrote {plot}")
    if json_path:
        a.write_output(json_path, lambda path: api.export_json(store, out.run_id, path, {"tune": out.json_section()}))
        console.print(f"wrote {'the JSON to stdout' if a.is_stdout(json_path) else json_path}")
    console.print(
        f"tune run {out.run_id}: {len(out.trials)} trials ({out.skipped_done} read back), "
        f"{out.spent_s:.1f} s of the {out.settings.budget_s:g} s budget, stored in {store.path}"
    )
    if out.interrupted:
        err_console.print(f"interrupted: the trials so far are stored in run {out.run_id}; rerun with --resume")
    raise typer.Exit(out.exit_code)
