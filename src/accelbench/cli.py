"""The ``accelbench`` command line. It only parses: every command calls a library function.

Every command follows one exit-code contract (:mod:`accelbench.errors`): 0 every case ran, 1 at least
one case ended in ``error`` (all results stored), 2 a usage or input error before anything ran, 130
interrupted (resumable). Output goes through rich consoles with markup off, so text from users and
exceptions (``[timm]``, ``[enforce fail at ...]``) prints as it is; styles are applied explicitly.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.text import Text

from accelbench.errors import EXIT_INTERRUPTED, EXIT_USAGE, AccelbenchError, exit_code

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None,
                  pretty_exceptions_enable=False,
                  help="How fast, how efficient and how costly is this model on this hardware, and why.")
# Wide tables when piped (rich falls back to 80 columns without a terminal). Markup off: nothing a user or an
# exception wrote is ever read as rich markup.
console = Console(width=None if sys.stdout.isatty() else 200, markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200, markup=False, highlight=False,
                      soft_wrap=True)

DB_OPTION = typer.Option("accelbench.db", "--db", help="SQLite results store.")
WIDE_OPTION = typer.Option(False, "--wide", help="Every column (default: a compact table that fits 80 columns).")


def styled(label: str, style: str, rest: str = "") -> Text:
    """``label`` in ``style`` followed by plain ``rest`` (never parsed as markup)."""
    return Text.assemble((label, style), rest)


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print a one-line error and exit (default 2: a usage or input error)."""
    err_console.print(styled("error:", "red", " " + " ".join(str(message).split())))
    raise typer.Exit(code)


def open_store(db: Path):
    """The results store at ``db``; a one-line error (exit 2) when there is none (never creates one)."""
    from accelbench.store import Store

    if not db.exists():
        fail(f"no results store at {db}")
    try:
        return Store(db)
    except AccelbenchError as exc:
        fail(str(exc))


def open_run(store, run_id: Optional[int]) -> dict:
    """Run ``run_id`` of ``store`` (None: the newest); a one-line error (exit 2) when it does not exist."""
    try:
        return store.run(run_id)
    except KeyError as exc:
        fail(str(exc.args[0]))


def finish(store, run_id: int, *, interrupted: bool = False, json_path: Optional[Path] = None,
           statuses: Optional[list] = None) -> None:
    """End a command that ran cases: failures counted, JSON written, the next commands named, exit code.

    Args:
        statuses: the statuses of the rows this command stored (default: every row of the run).
    Raises:
        typer.Exit: always, with the code of :func:`accelbench.errors.exit_code`.
    """
    from accelbench.runner import write_json

    if statuses is None:
        statuses = list(store.cases(run_id).get("status", []))
    failed = sum(s == "error" for s in statuses)
    if failed:
        err_console.print(styled("failed:", "red", f" {failed} of {len(statuses)} cases ended in error (their reasons "
                                 "are above); every result is stored"))
    if json_path:
        write_json(json_path, store, run_id)
        console.print(f"wrote {json_path}")
    db = "" if Path(store.path).name == "accelbench.db" and Path(store.path).parent == Path(".") else f" --db {store.path}"
    if interrupted:
        err_console.print(f"interrupted: {len(statuses)} finished cases stored in run {run_id}; rerun with --resume")
    console.print(f"run {run_id} stored in {store.path}. Next: accelbench results --run {run_id}{db} (every column) | "
                  f"accelbench export --run {run_id}{db} --format csv")
    raise typer.Exit(exit_code(statuses, interrupted))


def _version(value: bool) -> None:
    if value:
        from accelbench import __version__

        console.print(f"accelbench {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context,
          version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())


def progress_bar():
    """The sweep progress bar: case, bar, done/total, elapsed and remaining time (from the cases so far)."""
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                               TimeRemainingColumn)

    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True)


def progress_cb(progress, task):
    """An ``on_case`` callback that moves ``task`` of ``progress`` and names the running case."""
    from accelbench.report.table import case_label

    def cb(i: int, n: int, case, rec) -> None:
        label = case_label({"model": case.model, "batch_size": case.batch_size, "precision": case.precision,
                            "mode": case.mode})
        progress.update(task, total=n, completed=i, description=label)
    return cb


