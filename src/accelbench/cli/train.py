"""``accelbench train`` (step throughput, or training to accuracy with ``--epochs``) and ``accelbench
input-pipeline`` (parsing only; the work is :mod:`accelbench.api`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, err_console, fail, styled
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import HOW, STORE, WHAT
from accelbench.cli.options import Cost, How, Inputs, Label, Launch, Output, What, config_option, int_list
from accelbench.core.options.train_lm import CONVERGE_OPTIONS as LM_CONVERGE_OPTIONS
from accelbench.core.options.train_lm import OPTIONS as LM_OPTIONS

SWEEP_ONLY = (
    "warmup_batches",
    "min_timed_batches",
    "min_time_s",
    "loader_workers",
    "repeats",
    "label_space",
    "labels",
    "mean",
    "std",
    "fused_optimizer",
)
CONVERGE_ONLY = (
    "eval_data",
    "eval_images",
    "target_top1",
    "base_batch_size",
    "schedule",
    "warmup_epochs",
    "placement",
    "workers",
    "deterministic",
    "checkpoint_dir",
)


LM_ONLY = ("seq_lens", "tokens", "activation_checkpointing", "parallel", "fsdp_autocast", "batches")
IMAGE_ONLY = ("optimizer", "momentum", "loader_workers", "images", "channels_last", "image_size", "data")


def _check_lm_flags(layers: list[dict], lm: bool, gpus: bool) -> None:
    """Options of the other kind of model are one line, not ignored."""
    wrong = IMAGE_ONLY if lm else LM_ONLY
    for layer in layers:
        for key, value in layer.items():
            if value is not None and key.replace("-", "_") in wrong:
                need = "an image classifier" if lm else "a language model (-m hf:...)"
                fail(f"{key.replace('_', '-')} applies to {need}")
    if lm and not gpus and any(layer.get("parallel") is not None for layer in layers):
        fail("--parallel applies with --gpus N")


def _check_flags(layers: list[dict], converge: bool) -> None:
    wrong = SWEEP_ONLY if converge else CONVERGE_ONLY
    for layer in layers:
        for key, value in layer.items():
            if value is not None and key.replace("-", "_") in wrong:
                need = "a step-throughput sweep (no --epochs)" if converge else "a convergence run (--epochs N)"
                fail(f"{key.replace('_', '-')} applies to {need}")


OPTIMIZER, CONVERGE = "Optimizer", "Training to accuracy (--epochs)"


@command()
def train(
    what: What = What.take(
        images=typer.Option(
            None,
            "--images",
            "-n",
            rich_help_panel=WHAT,
            help="Sweep: distinct images cycled. --epochs: training images used (default all).",
        )
    ),
    optimizer: str | None = typer.Option(
        None, "--optimizer", rich_help_panel=OPTIMIZER, help="sgd (momentum, default) or adamw."
    ),
    lr: float | None = typer.Option(
        None,
        "--lr",
        rich_help_panel=OPTIMIZER,
        help="Sweep: the step's lr. --epochs: peak lr at --base-batch-size (scaled linearly).",
    ),
    momentum: float | None = typer.Option(
        None, "--momentum", rich_help_panel=OPTIMIZER, help="SGD momentum (default 0.9; AdamW ignores it)."
    ),
    fused_optimizer: bool | None = typer.Option(
        None,
        "--fused-optimizer/--no-fused-optimizer",
        rich_help_panel=OPTIMIZER,
        help="Sweep: fused optimizer kernels (default: fused on CUDA where torch has them, foreach on a CPU).",
    ),
    weight_decay: float | None = typer.Option(
        None,
        "--weight-decay",
        rich_help_panel=OPTIMIZER,
        help="Weight decay: L2 penalty with SGD, decoupled with AdamW (default 5e-4).",
    ),
    how: How = How.take(),
    loader_workers: int | None = typer.Option(
        None,
        "--loader-workers",
        rich_help_panel=HOW,
        help="Sweep: also time a DataLoader with N workers and flag input-bound cases.",
    ),
    epochs: int | None = typer.Option(
        None, "--epochs", rich_help_panel=CONVERGE, help="Train to accuracy for N epochs (convergence run)."
    ),
    eval_data: str | None = typer.Option(
        None, "--eval-data", rich_help_panel=CONVERGE, help="Evaluation set (default cifar10-test: 10,000 images)."
    ),
    eval_images: int | None = typer.Option(
        None, "--eval-images", rich_help_panel=CONVERGE, help="Evaluate on a balanced subset of N images."
    ),
    target_top1: float | None = typer.Option(
        None, "--target-top1", rich_help_panel=CONVERGE, help="Target top-1 for time to accuracy: 0.8 or 80."
    ),
    base_batch_size: int | None = typer.Option(
        None, "--base-batch-size", rich_help_panel=CONVERGE, help="Batch size --lr refers to (default 128)."
    ),
    schedule: str | None = typer.Option(
        None,
        "--schedule",
        rich_help_panel=CONVERGE,
        help="cosine (warm-up + cosine, default) or step (/10 at 50% and 75%).",
    ),
    warmup_epochs: float | None = typer.Option(
        None, "--warmup-epochs", rich_help_panel=CONVERGE, help="Linear lr warm-up (default 2)."
    ),
    placement: str | None = typer.Option(
        None,
        "--placement",
        rich_help_panel=CONVERGE,
        help="loader (DataLoader decodes PNGs, default) or resident (data on the GPU).",
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        rich_help_panel=CONVERGE,
        help="DataLoader workers for --placement loader (GPU default 8, CPU 0).",
    ),
    deterministic: bool | None = typer.Option(
        None,
        "--deterministic/--no-deterministic",
        rich_help_panel=CONVERGE,
        help="cuDNN deterministic algorithms (default off).",
    ),
    checkpoint_dir: Path | None = typer.Option(
        None, "--checkpoint-dir", rich_help_panel=CONVERGE, help="Default: <db>-checkpoints next to --db."
    ),
    lm_options: Given = declared(LM_OPTIONS, only=LM_ONLY),
    lm_converge: Given = declared(LM_CONVERGE_OPTIONS),
    plot: Path | None = typer.Option(
        None, "--plot", rich_help_panel=STORE, help="--epochs: write a PNG of top-1 vs epoch and vs time."
    ),
    inputs: Inputs = Inputs.take(omit=("resize", "crop_pct")),
    cost: Cost = Cost.take(),
    config: Path | None = config_option("train"),
    out: Output = Output.take(),
    launch: Launch = Launch.take(),
    label: Label = Label.take(),
) -> None:
    """Training benchmarks: step throughput (model x batch size x precision x mode) or, with --epochs,
    training to accuracy (batch sizes compared, time to target top-1)."""
    from accelbench import api

    flags = {
        **what.fields(),
        **inputs.fields(),
        **how.fields(),
        **cost.fields(),
        "optimizer": optimizer,
        "fused_optimizer": fused_optimizer,
        "lr": lr,
        "momentum": momentum,
        "weight_decay": weight_decay,
        "loader_workers": loader_workers,
        "epochs": epochs,
        "eval_data": eval_data,
        "eval_images": eval_images,
        "target_top1": target_top1,
        "base_batch_size": base_batch_size,
        "schedule": schedule,
        "warmup_epochs": warmup_epochs,
        "placement": placement,
        "workers": workers,
        "deterministic": deterministic,
        "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None,
        **lm_options.fields(),
        **lm_converge.fields(),
    }
    layers = a.layers(config, "train", flags)
    named = label.of(layers)
    converge = any(layer.get("epochs") is not None for layer in layers)
    _check_flags(layers, converge)
    opts = launch.options(what.device)
    lm = _is_lm(layers)
    _check_lm_flags(layers, lm, opts is not None)
    if lm:
        return _converge_lm(layers, out, named) if converge else _train_lm(layers, opts, out, named)
    if any(layer.get(k) is not None for layer in layers for k in LM_CONVERGE_OPTIONS):
        fail("--warmup-steps, --init and --target-perplexity apply to a language model (-m hf:...) with --epochs")
    if converge and opts is not None:
        fail("--gpus applies to the step-throughput sweep (no --epochs)")
    if not converge and plot:
        fail("--plot applies to a convergence run (--epochs N)")
    if opts is not None and any(layer.get("loader_workers") is not None for layer in layers):
        fail("--loader-workers does not apply with --gpus")
    spec = api.spec("converge" if converge else "train_step", *layers)
    where, store = a.before_run(spec, opts, out.db, outputs=[out.json_path, plot])
    if converge:
        return _converge(spec, store, out.json_path, out.resume, plot, out.wide, named)
    console.print(
        f"accelbench train: step throughput of {', '.join(spec.models)} on {where} ({spec.data}), db {out.db}"
    )
    result = a.run_with_progress(api.train, spec, store, opts=opts, resume=out.resume, name=named.name, tags=named.tags)
    if result is None:
        raise typer.Exit(0)
    for r in store.records(result.run_id):
        if r.get("input_bound"):
            from accelbench.report.table import case_label

            console.print(
                styled(
                    "input-bound:",
                    "yellow",
                    f" {case_label(r)}: the loader delivers "
                    f"{r['loader_samples_per_s']:,.0f} img/s, the step takes {r['throughput_samples_per_s']:,.0f} img/s",
                )
            )
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)


def _is_lm(layers: list[dict]) -> bool:
    """Whether the models the layers name (the last layer naming any) are language models."""
    from accelbench.core.errors import ConfigError
    from accelbench.training.lm_step import is_lm_spec

    models = next((m for layer in reversed(layers) if (m := layer.get("models") or layer.get("model"))), None)
    try:
        return is_lm_spec(models)
    except ConfigError as exc:
        fail(str(exc))
    return False


def _train_lm(layers: list[dict], opts, out: Output, named) -> None:
    """A language model's training-step sweep: tokens/s, MFU and memory per case."""
    from accelbench import api

    spec = api.spec("train_lm", *layers)
    where, store = a.before_run(spec, opts, out.db, outputs=[out.json_path])
    s = spec.settings
    console.print(
        f"accelbench train: language-model step throughput of {', '.join(spec.models)} on {where} "
        f"(seq len {','.join(map(str, s.seq_lens))}, {s.tokens} tokens), db {out.db}"
    )
    result = a.run_with_progress(api.train, spec, store, opts=opts, resume=out.resume, name=named.name, tags=named.tags)
    if result is None:
        raise typer.Exit(0)
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)


