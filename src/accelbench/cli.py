"""The ``accelbench`` command line. It only parses: every command calls a library function."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from accelbench.errors import AccelbenchError

app = typer.Typer(add_completion=False, no_args_is_help=False, help=__doc__ and "How fast, how efficient and how costly is this model on this hardware, and why.")
# Wide tables when piped (rich falls back to 80 columns without a terminal).
console = Console(width=None if sys.stdout.isatty() else 200)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200)

DB_OPTION = typer.Option("accelbench.db", "--db", help="SQLite results store.")


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit."""
    err_console.print(f"[red]error:[/] {message}", highlight=False)
    raise typer.Exit(code)


def open_store(db: Path):
    """The results store at ``db``; a one-line error (exit 2) when there is none (never creates one)."""
    from accelbench.store import Store

    if not db.exists():
        fail(f"no results store at {db}")
    return Store(db)


def open_run(store, run_id: Optional[int]) -> dict:
    """Run ``run_id`` of ``store`` (None: the newest); a one-line error (exit 2) when it does not exist."""
    try:
        return store.run(run_id)
    except KeyError as exc:
        fail(str(exc.args[0]))


@app.callback(invoke_without_command=True)
def _root(ctx: typer.Context) -> None:
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())


def _progress_cb(progress, task):
    def cb(i: int, n: int, case, rec) -> None:
        progress.update(task, total=n, completed=i, description=f"{case.model} bs={case.batch_size} {case.precision} {case.mode}")
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
) -> None:
    """Inference sweep: model x batch size x precision x mode, on real images, stored with provenance."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from accelbench.runner import oom_boundary, resolve_device, run_sweep, write_json
    from accelbench.spec import build_spec, load_toml
    from accelbench.store import Store

    flags = dict(models=model, batch_sizes=batch_sizes, precisions=precisions, modes=modes, channels_last=channels_last,
                 images=images, data=data, image_size=image_size, device=device, include_transfer=include_transfer,
                 warmup_batches=warmup_batches, min_timed_batches=min_timed_batches, min_time_s=min_time_s,
                 telemetry_period_ms=telemetry_period_ms, idle_s=idle_s, price_per_hour=price_per_hour, kwh_price=kwh_price)
    try:
        layers = [load_toml(config)] if config else []
        dev_name = flags["device"] or next((layer.get("device") for layer in layers if layer.get("device")), "auto")
        dev = resolve_device(dev_name)
        spec = build_spec(*layers, flags, cuda=dev.type == "cuda")
        if gpus is not None or _launched_as_rank():  # data parallel: accelbench.cli_multi
            from accelbench.cli_multi import options, run_data_parallel

            opts = options(spec, gpus or 1, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                           global_batch=global_batch, timeout_s=timeout_s)
            return run_data_parallel(spec, db, json_path, opts)
        store = Store(db)
    except AccelbenchError as exc:
        fail(str(exc))
    console.print(f"accelbench run: {', '.join(spec.models)} on {dev} ({spec.data}, {spec.images} images/pass), db {db}")
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)
        out = run_sweep(spec, store, resume=resume, on_case=_progress_cb(progress, task))
    _print_outcome(out, store, oom_boundary)
    if json_path:
        write_json(json_path, store, out.run_id)
        console.print(f"wrote {json_path}")
    if out.interrupted:
        err_console.print(f"interrupted: {len(out.records)} finished cases stored in run {out.run_id}; rerun with --resume")
        raise typer.Exit(130)


def _launched_as_rank() -> bool:
    from accelbench.distributed.ranks import rank_info

    return rank_info() is not None


def _print_outcome(out, store, oom_boundary) -> None:
    from accelbench.report.table import results_table

    records = store.cases(out.run_id).to_dict("records")
    if not records:
        console.print("no cases ran")
        return
    r0 = records[0]
    console.print(results_table(records, title=f"Run {out.run_id}: {r0.get('data_description') or r0['data']}"))
    weights = {(r["model"], r.get("weights")) for r in records if r.get("weights")}
    for name, w in sorted(weights):
        console.print(f"{name}: weights {w}" + (" (random weights: accuracy not meaningful, not reported)" if w == "random" else ""))
    if out.skipped_done:
        console.print(f"resumed run {out.run_id}: {out.skipped_done} cases were already done")
    for (m, p, mode), b in oom_boundary(records).items():
        if b["smallest_oom"] is not None:
            console.print(f"OOM boundary {m} {p} {mode}: largest batch that ran {b['largest_ok']}, out of memory at {b['smallest_oom']}")
    from accelbench.cli_telemetry import print_notes

    print_notes(records, store.run(out.run_id)["env"])  # idle power, energy/GPM sources, validity flags
    console.print(f"stored run {out.run_id} in {store.path}")


@app.command()
def results(run_id: Optional[int] = typer.Option(None, "--run", help="Run id (default: newest)."), db: Path = DB_OPTION,
            all_runs: bool = typer.Option(False, "--runs", help="List the runs instead.")) -> None:
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

    console.print(", ".join(list_models()))
    console.print("also: timm:<name> (pip install 'accelbench[timm]'), package.module:factory")


# Commands defined in other modules (cli_<topic>.py, each doing `from accelbench.cli import app`)
# register themselves when imported: one import line per module below.
import accelbench.cli_telemetry  # noqa: E402,F401  (cost, telemetry)
import accelbench.cli_profile  # noqa: E402,F401  (accelbench profile)
import accelbench.cli_train  # noqa: E402,F401  (accelbench train, accelbench input-pipeline)
import accelbench.cli_multi  # noqa: E402,F401  (scale, interconnect, concurrent)


def _stop_like_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # `timeout`, `kill` and a batch scheduler's time limit send SIGTERM: stop as Ctrl-C does (finished cases
    # are stored already; the run is marked interrupted and `--resume` continues it)
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        app()
    except AccelbenchError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(2)


if __name__ == "__main__":
    main()
