"""Multi-GPU commands: ``scale``, ``interconnect``, ``concurrent`` (parsing only; ``--gpus N`` of ``run`` and
``train`` is in their modules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, err_console, styled
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import DIST, STORE
from accelbench.cli.options import CONFIG, RESUME, Cost, How, Inputs, Launch, Output, What, int_list
from accelbench.core import kinds
from accelbench.core.errors import OK, ConfigError
from accelbench.core.options.train_lm import OPTIONS as LM_OPTIONS

WORKLOAD = typer.Option("inference", "--workload", "-w", help="inference (data parallel) or train (DDP steps).")
SCENARIO_OF = {"inference": "inference", "train": "train_step"}
# a language model's training step (-m hf:...) under scale: its sequence, tokens and DDP/FSDP2 options
LM_SCALE = ("seq_lens", "tokens", "activation_checkpointing", "parallel", "batches")


def _scenario(workload: str) -> str:
    if workload not in SCENARIO_OF:
        raise ConfigError("workload", workload, ", ".join(SCENARIO_OF))
    return SCENARIO_OF[workload]


def _scale_scenario(workload: str, layers: list[dict], lm_given: dict[str, Any]) -> str:
    """The scenario ``scale`` runs: a language model's training step (``train_lm``) for ``--workload train`` of
    ``-m hf:...``, else the workload's; the language-model options with an image classifier, or with inference,
    are a one-line config error."""
    from accelbench.training.lm_step import is_lm_spec

    name = _scenario(workload)
    models = next((m for layer in reversed(layers) if (m := layer.get("models") or layer.get("model"))), None)
    if is_lm_spec(models):
        if workload != "train":
            raise ConfigError("workload", workload, "train for a language model (-m hf:...)")
        return "train_lm"
    if lm_given:
        key = next(iter(lm_given))
        raise ConfigError(key, lm_given[key], "unset: it applies to a language model (-m hf:...) with --workload train")
    return name


def _print_sweep(rows: list[dict[str, Any]], title: str, workload: str) -> None:
    """The scaling table, the training settings, and one note per case that did not run (why, on how many ranks)."""
    from accelbench.report.scaling import scale_table
    from accelbench.report.table import case_notes

    if not rows:
        console.print("no cases ran")
        return
    console.print(title)
    a.print_table(scale_table(rows), wide=True)  # the study's every column, at its natural width (never squeezed)
    ok = [r for r in rows if r.get("status") == OK]
    if workload == "train" and ok:
        comm = any(r.get("comm_exposed_share") is not None for r in ok)
        console.print(
            f"optimizer {ok[0].get('optimizer')}, lr {ok[0].get('lr')}"
            + ("; comm share: the step with gradient all-reduce against the same step under no_sync()" if comm else "")
        )
    if ok and not any(r.get("scaling_efficiency") is not None for r in rows):
        console.print(
            "no 1-GPU result of these cases in the store yet: run with --gpus 1 (or accelbench scale) for speed-up"
        )
    for r in rows:
        for label, text in case_notes([r]):
            style = "yellow" if label in ("unsupported:", "skipped:", "flagged:") else "red"
            where = f" on {int(r['world_size'])} ranks" if r.get("world_size") is not None else ""
            (err_console if label == "error:" else console).print(styled(label, style, f" {text}{where}"))


@command()
def scale(
    gpus: str = typer.Option(
        "1,2", "--gpus", rich_help_panel=DIST, help="Process counts, e.g. 1,2,4 (GPUs; CPU processes without GPUs)."
    ),
    workload: str = WORKLOAD,
    what: What = What.take(),
    inputs: Inputs = Inputs.take(only=("data", "image_size")),
    how: How = How.take(only=("warmup_batches", "min_timed_batches", "min_time_s")),
    cost: Cost = Cost.take(),
    launch: Launch = Launch.take(only=("global_batch", "timeout_s")),
    config: Path | None = CONFIG,
    out: Output = Output.take(only=("db", "json_path")),
    plot: Path | None = typer.Option(
        None, "--plot", rich_help_panel=STORE, help="Save throughput vs GPUs as an image (needs matplotlib)."
    ),
    resume: bool = RESUME,
    lm_options: Given = declared(LM_OPTIONS, only=LM_SCALE),
) -> None:
    """Scaling study: the same sweep on 1, 2, 4, ... GPUs; speed-up and scaling efficiency, stored for plotting.
    A language model (-m hf:... --workload train) scales its training step under each --parallel strategy."""
    from accelbench import api
    from accelbench.report.scaling import plot_scaling

    counts = list(int_list("gpus", gpus, "process counts, e.g. 1,2,4"))
    flags = {**what.fields(), **inputs.fields(), **how.fields(), **cost.fields(), **lm_options.fields()}
    layers = a.layers(config, "sweep", flags)
    spec = api.spec(_scale_scenario(workload, layers, lm_options.fields()), *layers)
    opts = launch.options(spec.device, gpus=1)
    store = a.open_store(out.db, create=True)
    result = api.scale(spec, store, counts, opts, resume=resume)
    _print_sweep(result.rows, f"Run {result.run_id}: scaling study ({workload})", workload)
    if result.skipped_done:
        console.print(f"resumed run {result.run_id}: {result.skipped_done} cases were already done")
    if plot and result.rows:
        plot_scaling(result.rows, str(plot))
        console.print(f"wrote {plot}")
    a.finish(store, result.run_id, interrupted=result.interrupted, json_path=out.json_path, statuses=result.statuses)


@command()
def interconnect(
    gpus: int | None = typer.Option(
        None, "--gpus", help="Ranks (default: every visible GPU; 2 CPU processes without GPUs)."
    ),
    ops: str = typer.Option("all_reduce,all_gather,broadcast", "--ops", help="Collectives to time."),
    min_bytes: str = typer.Option("1K", "--min-bytes", help="Smallest message (nccl-tests -b)."),
    max_bytes: str | None = typer.Option(None, "--max-bytes", help="Largest message (default 1G on GPUs, 4M on CPUs)."),
    factor: int = typer.Option(2, "--factor", help="Size multiplier between steps (nccl-tests -f)."),
    warmup: int = typer.Option(
        5, "--warmup", help="Untimed iterations of each op and size before timing (nccl-tests -w)."
    ),
    iters: int = typer.Option(20, "--iters", help="Timed iterations of each op and size (nccl-tests -n)."),
    p2p_bytes: str = typer.Option("256M", "--p2p-bytes", help="Buffer copied between each GPU pair (0: skip)."),
    what: What = What.take(only=("device",)),
    launch: Launch = Launch.take(omit=("gpus", "global_batch")),
    cost: Cost = Cost.take(only=("idle_s",)),
    out: Output = Output.take(only=("db", "json_path")),
) -> None:
    """Interconnect: collective time, algorithm and bus bandwidth over sizes; GPU pair copies; NVLink/PCIe topology."""
    if gpus is not None and gpus < 1:
        a.fail(f"invalid --gpus {gpus}: allowed 1 or more ranks (default: every visible GPU)")
    import torch

    from accelbench import api
    from accelbench.report.scaling import collective_table, p2p_table
    from accelbench.scenarios.interconnect import parse_bytes, sizes_between

    device = what.device
    cuda = device != "cpu" and torch.cuda.is_available()
    n = gpus or (torch.cuda.device_count() if cuda else 2)
    try:
        sizes = sizes_between(parse_bytes(min_bytes), parse_bytes(max_bytes or ("1G" if cuda else "4M")), factor)
    except ValueError as exc:
        raise ConfigError("sizes", f"{min_bytes}..{max_bytes}", str(exc)) from None
    spec = api.spec(
        "interconnect",
        {
            "ops": tuple(o.strip() for o in ops.split(",") if o.strip()),
            "sizes": tuple(sizes),
            "warmup": warmup,
            "iters": iters,
            "p2p_bytes": parse_bytes(p2p_bytes),
            "device": device,
            "idle_s": cost.idle_s,
        },
    )
    opts = launch.options(device, gpus=n)
    store = a.open_store(out.db, create=True)
    result = api.interconnect(spec, store, opts)
    rows = store.records(result.run_id)
    console.print(f"Run {result.run_id}: collectives over {opts.world_size} ranks")
    console.print(collective_table(rows))
    table = p2p_table(rows)
    if table is not None:
        console.print(table)
    for r in rows:
        if r.get("status") != OK:
            err_console.print(styled(f"{r.get('status')}:", "red", f" {r.get('error')}"))
    a.finish(store, result.run_id, interrupted=result.interrupted, json_path=out.json_path, statuses=result.statuses)


@command()
def concurrent(
    models: str = typer.Option(
        ..., "--models", help="One job per model, e.g. resnet50,vit_b_16 (repeat a name for copies)."
    ),
    gpus_per_job: int = typer.Option(1, "--gpus-per-job", help="GPUs (processes) of each job; sets are disjoint."),
    sequential_gpus: int | None = typer.Option(
        None, "--sequential-gpus", help="GPUs per job when run alone (default: the same)."
    ),
    workload: str = WORKLOAD,
    what: What = What.take(omit=("model",)),
    inputs: Inputs = Inputs.take(only=("data", "image_size")),
    how: How = How.take(only=("warmup_batches", "min_timed_batches", "min_time_s")),
    cost: Cost = Cost.take(only=("idle_s",)),
    launch: Launch = Launch.take(only=("timeout_s",)),
    config: Path | None = CONFIG,
    out: Output = Output.take(only=("db", "resume")),
) -> None:
    """Concurrent jobs: K jobs at once on disjoint GPU sets vs one after another (total time compared)."""
    from accelbench import api
    from accelbench.report.scaling import concurrent_table

    names = [m.strip() for m in models.split(",") if m.strip()]
    base = {**what.fields(), **inputs.fields(), **how.fields(), **cost.fields()}
    specs = [api.spec(_scenario(workload), *a.layers(config, "sweep", {**base, "models": m})) for m in names]
    opts = launch.options(specs[0].device if specs else None, gpus=gpus_per_job)
    store = a.open_store(out.db, create=True)
    result = api.concurrent(specs, gpus_per_job, store, opts, sequential_gpus=sequential_gpus, resume=out.resume)
    console.print(f"Run {result.run_id}: {len(specs)} jobs, concurrent vs sequential")
    console.print(concurrent_table(result.rows))
    summary = {r["schedule"]: r for r in result.rows if r.get("workload") == kinds.CONCURRENT_SUMMARY}
    for name in ("concurrent", "sequential"):
        if name in summary:
            r, work = summary[name], summary[name].get("work_time_s")
            console.print(f"{name}: wall {r['makespan_s']:.1f} s" + (f", work time {work:.2f} s" if work else ""))
    if "comparison" in summary:
        c, over = summary["comparison"], summary["concurrent"].get("overlap_fraction")
        work = f"{c['work_speedup']:.2f}x on work time, " if c.get("work_speedup") is not None else ""
        console.print(
            f"concurrent vs sequential: {work}{c['makespan_speedup']:.2f}x on wall time"
            + (f" (timed windows overlapped {100 * over:.0f}%)" if over is not None else "")
        )
    if result.skipped_done:
        console.print(f"resumed run {result.run_id}: {result.skipped_done} phases were already done")
    a.finish(
        store, result.run_id, interrupted=result.interrupted, statuses=result.statuses, stopped_in=result.stopped_in
    )