def _converge_lm(layers: list[dict], out: Output, named) -> None:
    """A language model trained to a held-out perplexity: one row per epoch as it ends, a summary per batch size."""
    from accelbench import api

    spec = api.spec("converge_lm", *layers)
    _, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    s = spec.settings
    console.print(
        f"accelbench train: {spec.models[0]} on the shipped text, {s.epochs} epochs of {s.seq_lens[0]}-token windows, "
        f"batch sizes {', '.join(map(str, spec.batch_sizes))} ({s.init} weights), db {out.db}"
    )

    def on_row(r: dict[str, Any]) -> None:
        console.print(
            f"bs={r['batch_size']} epoch {r['epoch']}/{s.epochs}: loss {r['train_loss']:.3f}, held-out perplexity "
            f"{r['eval_perplexity']:.2f}, {r['epoch_wall_s']:.1f} s"
        )

    result = api.train(spec, store, resume=out.resume, on_row=on_row, name=named.name, tags=named.tags)
    for bs, e in result.resumed.items():
        console.print(f"bs={bs}: resumed after epoch {e} from its checkpoint")
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)


def _converge(spec, store, json_path: Path | None, resume: bool, plot: Path | None, wide: bool, named) -> None:
    from accelbench import api
    from accelbench.report.train import epoch_table, plot_convergence

    s = spec.settings
    console.print(
        f"accelbench train: {spec.models[0]} from scratch on {spec.device}, {s.epochs} epochs, batch sizes "
        f"{', '.join(map(str, spec.batch_sizes))} ({spec.data} -> {s.eval_data}, {s.placement}), db {store.path}"
    )

    def on_row(r: dict[str, Any]) -> None:
        console.print(
            f"bs={r['batch_size']} epoch {r['epoch']}/{s.epochs}: loss {r['train_loss']:.3f}, test top-1 "
            f"{100 * r['eval_top1']:.2f}%, {r['epoch_wall_s']:.1f} s" + (" (input-bound)" if r["input_bound"] else "")
        )

    out = api.train(spec, store, resume=resume, on_row=on_row, name=named.name, tags=named.tags)
    records = store.records(out.run_id)
    for bs, e in out.resumed.items():
        console.print(f"bs={bs}: resumed after epoch {e} from its checkpoint")
    console.print(epoch_table(records, title=f"Run {out.run_id}: test top-1 per epoch ({s.eval_data})"))
    det = "on" if s.deterministic else "off"
    console.print(
        f"seed {spec.seed}; cuDNN determinism {det}; lr = {s.base_lr} x batch / {s.base_batch_size}, "
        f"{s.schedule} schedule with {s.warmup_epochs} warm-up epochs"
    )
    if plot and any(r.get("row_type") == "epoch" for r in records):
        console.print(f"wrote {plot_convergence(records, plot, title=f'{spec.models[0]} on {spec.data}')}")
    a.finish_outcome(out, store, json_path=json_path, wide=wide)


