"""The Typer app, the options every command shares (defined once), and how every command ends (exit code,
JSON, next commands). Command modules import this one only (it re-exports the consoles of ``terminal.py`` and the
outcome printing of ``outcome.py``; help panels and completion are ``help.py``).

Every command follows one exit-code contract (:mod:`accelbench.core.errors`): 0 every case ran, 1 at least
one case ended in ``error`` (all results stored), 2 a usage or input error before anything ran, 130
interrupted (resumable).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from accelbench.cli.help import (ACCURACY, COST, DIST, HOW, PANEL_OF, STORE, WHAT, HelpCommand, OrderedGroup,
                                 complete_backends, complete_models, complete_precisions)
from accelbench.cli.terminal import (console, err_console, is_stdout, json_to_stdout, print_command,  # noqa: F401
                                     print_table, styled, write_output)
from accelbench.cli.outcome import (print_cheapest, print_ci_note, print_notes, print_outcome,  # noqa: F401
                                    run_with_progress)
from accelbench.core.errors import ERROR, EXIT_CASE_ERRORS, AccelbenchError, OutputError, exit_code

app = typer.Typer(cls=OrderedGroup, add_completion=True, no_args_is_help=False, rich_markup_mode="rich",
                  pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]},
                  help="How fast, how efficient and how costly is this model on this hardware, and why.")


def command(name: str | None = None):
    """``@app.command`` whose input errors end as one line and exit 2 (or the error's ``exit_code``), and whose Ctrl-C
    before a run exists says nothing was stored (exit 130), also when called directly (a test's CliRunner, a
    notebook) rather than through :func:`accelbench.cli.main`; listed in its help panel
    (:data:`accelbench.cli.help.COMMAND_PANELS`), its help completed when shown."""
    import functools

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
            finally:
                console.stderr = False  # `--json -` sent this command's text to stderr

        cmd = name or fn.__name__.replace("_", "-")
        return app.command(name, cls=HelpCommand, rich_help_panel=PANEL_OF.get(cmd))(wrapped)

    return deco


# Options shared by the commands (typer reads these objects per command); {precisions} and {backends} are
# filled in from the registries, and the scenario's defaults appended, when help is shown (cli/help.py). ---
MODEL = typer.Option(None, "--model", "-m", rich_help_panel=WHAT, autocompletion=complete_models,
                     help="Model(s), comma-separated: resnet50, cifar-resnet20, timm:<name>, pkg.mod:factory (accelbench models lists them).")
BATCH = typer.Option(None, "--batch-sizes", "-b", rich_help_panel=WHAT, help="Batch sizes, e.g. 1,8,32 (per GPU with --gpus, global with --global-batch).")
PREC = typer.Option(None, "--precisions", "-p", rich_help_panel=WHAT, autocompletion=complete_precisions,
                    help="Precisions, comma-separated: {precisions}.")
MODES = typer.Option(None, "--modes", rich_help_panel=WHAT, autocompletion=complete_backends,
                     help="Backends (execution modes), comma-separated: {backends}.")
CUDNN = typer.Option(None, "--cudnn-benchmark/--no-cudnn-benchmark", rich_help_panel=HOW, help="torch.backends.cudnn.benchmark during each case (default: torch's, off); recorded in every row.")
CL = typer.Option(None, "--channels-last/--no-channels-last", rich_help_panel=WHAT, help="Default: where it helps (convolutions on CUDA below fp32).")
IMAGES = typer.Option(None, "--images", "-n", rich_help_panel=WHAT, help="Images per pass (split over the ranks with --gpus).")
DATA = typer.Option(None, "--data", rich_help_panel=ACCURACY, help="cifar10-test, cifar10-train-5k, synthetic, or an ImageFolder dir/.tar/.tar.gz.")
SIZE = typer.Option(None, "--image-size", rich_help_panel=ACCURACY, help="Input side in pixels (default: the model's).")
DEVICE = typer.Option(None, "--device", rich_help_panel=WHAT, help="auto, cpu, cuda, cuda:N (default auto: the GPU if there is one).")
WARM = typer.Option(None, "--warmup-batches", rich_help_panel=HOW, help="Untimed steps before timing.")
MIN_B = typer.Option(None, "--min-timed-batches", rich_help_panel=HOW, help="Timed steps run until this many steps ...")
MIN_T = typer.Option(None, "--min-time-s", rich_help_panel=HOW, help="... and this many seconds are reached.")
REPEATS = typer.Option(None, "--repeats", rich_help_panel=HOW, help="Timed windows per case (default 1); 2 or more give 95% confidence intervals, 5 or more a compare verdict.")
TELEMETRY = typer.Option(None, "--telemetry-period-ms", rich_help_panel=COST, help="Telemetry sampling period (default 100; 0 = sampler off).")
IDLE = typer.Option(None, "--idle-s", rich_help_panel=COST, help="Idle-power measurement before the sweep, s (default 3; 0 = skip).")
PRICE = typer.Option(None, "--price-per-hour", rich_help_panel=COST, help="USD per device-hour (default: the shipped price list).")
KWH = typer.Option(None, "--kwh-price", rich_help_panel=COST, help="USD per kWh: adds the electricity cost.")
SKIP_BAD = typer.Option(None, "--skip-bad-images", rich_help_panel=ACCURACY, help="Drop image files that do not decode (counted) instead of stopping.")
SEED = typer.Option(None, "--seed", rich_help_panel=HOW, help="Seed for weights, synthetic data and labels (default 0).")
LABEL_SPACE = typer.Option(None, "--label-space", rich_help_panel=ACCURACY, help="Which class each model output is: imagenet-1k, cifar10, folder (sorted folder names); default: the model's.")
LABELS = typer.Option(None, "--labels", rich_help_panel=ACCURACY, help="Labels file: line k names output k (class name, WordNet ID or folder name).")
MEAN = typer.Option(None, "--mean", rich_help_panel=ACCURACY, help="Input mean R,G,B on the 0..1 scale, or a preset: imagenet, cifar10, inception (default: the model's).")
STD = typer.Option(None, "--std", rich_help_panel=ACCURACY, help="Input std R,G,B on the 0..1 scale, or a preset (default: the model's).")
RESIZE = typer.Option(None, "--resize", rich_help_panel=ACCURACY, help="Shorter side in pixels before the center crop to the input size.")
CROP_PCT = typer.Option(None, "--crop-pct", rich_help_panel=ACCURACY, help="Input side / resized shorter side (e.g. 0.875: resize 256, crop 224).")
DB = typer.Option("accelbench.db", "--db", rich_help_panel=STORE, help="SQLite results store.")
JSON = typer.Option(None, "--json", rich_help_panel=STORE, callback=json_to_stdout,
                    help="Also write the run (spec, environment, results) as JSON; - for stdout (the rest goes to stderr).")
CONFIG = typer.Option(None, "--config", "-c", rich_help_panel=WHAT, help="TOML file (top level or a [sweep] table); flags override it.")
RESUME = typer.Option(False, "--resume", rich_help_panel=STORE, help="Continue the newest unfinished run with the same settings.")
WIDE = typer.Option(False, "--wide", rich_help_panel=STORE, help="Every column (default: a compact table that fits 80 columns; a pager when wider than the terminal).")
GPUS = typer.Option(None, "--gpus", rich_help_panel=DIST, help="Data parallel over N GPUs (N CPU processes without GPUs) through torchrun.")
NNODES = typer.Option(1, "--nnodes", rich_help_panel=DIST, help="With --gpus: nodes (torchrun --nnodes); run the same command on each.")
NODE_RANK = typer.Option(0, "--node-rank", rich_help_panel=DIST, help="With --gpus: this node's index (torchrun --node-rank).")
RDZV = typer.Option(None, "--rdzv-endpoint", rich_help_panel=DIST, help="With --gpus: rendezvous host:port (torchrun --rdzv-endpoint).")
GLOBAL = typer.Option(False, "--global-batch", rich_help_panel=DIST, help="With --gpus: batch sizes are global, split over the ranks (strong scaling).")
TIMEOUT = typer.Option(900.0, "--timeout-s", rich_help_panel=DIST, help="With --gpus: seconds a case may run before its ranks are stopped.")


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

    if gpus is not None and gpus < 1:
        fail(f"invalid --gpus {gpus}: allowed 1 or more")
    if gpus is None and nnodes == 1 and rdzv_endpoint is None and not global_batch:
        return None
    dev = "auto" if device in (None, "auto") else ("cpu" if device == "cpu" else "cuda")
    return DistOptions(gpus=gpus or 1, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                       global_batch=global_batch, timeout_s=timeout_s, device=dev)


def where(spec, opts) -> str:
    """Where the cases will run, checked now (a missing device is one line before anything is printed)."""
    from accelbench.core.device import resolve_device

    return f"{opts.world_size} ranks" if opts else str(resolve_device(spec.device))


def layers(config: Optional[Path], table: str, flags: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec layers: the TOML file's ``[table]`` (or its top level), then the flags."""
    from accelbench.core.config import load_toml
    from accelbench.core.config import table as toml_table

    return ([toml_table(load_toml(config), table, config)] if config else []) + [flags]


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


def run_ref(db: Path, ref: Optional[str]) -> tuple[Any, dict]:
    """``(store, run)`` a ``--run`` names: an id in ``db`` (None: the newest run), or ``PATH:ID`` (a run in
    another store), parsed as ``compare`` and ``report`` parse it (:func:`accelbench.store.refs.open_ref`);
    a one-line error (exit 2) when the store or the run does not exist."""
    from accelbench.core.rundata import parse_ref
    from accelbench.store.refs import open_ref

    if ref is None:
        store = open_store(db)
        return store, open_run(store, None)
    try:
        path, _ = parse_ref(ref)
        store, run_id, _ = open_ref(None if path else open_store(db), ref)
    except (AccelbenchError, ValueError) as exc:
        fail(str(exc))
    return store, store.run(run_id)


def finish(store, run_id: int, *, interrupted: bool = False, json_path: Optional[Path] = None,
           statuses: Optional[list] = None) -> None:
    """End a command that ran cases: failures counted, JSON written (one line when it cannot be: exit 1, the run
    stays stored), the next commands named; raises typer.Exit with :func:`accelbench.core.errors.exit_code`'s code.

    Args:
        statuses: the statuses of the rows this command stored (default: every row of the run).
    """
    from accelbench import api

    statuses = list(store.cases(run_id).get("status", [])) if statuses is None else statuses
    failed, code = sum(s == ERROR for s in statuses), exit_code(statuses, interrupted)
    if failed:
        err_console.print(styled("failed:", "red", f" {failed} of {len(statuses)} cases ended in error (their reasons "
                                 "are above); every result is stored"))
    try:
        if json_path:
            write_output(json_path, lambda path: api.export_json(store, run_id, path))
            console.print(f"wrote {'the JSON to stdout' if is_stdout(json_path) else json_path}")
    except OutputError as exc:  # the results are in the store: `accelbench export` writes them again
        err_console.print(styled("error:", "red", f" {exc} (run {run_id} is stored in {store.path})"))
        code = code or EXIT_CASE_ERRORS
    if interrupted:
        err_console.print(f"interrupted: {len(statuses)} finished cases stored in run {run_id}; rerun with --resume")
    db = "" if Path(store.path).name == "accelbench.db" and Path(store.path).parent == Path(".") else f" --db {store.path}"
    console.print(f"run {run_id} stored in {store.path}. Next: accelbench results --run {run_id}{db} --wide (every column) | "
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
