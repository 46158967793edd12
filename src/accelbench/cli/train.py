"""``accelbench train`` (step throughput, or training to accuracy with ``--epochs``) and ``accelbench
input-pipeline`` (parsing only; the work is :mod:`accelbench.api`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, err_console, fail, styled

SWEEP_ONLY = ("warmup_batches", "min_timed_batches", "min_time_s", "loader_workers", "repeats", "label_space", "labels",
              "mean", "std", "fused_optimizer")
CONVERGE_ONLY = ("eval_data", "eval_images", "target_top1", "base_batch_size", "schedule", "warmup_epochs",
                 "placement", "workers", "deterministic", "checkpoint_dir")


def _check_flags(layers: list[dict], converge: bool) -> None:
    wrong = SWEEP_ONLY if converge else CONVERGE_ONLY
    for layer in layers:
        for key, value in layer.items():
            if value is not None and key.replace("-", "_") in wrong:
                need = "a step-throughput sweep (no --epochs)" if converge else "a convergence run (--epochs N)"
                fail(f"{key.replace('_', '-')} applies to {need}")


@command()
def train(
    model: Optional[str] = a.MODEL, batch_sizes: Optional[str] = a.BATCH, precisions: Optional[str] = a.PREC,
    modes: Optional[str] = a.MODES, channels_last: Optional[bool] = a.CL,
    images: Optional[int] = typer.Option(None, "--images", "-n", help="Sweep: distinct images cycled. --epochs: training images used (default all)."),
    data: Optional[str] = a.DATA, image_size: Optional[int] = a.SIZE, device: Optional[str] = a.DEVICE,
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="sgd (momentum, default) or adamw."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Sweep: the step's lr. --epochs: peak lr at --base-batch-size (scaled linearly)."),
    momentum: Optional[float] = typer.Option(None, "--momentum", help="SGD momentum (default 0.9; AdamW ignores it)."),
    fused_optimizer: Optional[bool] = typer.Option(None, "--fused-optimizer/--no-fused-optimizer", help="Sweep: fused optimizer kernels (default: fused on CUDA where torch has them, foreach on a CPU)."),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay", help="Weight decay: L2 penalty with SGD, decoupled with AdamW (default 5e-4)."),
    warmup_batches: Optional[int] = a.WARM, min_timed_batches: Optional[int] = a.MIN_B, min_time_s: Optional[float] = a.MIN_T,
    repeats: Optional[int] = a.REPEATS, loader_workers: Optional[int] = typer.Option(None, "--loader-workers", help="Sweep: also time a DataLoader with N workers and flag input-bound cases."),
    epochs: Optional[int] = typer.Option(None, "--epochs", help="Train to accuracy for N epochs (convergence run)."),
    eval_data: Optional[str] = typer.Option(None, "--eval-data", help="Evaluation set (default cifar10-test: 10,000 images)."),
    eval_images: Optional[int] = typer.Option(None, "--eval-images", help="Evaluate on a balanced subset of N images."),
    target_top1: Optional[float] = typer.Option(None, "--target-top1", help="Target top-1 for time to accuracy: 0.8 or 80."),
    base_batch_size: Optional[int] = typer.Option(None, "--base-batch-size", help="Batch size --lr refers to (default 128)."),
    schedule: Optional[str] = typer.Option(None, "--schedule", help="cosine (warm-up + cosine, default) or step (/10 at 50% and 75%)."),
    warmup_epochs: Optional[float] = typer.Option(None, "--warmup-epochs", help="Linear lr warm-up (default 2)."),
    placement: Optional[str] = typer.Option(None, "--placement", help="loader (DataLoader decodes PNGs, default) or resident (data on the GPU)."),
    workers: Optional[int] = typer.Option(None, "--workers", help="DataLoader workers for --placement loader (GPU default 8, CPU 0)."),
    deterministic: Optional[bool] = typer.Option(None, "--deterministic/--no-deterministic", help="cuDNN deterministic algorithms (default off)."),
    checkpoint_dir: Optional[Path] = typer.Option(None, "--checkpoint-dir", help="Default: <db>-checkpoints next to --db."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="--epochs: write a PNG of top-1 vs epoch and vs time."),
    telemetry_period_ms: Optional[float] = a.TELEMETRY, idle_s: Optional[float] = a.IDLE,
    price_per_hour: Optional[float] = a.PRICE, kwh_price: Optional[float] = a.KWH,
    label_space: Optional[str] = a.LABEL_SPACE, labels: Optional[str] = a.LABELS, mean: Optional[str] = a.MEAN,
    std: Optional[str] = a.STD,
    cudnn_benchmark: Optional[bool] = a.CUDNN, seed: Optional[int] = a.SEED, skip_bad_images: Optional[bool] = a.SKIP_BAD, wide: bool = a.WIDE, db: Path = a.DB,
    json_path: Optional[Path] = a.JSON,
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="TOML file (top level or a [train] table); flags override it."),
    resume: bool = a.RESUME, gpus: Optional[int] = a.GPUS, nnodes: int = a.NNODES, node_rank: int = a.NODE_RANK,
    rdzv_endpoint: Optional[str] = a.RDZV, global_batch: bool = a.GLOBAL, timeout_s: float = a.TIMEOUT,
) -> None:
    """Training benchmarks: step throughput (model x batch size x precision x mode) or, with --epochs,
    training to accuracy (batch sizes compared, time to target top-1)."""
    from accelbench import api

    flags = {**a.shared_flags(model, batch_sizes, precisions, modes, channels_last, images, data, image_size, device,
                              warmup_batches, min_timed_batches, min_time_s, telemetry_period_ms, idle_s,
                              price_per_hour, kwh_price, skip_bad_images, seed),
             "cudnn_benchmark": cudnn_benchmark, "optimizer": optimizer, "fused_optimizer": fused_optimizer, "lr": lr, "momentum": momentum, "weight_decay": weight_decay,
             "loader_workers": loader_workers, "repeats": repeats, "epochs": epochs, "eval_data": eval_data, "eval_images": eval_images,
             "target_top1": target_top1, "base_batch_size": base_batch_size, "schedule": schedule,
             "warmup_epochs": warmup_epochs, "placement": placement, "workers": workers,
             "deterministic": deterministic, "checkpoint_dir": str(checkpoint_dir) if checkpoint_dir else None,
             "label_space": label_space, "labels": labels, "mean": mean, "std": std}
    layers = a.layers(config, "train", flags)
    converge = any(layer.get("epochs") is not None for layer in layers)
    _check_flags(layers, converge)
    opts = a.launch_options(gpus, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                            global_batch=global_batch, timeout_s=timeout_s, device=device)
    if converge and opts is not None:
        fail("--gpus applies to the step-throughput sweep (no --epochs)")
    if not converge and plot:
        fail("--plot applies to a convergence run (--epochs N)")
    if opts is not None and any(layer.get("loader_workers") is not None for layer in layers):
        fail("--loader-workers does not apply with --gpus")
    spec = api.spec("converge" if converge else "train_step", *layers)
    where, store = a.before_run(spec, opts, db, outputs=[json_path, plot])
    if converge:
        return _converge(spec, store, json_path, resume, plot, wide)
    console.print(f"accelbench train: step throughput of {', '.join(spec.models)} on {where} ({spec.data}), db {db}")
    out = a.run_with_progress(api.train, spec, store, opts=opts, resume=resume)
    if out is None:
        raise typer.Exit(0)
    for r in store.cases(out.run_id).to_dict("records"):
        if r.get("input_bound") == 1:
            from accelbench.report.table import case_label

            console.print(styled("input-bound:", "yellow", f" {case_label(r)}: the loader delivers "
                                 f"{r['loader_samples_per_s']:,.0f} img/s, the step takes {r['throughput_samples_per_s']:,.0f} img/s"))
    a.finish_outcome(out, store, json_path=json_path, wide=wide)


def _converge(spec, store, json_path: Optional[Path], resume: bool, plot: Optional[Path], wide: bool) -> None:
    from accelbench import api
    from accelbench.report.train import epoch_table, plot_convergence

    s = spec.settings
    console.print(f"accelbench train: {spec.models[0]} from scratch on {spec.device}, {s.epochs} epochs, batch sizes "
                  f"{', '.join(map(str, spec.batch_sizes))} ({spec.data} -> {s.eval_data}, {s.placement}), db {store.path}")

    def on_row(r: dict[str, Any]) -> None:
        console.print(f"bs={r['batch_size']} epoch {r['epoch']}/{s.epochs}: loss {r['train_loss']:.3f}, test top-1 "
                      f"{100 * r['eval_top1']:.2f}%, {r['epoch_wall_s']:.1f} s" + (" (input-bound)" if r["input_bound"] else ""))

    out = api.train(spec, store, resume=resume, on_row=on_row)
    records = store.cases(out.run_id).to_dict("records")
    for bs, e in out.resumed.items():
        console.print(f"bs={bs}: resumed after epoch {e} from its checkpoint")
    console.print(epoch_table(records, title=f"Run {out.run_id}: test top-1 per epoch ({s.eval_data})"))
    det = "on" if s.deterministic else "off"
    console.print(f"seed {spec.seed}; cuDNN determinism {det}; lr = {s.base_lr} x batch / {s.base_batch_size}, "
                  f"{s.schedule} schedule with {s.warmup_epochs} warm-up epochs")
    if plot and any(r.get("row_type") == "epoch" for r in records):
        console.print(f"wrote {plot_convergence(records, plot, title=f'{spec.models[0]} on {spec.data}')}")
    a.finish_outcome(out, store, json_path=json_path, wide=wide)


@command("input-pipeline")
def input_pipeline(
    data: str = typer.Option("cifar10-train-5k", "--data", help="cifar10-train-5k, cifar10-test, or an ImageFolder dir/.tar(.gz)."),
    images: Optional[int] = typer.Option(None, "--images", "-n", help="Images to load (default all)."),
    workers: str = typer.Option("0,2,4,8", "--workers", "-w", help="DataLoader worker counts, e.g. 0,2,4,8."),
    batch_size: int = typer.Option(256, "--batch-size", "-b", help="Images per batch."),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Resize in the loader (default: as stored; images of mixed sizes: 224)."),
    pin_memory: bool = typer.Option(True, "--pin-memory/--no-pin-memory", help="Pin batches (CUDA machines)."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Random crop (padding 4) + flip."),
    min_batches: int = typer.Option(10, "--min-batches", help="Batches timed per row, after the first."),
    storage: bool = typer.Option(True, "--storage/--no-storage", help="Cold vs warm read test of the data files."),
    evict: str = typer.Option("fadvise", "--evict", help="Cold reads: fadvise (posix_fadvise DONTNEED on the files read, "
                              "default), drop-caches (root: drops the whole page cache, slowing every job on the host), "
                              "auto (deprecated: the same as fadvise)."),
    resident: bool = typer.Option(True, "--resident/--no-resident", help="Also time the device-resident path."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N."), telemetry_period_ms: Optional[float] = a.TELEMETRY,
    idle_s: Optional[float] = a.IDLE, skip_bad_images: Optional[bool] = a.SKIP_BAD, db: Path = a.DB,
    json_path: Optional[Path] = a.JSON,
) -> None:
    """Input pipeline alone: DataLoader images/s (decode + augment + collate) per worker count, the
    device-resident path, and storage read MB/s cold vs warm."""
    from accelbench import api
    from accelbench.scenarios.train.pipeline import DEPRECATED_EVICT

    flags = dict(data=data, images=images, workers=_worker_counts(workers), batch_size=batch_size, image_size=image_size,
                 pin_memory=pin_memory, augment=augment, min_batches=min_batches, storage=storage, evict=evict,
                 resident=resident, device=device, telemetry_period_ms=telemetry_period_ms, idle_s=idle_s,
                 skip_bad_images=skip_bad_images)
    spec = api.spec("input_pipeline", flags)
    _, store = a.before_run(spec, None, db, outputs=[json_path])
    if evict in DEPRECATED_EVICT:
        err_console.print(styled("warning:", "yellow", f" --evict {evict} is deprecated: {DEPRECATED_EVICT[evict]}"))
    out = a.run_with_progress(api.input_pipeline, spec, store)
    a.finish_outcome(out, store, json_path=json_path, wide=True)


def _worker_counts(text: str) -> tuple:
    """``-w 0,2,4`` as a tuple of ints; a one-line error naming ``workers`` otherwise."""
    from accelbench.core.config import parse_list
    from accelbench.core.errors import ConfigError

    try:
        return parse_list("batch_sizes", text)  # the integer-list parser; its error would name batch sizes
    except ConfigError:
        raise ConfigError("workers", text, "a comma-separated list of integers >= 0, e.g. 0,2,4,8") from None