@command("input-pipeline")
def input_pipeline(
    data: str = typer.Option(
        "cifar10-train-5k", "--data", help="cifar10-train-5k, cifar10-test, or an ImageFolder dir/.tar(.gz)."
    ),
    images: int | None = typer.Option(None, "--images", "-n", help="Images to load (default all)."),
    workers: str = typer.Option("0,2,4,8", "--workers", "-w", help="DataLoader worker counts, e.g. 0,2,4,8."),
    batch_size: int = typer.Option(256, "--batch-size", "-b", help="Images per batch."),
    image_size: int | None = typer.Option(
        None, "--image-size", help="Resize in the loader (default: as stored; images of mixed sizes: 224)."
    ),
    pin_memory: bool = typer.Option(True, "--pin-memory/--no-pin-memory", help="Pin batches (CUDA machines)."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Random crop (padding 4) + flip."),
    min_batches: int = typer.Option(10, "--min-batches", help="Batches timed per row, after the first."),
    storage: bool = typer.Option(True, "--storage/--no-storage", help="Cold vs warm read test of the data files."),
    evict: str = typer.Option(
        "fadvise",
        "--evict",
        help="Cold reads: fadvise (posix_fadvise DONTNEED on the files read, "
        "default), drop-caches (root: drops the whole page cache, slowing every job on the host), "
        "auto (deprecated: the same as fadvise).",
    ),
    resident: bool = typer.Option(True, "--resident/--no-resident", help="Also time the device-resident path."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."),
    cost: Cost = Cost.take(only=("telemetry_period_ms", "idle_s")),
    inputs: Inputs = Inputs.take(only=("skip_bad_images",)),
    out: Output = Output.take(only=("db", "json_path")),
) -> None:
    """Input pipeline alone: DataLoader images/s (decode + augment + collate) per worker count, the
    device-resident path, and storage read MB/s cold vs warm."""
    from accelbench import api
    from accelbench.scenarios.train.pipeline import DEPRECATED_EVICT

    flags = dict(
        data=data,
        images=images,
        workers=_worker_counts(workers),
        batch_size=batch_size,
        image_size=image_size,
        pin_memory=pin_memory,
        augment=augment,
        min_batches=min_batches,
        storage=storage,
        evict=evict,
        resident=resident,
        device=device,
        **cost.fields(),
        skip_bad_images=inputs.skip_bad_images,
    )
    spec = api.spec("input_pipeline", flags)
    _, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    if evict in DEPRECATED_EVICT:
        err_console.print(styled("warning:", "yellow", f" --evict {evict} is deprecated: {DEPRECATED_EVICT[evict]}"))
    result = a.run_with_progress(api.input_pipeline, spec, store)
    a.finish_outcome(result, store, json_path=out.json_path, wide=True)


def _worker_counts(text: str) -> tuple:
    """``-w 0,2,4`` as a tuple of ints; a one-line error naming ``workers`` otherwise."""
    return int_list("workers", text, "a comma-separated list of integers >= 0, e.g. 0,2,4,8")