@app.command()
def run(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model(s), comma-separated: resnet50, cifar-resnet20, timm:<name>, pkg.mod:factory."),
    batch_sizes: Optional[str] = typer.Option(None, "--batch-sizes", "-b", help="e.g. 1,8,32 (GPU default 1..1024, CPU default 1,8,32)."),
    precisions: Optional[str] = typer.Option(None, "--precisions", "-p", help="fp32,tf32,amp-fp16,amp-bf16,fp16,bf16"),
    modes: Optional[str] = typer.Option(None, "--modes", help="eager,compile,cudagraphs,max-autotune"),
    channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="Default: where it helps (convolutions on CUDA below fp32)."),
    images: Optional[int] = typer.Option(None, "--images", "-n", help="Images per pass (GPU default 1000, CPU 32)."),
    data: Optional[str] = typer.Option(None, "--data", help="cifar10-test (default), synthetic, or an ImageFolder dir/.tar/.tar.gz."),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Input side in pixels (default: the model's, 224 for ImageNet models)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N"),
    include_transfer: Optional[bool] = typer.Option(None, "--include-transfer/--no-include-transfer", help="Time the host-to-device copy too."),
    warmup_batches: Optional[int] = typer.Option(None, "--warmup-batches"),
    min_timed_batches: Optional[int] = typer.Option(None, "--min-timed-batches"),
    min_time_s: Optional[float] = typer.Option(None, "--min-time-s"),
    telemetry_period_ms: Optional[float] = typer.Option(None, "--telemetry-period-ms", help="Telemetry sampling period (default 100; 0 = sampler off)."),
    idle_s: Optional[float] = typer.Option(None, "--idle-s", help="Idle-power measurement before the sweep, s (default 3; 0 = skip)."),
    price_per_hour: Optional[float] = typer.Option(None, "--price-per-hour", help="USD per device-hour (default: shipped price list)."),
    kwh_price: Optional[float] = typer.Option(None, "--kwh-price", help="USD per kWh: adds the electricity cost."),
    db: Path = DB_OPTION,
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the run (spec, environment, results) as JSON."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="Sweep TOML file; flags override it."),
    resume: bool = typer.Option(False, "--resume", help="Continue the newest unfinished run of the same sweep."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Data parallel over N GPUs (N CPU processes without GPUs) through torchrun."),
    nnodes: int = typer.Option(1, "--nnodes", help="With --gpus: nodes (torchrun --nnodes); run the same command on each."),
    node_rank: int = typer.Option(0, "--node-rank", help="With --gpus: this node's index (torchrun --node-rank)."),
    rdzv_endpoint: Optional[str] = typer.Option(None, "--rdzv-endpoint", help="With --gpus: rendezvous host:port (torchrun)."),
    global_batch: bool = typer.Option(False, "--global-batch", help="With --gpus: batch sizes are global, split over ranks."),
    timeout_s: float = typer.Option(900.0, "--timeout-s", help="With --gpus: seconds a case may run before its ranks are stopped."),
    skip_bad_images: Optional[bool] = typer.Option(None, "--skip-bad-images", help="Drop image files that do not decode (counted) instead of stopping."),
    wide: bool = WIDE_OPTION,
) -> None:
    """Inference sweep: model x batch size x precision x mode, on real images, stored with provenance."""
    from accelbench.runner import resolve_device, run_sweep
    from accelbench.spec import build_spec, load_toml
    from accelbench.store import Store

    flags = dict(models=model, batch_sizes=batch_sizes, precisions=precisions, modes=modes, channels_last=channels_last,
                 images=images, data=data, image_size=image_size, device=device, include_transfer=include_transfer,
                 warmup_batches=warmup_batches, min_timed_batches=min_timed_batches, min_time_s=min_time_s,
                 telemetry_period_ms=telemetry_period_ms, idle_s=idle_s, price_per_hour=price_per_hour, kwh_price=kwh_price,
                 skip_bad_images=skip_bad_images)
    try:
        layers = [load_toml(config)] if config else []
        dev_name = flags["device"] or next((layer.get("device") for layer in layers if layer.get("device")), "auto")
        dev = resolve_device(dev_name)
        spec = build_spec(*layers, flags, cuda=dev.type == "cuda")
        if gpus is not None or _launched_as_rank():  # data parallel: accelbench.cli_multi
            from accelbench.cli_multi import options, run_data_parallel

            opts = options(spec, gpus or 1, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                           global_batch=global_batch, timeout_s=timeout_s)
            return run_data_parallel(spec, db, json_path, opts, resume=resume)
        store = Store(db)
    except AccelbenchError as exc:
        fail(str(exc))
    console.print(f"accelbench run: {', '.join(spec.models)} on {dev} ({spec.data}, {spec.images} images/pass), db {db}")
    with progress_bar() as progress:
        task = progress.add_task("checking the models and data", total=None)
        out = run_sweep(spec, store, resume=resume, on_case=progress_cb(progress, task))
    print_outcome(out.run_id, store, wide=wide, resumed=out.skipped_done)
    finish(store, out.run_id, interrupted=out.interrupted, json_path=json_path,
           statuses=[r["status"] for r in out.records])


def _launched_as_rank() -> bool:
    from accelbench.distributed.ranks import rank_info

    return rank_info() is not None


def print_table(table, wide: bool = False) -> None:
    """Print a results table; a wide one at its natural width (never squeezed into the terminal)."""
    from accelbench.report.table import natural_width

    if not wide:
        console.print(table)
        return
    width = console.width
    console.width = max(width, natural_width(table, console))  # Console.print caps its width argument here
    try:
        console.print(table, crop=False)
    finally:
        console.width = width


def print_outcome(run_id: int, store, *, wide: bool = False, resumed: int = 0, table=None) -> None:
    """The run's table (compact unless ``wide``), the weights used, the OOM boundary, and notes naming each
    failed or flagged case."""
    from accelbench.cli_telemetry import print_notes
    from accelbench.report.table import results_table
    from accelbench.runner import oom_boundary

    records = store.cases(run_id).to_dict("records")
    if not records:
        console.print("no cases ran")
        return
    r0 = records[0]
    models = ", ".join(dict.fromkeys(str(r.get("model")) for r in records))
    title = f"Run {run_id}: {models} on {r0.get('device_name') or r0.get('device')} | {r0.get('data_description') or r0.get('data')}"
    console.print(title)  # above the table, not its title: a title wraps at the table's width
    print_table((table or results_table)(records, compact=not wide), wide)
    weights = {(str(r["model"]), str(r["weights"])) for r in records if isinstance(r.get("weights"), str)}
    for name, w in sorted(weights):
        console.print(f"{name}: weights {w}" + (" (random weights: accuracy not meaningful, not reported)" if w == "random" else ""))
    if resumed:
        console.print(f"resumed run {run_id}: {resumed} cases were already done")
    for (m, p, mode), b in oom_boundary(records).items():
        if b["smallest_oom"] is not None:
            console.print(f"OOM boundary {m} {p} {mode}: largest batch that ran {b['largest_ok']}, out of memory at {b['smallest_oom']}")
    print_notes(records, store.run(run_id)["env"])  # idle power, energy/GPM sources, failures, validity flags


@app.command()
def results(run_id: Optional[int] = typer.Option(None, "--run", help="Run id (default: newest)."), db: Path = DB_OPTION,
            all_runs: bool = typer.Option(False, "--runs", help="List the runs instead."),
            compact: bool = typer.Option(False, "--compact", help="The compact table of run/train (default: every column).")) -> None:
    """Print stored results."""
    from accelbench.report.table import results_table, runs_table

    store = open_store(db)
    if all_runs:
        console.print(runs_table(store.runs()))
        return
    run = open_run(store, run_id)
    records = store.cases(run["run_id"]).to_dict("records")
    env = run["env"]
    console.print(f"run {run['run_id']} ({run['kind']}, {run['status']}) on {env.get('device_name')} | torch {env.get('torch')} | commit {env.get('git_commit')}")
    from accelbench.report import train as train_report

    by_kind = {"training": train_report.sweep_table, "input-pipeline": train_report.pipeline_table}
    if run["kind"] == "convergence":
        console.print(train_report.summary_table(records))
    elif run["kind"] in ("inference", "training"):
        table = by_kind.get(run["kind"], results_table)
        print_table(table(records, compact=compact), not compact)
        from accelbench.cli_telemetry import print_notes

        print_notes(records, env)
    else:
        console.print(by_kind.get(run["kind"], results_table)(records))


@app.command()
def export(run_id: Optional[int] = typer.Option(None, "--run", help="Run id (default: newest)."),
           fmt: str = typer.Option("csv", "--format", "-f", help="csv or json"),
           output: Optional[Path] = typer.Option(None, "--output", "-o", help="File (default: stdout)."),
           db: Path = DB_OPTION) -> None:
    """Export one run's results as CSV (one row per case) or JSON (spec, environment, results)."""
    from accelbench.runner import write_json

    if fmt not in ("csv", "json"):
        fail(f"invalid format {fmt!r}: allowed csv, json")
    store = open_store(db)
    rid = open_run(store, run_id)["run_id"]
    if fmt == "json":
        target = output or Path("/dev/stdout")
        write_json(target, store, rid)
    else:
        text = store.cases(rid).to_csv(index=False)
        (output.write_text(text) if output else sys.stdout.write(text))


@app.command("models")
def models_cmd() -> None:
    """List model names accepted by --model."""
    from accelbench.models import list_models

    console.print(", ".join(list_models()), soft_wrap=True)
    console.print("also: timm:<name> (pip install 'accelbench[timm]'), package.module:factory")


# Commands defined in other modules (cli_<topic>.py, each doing `from accelbench.cli import app`)
# register themselves when imported: one import line per module below.
import accelbench.cli_telemetry  # noqa: E402,F401  (cost, telemetry)
import accelbench.cli_profile  # noqa: E402,F401  (accelbench profile)
import accelbench.cli_train  # noqa: E402,F401  (accelbench train, accelbench input-pipeline)
import accelbench.cli_multi  # noqa: E402,F401  (scale, interconnect, concurrent)


def _stop_like_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt


def _click_exceptions() -> tuple[tuple, tuple]:
    """``(abort classes, usage-error classes)`` of the click typer runs on: recent typer vendors click as
    ``typer._click``, older typer uses the ``click`` package."""
    import importlib

    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass
    aborts = tuple({getattr(m, "Abort", typer.Abort) for m in mods} | {typer.Abort})
    return aborts, tuple({m.ClickException for m in mods})


def main(argv: Optional[list[str]] = None) -> None:
    """Entry point: run the app and exit with the contract's code (:mod:`accelbench.errors`).

    Every error that escapes a command is one line on stderr: an input error (:class:`AccelbenchError`) or a
    usage error (click's: unknown flag, bad value) exits 2; Ctrl-C before any case ran exits 130; an
    unexpected exception (a bug) exits 1, and ``ACCELBENCH_TRACEBACK=1`` shows its traceback.
    """
    import os

    aborts, usage_errors = _click_exceptions()
    # `timeout`, `kill` and a batch scheduler's time limit send SIGTERM: stop as Ctrl-C does (finished cases
    # are stored already; the run is marked interrupted and `--resume` continues it)
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="accelbench")
        code = rv if isinstance(rv, int) else 0
    except AccelbenchError as exc:
        err_console.print(styled("error:", "red", " " + " ".join(str(exc).split())))
        code = EXIT_USAGE
    except aborts:
        err_console.print("interrupted: nothing was stored")
        code = EXIT_INTERRUPTED
    except usage_errors as exc:
        where = getattr(getattr(exc, "ctx", None), "command_path", "accelbench")
        err_console.print(styled("error:", "red", f" {' '.join(exc.format_message().split())} (see {where} --help)"))
        code = EXIT_USAGE
    except Exception as exc:
        if os.environ.get("ACCELBENCH_TRACEBACK"):
            raise
        from accelbench.measure import one_line

        err_console.print(styled("internal error:", "red", f" {one_line(exc)} (a bug: please report it; "
                                 "ACCELBENCH_TRACEBACK=1 shows the traceback)"))
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
