"""The Typer app, its consoles, the options every command shares (defined once), and what every command
does at its end (the outcome's table and notes, the exit code). Command modules import this one only.

Every command follows one exit-code contract (:mod:`accelbench.core.errors`): 0 every case ran, 1 at least
one case ended in ``error`` (all results stored), 2 a usage or input error before anything ran, 130
interrupted (resumable). Output goes through rich consoles with markup off, so text from users and
exceptions (``[timm]``, ``[enforce fail at ...]``) prints as it is; styles are applied explicitly.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.text import Text

from accelbench.core.errors import EXIT_CASE_ERRORS, AccelbenchError, OutputError, exit_code

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None, pretty_exceptions_enable=False,
                  help="How fast, how efficient and how costly is this model on this hardware, and why.")
# Wide tables when piped (rich falls back to 80 columns without a terminal). Markup off: nothing a user or an
# exception wrote is ever read as rich markup.
console = Console(width=None if sys.stdout.isatty() else 200, markup=False, highlight=False, soft_wrap=True)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 200, markup=False, highlight=False,
                      soft_wrap=True)

def command(name: str | None = None):
    """``@app.command`` whose input errors end as one line and exit 2 (or the error's ``exit_code``), and whose Ctrl-C
    before a run exists says nothing was stored (exit 130), also when called directly (CliRunner, a notebook)."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except AccelbenchError as exc:
                fail(str(exc), exc.exit_code)
            except KeyboardInterrupt:  # a sweep turns Ctrl-C into an interrupted run: this came before one
                err_console.print("interrupted: nothing was stored")
                raise typer.Exit(130) from None

        return app.command(name)(wrapped)

    return deco


# Options shared by the commands (typer reads these objects per command). -------------------------------
MODEL = typer.Option(None, "--model", "-m", help="Model(s), comma-separated: resnet50, cifar-resnet20, timm:<name>, pkg.mod:factory (accelbench models lists them).")
BATCH = typer.Option(None, "--batch-sizes", "-b", help="Batch sizes, e.g. 1,8,32 (per GPU with --gpus, global with --global-batch).")
PREC = typer.Option(None, "--precisions", "-p", help="fp32,tf32,amp-fp16,amp-bf16,fp16,bf16,int8,int8-dynamic,fp8,fp8-tensor")
MODES = typer.Option(None, "--modes", help="Backends: eager, compile, compile-freeze (Inductor freezing), reduce-overhead(-freeze), max-autotune(-freeze), max-autotune-no-cudagraphs, cudagraphs, onnxruntime")
CUDNN = typer.Option(None, "--cudnn-benchmark/--no-cudnn-benchmark", help="torch.backends.cudnn.benchmark during each case (default: torch's, off); recorded in every row.")
CL = typer.Option(None, "--channels-last/--no-channels-last", help="Default: where it helps (convolutions on CUDA below fp32).")
IMAGES = typer.Option(None, "--images", "-n", help="Images per pass (split over the ranks with --gpus).")
DATA = typer.Option(None, "--data", help="cifar10-test, cifar10-train-5k, synthetic, or an ImageFolder dir/.tar/.tar.gz.")
SIZE = typer.Option(None, "--image-size", help="Input side in pixels (default: the model's).")
DEVICE = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N")
WARM = typer.Option(None, "--warmup-batches", help="Untimed steps before timing.")
MIN_B = typer.Option(None, "--min-timed-batches", help="Timed steps run until this many steps ...")
MIN_T = typer.Option(None, "--min-time-s", help="... and this many seconds are reached.")
REPEATS = typer.Option(None, "--repeats", help="Timed windows per case (default 1); 2 or more give 95% confidence intervals, 5 or more a compare verdict.")
TELEMETRY = typer.Option(None, "--telemetry-period-ms", help="Telemetry sampling period (default 100; 0 = sampler off).")
IDLE = typer.Option(None, "--idle-s", help="Idle-power measurement before the sweep, s (default 3; 0 = skip).")
PRICE = typer.Option(None, "--price-per-hour", help="USD per device-hour (default: the shipped price list).")
KWH = typer.Option(None, "--kwh-price", help="USD per kWh: adds the electricity cost.")
SKIP_BAD = typer.Option(None, "--skip-bad-images", help="Drop image files that do not decode (counted) instead of stopping.")
SEED = typer.Option(None, "--seed", help="Seed for weights, synthetic data and labels.")
LABEL_SPACE = typer.Option(None, "--label-space", help="Which class each model output is: imagenet-1k, cifar10, folder (sorted folder names); default: the model's.")
LABELS = typer.Option(None, "--labels", help="Labels file: line k names output k (class name, WordNet ID or folder name).")
MEAN = typer.Option(None, "--mean", help="Input mean R,G,B on the 0..1 scale, or a preset: imagenet, cifar10, inception (default: the model's).")
STD = typer.Option(None, "--std", help="Input std R,G,B on the 0..1 scale, or a preset (default: the model's).")
RESIZE = typer.Option(None, "--resize", help="Shorter side in pixels before the center crop to the input size.")
CROP_PCT = typer.Option(None, "--crop-pct", help="Input side / resized shorter side (e.g. 0.875: resize 256, crop 224).")
DB = typer.Option("accelbench.db", "--db", help="SQLite results store.")
JSON = typer.Option(None, "--json", help="Also write the run (spec, environment, results) as JSON.")
CONFIG = typer.Option(None, "--config", "-c", help="TOML file (top level or a [sweep] table); flags override it.")
RESUME = typer.Option(False, "--resume", help="Continue the newest unfinished run with the same settings.")
WIDE = typer.Option(False, "--wide", help="Every column (default: a compact table that fits 80 columns).")
GPUS = typer.Option(None, "--gpus", help="Data parallel over N GPUs (N CPU processes without GPUs) through torchrun.")
NNODES = typer.Option(1, "--nnodes", help="With --gpus: nodes (torchrun --nnodes); run the same command on each.")
NODE_RANK = typer.Option(0, "--node-rank", help="With --gpus: this node's index (torchrun --node-rank).")
RDZV = typer.Option(None, "--rdzv-endpoint", help="With --gpus: rendezvous host:port (torchrun --rdzv-endpoint).")
GLOBAL = typer.Option(False, "--global-batch", help="With --gpus: batch sizes are global, split over the ranks (strong scaling).")
TIMEOUT = typer.Option(900.0, "--timeout-s", help="With --gpus: seconds a case may run before its ranks are stopped.")


def shared_flags(model=None, batch_sizes=None, precisions=None, modes=None, channels_last=None, images=None,
                 data=None, image_size=None, device=None, warmup_batches=None, min_timed_batches=None,
                 min_time_s=None, telemetry_period_ms=None, idle_s=None, price_per_hour=None, kwh_price=None,
                 skip_bad_images=None, seed=None) -> dict[str, Any]:
    """The shared options as spec fields (None: not given)."""
    return dict(models=model, batch_sizes=batch_sizes, precisions=precisions, modes=modes, channels_last=channels_last,
                images=images, data=data, image_size=image_size, device=device, warmup_batches=warmup_batches,
                min_timed_batches=min_timed_batches, min_time_s=min_time_s, telemetry_period_ms=telemetry_period_ms,
                idle_s=idle_s, price_per_hour=price_per_hour, kwh_price=kwh_price, skip_bad_images=skip_bad_images,
                seed=seed)


def eval_flags(label_space=None, labels=None, mean=None, std=None, resize=None, crop_pct=None) -> dict[str, Any]:
    """The accuracy options (label space, labels file, normalisation, evaluation transform) as spec fields."""
    return dict(label_space=label_space, labels=labels, mean=mean, std=std, resize=resize, crop_pct=crop_pct)


def launch_options(gpus: Optional[int], *, nnodes: int = 1, node_rank: int = 0, rdzv_endpoint: Optional[str] = None,
                   global_batch: bool = False, timeout_s: float = 900.0, device: Optional[str] = None):
    """The torchrun options of ``--gpus N`` and friends, or None for one process."""
    from accelbench.launchers.torchrun.job import DistOptions

    if gpus is None and nnodes == 1 and rdzv_endpoint is None and not global_batch:
        return None
    dev = "auto" if device in (None, "auto") else ("cpu" if device == "cpu" else "cuda")
    return DistOptions(gpus=gpus or 1, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                       global_batch=global_batch, timeout_s=timeout_s, device=dev)


def where(spec, opts) -> str:
    """Where the cases will run, checked now (a missing device is one line before anything is printed)."""
    from accelbench.core.env import resolve_device

    return f"{opts.world_size} ranks" if opts else str(resolve_device(spec.device))


def layers(config: Optional[Path], table: str, flags: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec layers: the TOML file's ``[table]`` (or its top level), then the flags."""
    from accelbench.core.config import load_toml
    from accelbench.core.config import table as toml_table

    return ([toml_table(load_toml(config), table, config)] if config else []) + [flags]


def styled(label: str, style: str, rest: str = "") -> Text:
    """``label`` in ``style`` followed by plain ``rest`` (never parsed as markup)."""
    return Text.assemble((label, style), rest)


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit (default 2: a usage or input error)."""
    err_console.print(styled("error:", "red", " " + " ".join(str(message).split())))
    raise typer.Exit(code)


def open_store(db: Path, create: bool = False):
    """The results store at ``db``; without ``create``, a one-line error (exit 2) when there is none. A store
    this command creates and leaves empty is deleted again at its end (:func:`accelbench.cli.main`)."""
    from accelbench.store import Store

    if not create and not db.exists():
        fail(f"no results store at {db}")
    return Store(db)  # a StoreError is one line through command()


def before_run(spec, opts, db: Path, outputs=()) -> tuple[str, Any]:
    """``(where the cases run, the store)`` for a measuring command, before it prints its header: what can refuse
    it (device, models, data, output files: :func:`accelbench.api.check`) is checked before the store exists."""
    from accelbench import api
    place = where(spec, opts)
    api.check(spec, opts=opts, outputs=outputs)
    return place, open_store(db, create=True)


def open_run(store, run_id: Optional[int]) -> dict:
    """Run ``run_id`` of ``store`` (None: the newest); a one-line error (exit 2) when it does not exist."""
    try:
        return store.run(run_id)
    except KeyError as exc:
        fail(str(exc.args[0]))


def progress_bar():
    """The sweep progress bar: case, bar, done/total, elapsed and remaining time (from the cases so far)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return Progress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(), console=console, transient=True)


def run_with_progress(fn, *args, **kwargs):
    """Call ``fn(*args, on_case=..., **kwargs)`` under the progress bar, naming the running case."""
    from accelbench.report.table import case_label

    with progress_bar() as progress:
        task = progress.add_task("checking the models and data", total=None)

        def on_case(i: int, n: int, case, rec) -> None:
            label = case_label({"model": case.model, "batch_size": case.batch_size, "precision": case.precision,
                                "mode": case.mode}) if case.model else case.key
            progress.update(task, total=n, completed=i, description=label)

        return fn(*args, on_case=on_case, **kwargs)


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


def print_outcome(store, run_id: int, *, wide: bool = False, resumed: int = 0, notes: list[str] = ()) -> None:
    """The run's table (compact unless ``wide``), the weights used, the OOM boundary, and notes naming each
    failed or flagged case."""
    from accelbench.report import table_for
    from accelbench.report.table import oom_boundary

    run = store.run(run_id)
    records = store.cases(run_id).to_dict("records")
    for note in notes:  # nothing failed (those are rows): the run goes on, the user should know
        err_console.print(styled("warning:", "yellow", " " + note))
    if not records:
        console.print("no cases ran")
        return
    r0 = records[0]
    models = ", ".join(dict.fromkeys(str(r.get("model")) for r in records if isinstance(r.get("model"), str)))
    where = r0.get("device_name") or r0.get("device") or run["env"].get("device_name")
    data = r0.get("data_description") or r0.get("data")
    # above the table, not its title: a title wraps at the table's width
    console.print(f"Run {run_id} ({run['kind']}): {models + ' on ' if models else ''}{where}" + (f" | {data}" if data else ""))
    print_table(table_for(run["kind"])(records, compact=not wide), wide)
    if wide:
        print_ci_note(run["kind"], records)
    weights = {(str(r["model"]), str(r["weights"])) for r in records if isinstance(r.get("weights"), str)}
    why = {str(r["model"]): r["accuracy_note"] for r in records if isinstance(r.get("accuracy_note"), str)}
    for name, w in sorted(weights):
        plain = w != "random" or name in why
        console.print(f"{name}: weights {w}" + ("" if plain else " (random weights: accuracy not meaningful, not reported)"))
    for note in dict.fromkeys(why.values()):
        console.print(f"no accuracy: {note}")
    print_cheapest(run["kind"], records)
    if resumed:
        console.print(f"resumed run {run_id}: {resumed} cases were already done")
    for (m, p, mode), b in oom_boundary(records).items():
        if b["smallest_oom"] is not None:
            console.print(f"OOM boundary {m} {p} {mode}: largest batch that ran {b['largest_ok']}, out of memory at {b['smallest_oom']}")
    print_notes(records, run["env"])


def print_cheapest(kind: str, records: list[dict]) -> None:
    """Under an inference table: per model, the cheapest precision that meets the accuracy target."""
    from accelbench.report.table import cheapest_lines, is_detail

    for line in cheapest_lines(r for r in records if not is_detail(r)) if kind.startswith("inference") else ():
        console.print(Text(line))


def print_ci_note(kind: str, records: list[dict]) -> None:
    """Under a wide inference or training table without intervals: how to get them."""
    if kind in ("inference", "training") and not any((r.get("windows") or 0) >= 2 for r in records):
        console.print("95% confidence intervals: needs --repeats >= 2 (one timed window per case)")


def print_notes(records: list[dict], env: dict | None = None, failures: bool = True) -> None:
    """Where power, energy and GPM figures came from; low-confidence energy; with ``failures``, why each case
    failed or was flagged (model and case named)."""
    from accelbench.report.table import case_notes, is_detail

    env = env or {}
    if env.get("idle_power_w") is not None:
        console.print(f"idle power {env['idle_power_w']:.1f} W ({env.get('idle_power_source')}, "
                      f"{env.get('idle_window_s') or 0:.1f} s before the sweep)")
    for key, label in (("power_source", "power"), ("energy_source", "energy"), ("gpm_status", "GPM"),
                       ("cpu_energy_source", "CPU energy")):
        vals = {r.get(key) for r in records if isinstance(r.get(key), str)}
        if vals:
            console.print(f"{label}: {', '.join(sorted(vals))}")
    low = [r for r in records if r.get("energy_confidence") == "low"]
    if low:
        console.print(styled("note:", "yellow", f" energy of {len(low)} case(s) is low-confidence (window too short "
                             "for the energy counter's update interval): raise --min-time-s"))
    if not failures:
        return
    for label, text in case_notes(r for r in records if not is_detail(r)):
        style = "yellow" if label in ("flagged:", "unsupported:", "skipped:", "INVALID:") else "red"
        (err_console if label == "error:" else console).print(styled(label, style, " " + text))


def finish(store, run_id: int, *, interrupted: bool = False, json_path: Optional[Path] = None,
           statuses: Optional[list] = None) -> None:
    """End a command that ran cases: failures counted, JSON written (one line when it cannot be: exit 1, the run
    stays stored), the next commands named; raises typer.Exit with :func:`accelbench.core.errors.exit_code`'s code.

    Args:
        statuses: the statuses of the rows this command stored (default: every row of the run).
    """
    from accelbench import api

    statuses = list(store.cases(run_id).get("status", [])) if statuses is None else statuses
    failed, code = sum(s == "error" for s in statuses), exit_code(statuses, interrupted)
    if failed:
        err_console.print(styled("failed:", "red", f" {failed} of {len(statuses)} cases ended in error (their reasons "
                                 "are above); every result is stored"))
    try:
        if json_path:
            api.export_json(store, run_id, json_path)
            console.print(f"wrote {json_path}")
    except OutputError as exc:  # the results are in the store: `accelbench export` writes them again
        err_console.print(styled("error:", "red", f" {exc} (run {run_id} is stored in {store.path})"))
        code = code or EXIT_CASE_ERRORS
    if interrupted:
        err_console.print(f"interrupted: {len(statuses)} finished cases stored in run {run_id}; rerun with --resume")
    db = "" if Path(store.path).name == "accelbench.db" and Path(store.path).parent == Path(".") else f" --db {store.path}"
    console.print(f"run {run_id} stored in {store.path}. Next: accelbench results --run {run_id}{db} (every column) | "
                  f"accelbench export --run {run_id}{db} --format csv")
    raise typer.Exit(code)


def finish_outcome(out, store, *, json_path: Optional[Path] = None, wide: bool = False) -> None:
    """Print a sweep's outcome and end the command; a ``--resume`` that found the run complete says so, exit 0."""
    if out.already_complete:
        console.print(f"nothing to resume: run {out.run_id} in {store.path} is complete with these settings ("
                      f"{out.skipped_done} cases): accelbench results --run {out.run_id} --db {store.path} shows it")
        raise typer.Exit(0)
    if out.resume_new:
        console.print(f"--resume: no earlier run of these settings in {store.path}: ran them as new run {out.run_id}")
    if out.stop_reason:  # the store takes no writes and may take no reads: no table, no JSON
        err_console.print(styled("error:", "red", f" the sweep stopped: {out.stop_reason}"))
    else:
        print_outcome(store, out.run_id, wide=wide, resumed=out.skipped_done, notes=out.notes)
    finish(store, out.run_id, interrupted=out.interrupted, json_path=None if out.stop_reason else json_path,
           statuses=[r["status"] for r in out.records])
