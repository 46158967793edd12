"""``accelbench train`` (step-throughput sweep, or convergence with ``--epochs``) and ``accelbench
input-pipeline``. Registered by one import line in :mod:`accelbench.cli`; the commands only parse."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import DB_OPTION, app, console, err_console, fail, finish, styled
from accelbench.report.table import case_label
from accelbench.errors import AccelbenchError

SWEEP_ONLY = ("warmup_batches", "min_timed_batches", "min_time_s", "loader_workers")
CONVERGE_ONLY = ("eval_data", "eval_images", "target_top1", "base_batch_size", "schedule", "warmup_epochs",
                 "placement", "workers", "deterministic", "checkpoint_dir")


def _layers(config: Optional[Path], flags: dict) -> list[dict]:
    from accelbench.spec import load_toml, table

    layers = []
    if config:
        layers.append(table(load_toml(config), "train", config))
    return layers + [flags]


def _check_flags(layers: list[dict], converge: bool) -> None:
    wrong = SWEEP_ONLY if converge else CONVERGE_ONLY
    for layer in layers:
        for key, value in layer.items():
            if value is not None and key.replace("-", "_") in wrong:
                need = "a step-throughput sweep (no --epochs)" if converge else "a convergence run (--epochs N)"
                fail(f"{key.replace('_', '-')} applies to {need}")


@app.command()
def train(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Model(s); one for --epochs. Default GPU resnet50, CPU cifar-resnet20."),
    batch_sizes: Optional[str] = typer.Option(None, "--batch-sizes", "-b", help="e.g. 64,128,256,512; with --epochs: the batch sizes to compare."),
    precisions: Optional[str] = typer.Option(None, "--precisions", "-p", help="fp32,tf32,amp-fp16,amp-bf16,bf16 (one with --epochs)."),
    modes: Optional[str] = typer.Option(None, "--modes", help="eager,compile (one with --epochs)."),
    channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="Default: where it helps (CUDA, below fp32)."),
    data: Optional[str] = typer.Option(None, "--data", help="cifar10-train-5k (default), synthetic, or an ImageFolder dir/.tar/.tar.gz."),
    images: Optional[int] = typer.Option(None, "--images", "-n", help="Sweep: distinct images cycled. --epochs: training images used (default all)."),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Input side in pixels (default: the model's)."),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N"),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="sgd (momentum, default) or adamw."),
    lr: Optional[float] = typer.Option(None, "--lr", help="Sweep: the step's lr. --epochs: peak lr at --base-batch-size (scaled linearly)."),
    momentum: Optional[float] = typer.Option(None, "--momentum"),
    weight_decay: Optional[float] = typer.Option(None, "--weight-decay"),
    warmup_batches: Optional[int] = typer.Option(None, "--warmup-batches", help="Sweep: untimed steps after the first."),
    min_timed_batches: Optional[int] = typer.Option(None, "--min-timed-batches"),
    min_time_s: Optional[float] = typer.Option(None, "--min-time-s"),
    loader_workers: Optional[int] = typer.Option(None, "--loader-workers", help="Sweep: also time a DataLoader with N workers and flag input-bound cases."),
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
    seed: Optional[int] = typer.Option(None, "--seed"),
    skip_bad_images: Optional[bool] = typer.Option(None, "--skip-bad-images", help="Drop image files that do not decode (counted) instead of stopping."),
    wide: bool = typer.Option(False, "--wide", help="Every column (default: a compact table that fits 80 columns)."),
    db: Path = DB_OPTION,
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the run (spec, environment, results) as JSON."),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="TOML file (top level or a [train] table); flags override it."),
    resume: bool = typer.Option(False, "--resume", help="Continue the newest unfinished run with the same settings."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Step throughput with DDP over N GPUs (N CPU processes without GPUs) through torchrun."),
    nnodes: int = typer.Option(1, "--nnodes", help="With --gpus: nodes (torchrun --nnodes); run the same command on each."),
    node_rank: int = typer.Option(0, "--node-rank", help="With --gpus: this node's index (torchrun --node-rank)."),
    rdzv_endpoint: Optional[str] = typer.Option(None, "--rdzv-endpoint", help="With --gpus: rendezvous host:port (torchrun)."),
    global_batch: bool = typer.Option(False, "--global-batch", help="With --gpus: batch sizes are global, split over ranks."),
    timeout_s: float = typer.Option(900.0, "--timeout-s", help="With --gpus: seconds a case may run before its ranks are stopped."),
) -> None:
    """Training benchmarks: step throughput (model x batch size x precision x mode) or, with --epochs,
    training to accuracy (batch sizes compared, time to target top-1)."""
    flags = dict(models=model, batch_sizes=batch_sizes, precisions=precisions, modes=modes, channels_last=channels_last,
                 data=data, image_size=image_size, device=device, optimizer=optimizer, momentum=momentum,
                 weight_decay=weight_decay, warmup_batches=warmup_batches, min_timed_batches=min_timed_batches,
                 min_time_s=min_time_s, loader_workers=loader_workers, eval_data=eval_data, eval_images=eval_images,
                 target_top1=target_top1, base_batch_size=base_batch_size, schedule=schedule, warmup_epochs=warmup_epochs,
                 placement=placement, workers=workers, deterministic=deterministic, seed=seed, skip_bad_images=skip_bad_images,
                 checkpoint_dir=str(checkpoint_dir) if checkpoint_dir else None)
    try:
        layers = _layers(config, flags)
        converge = epochs is not None or any(layer.get("epochs") is not None for layer in layers)
        _check_flags(layers, converge)
        from accelbench.cli_multi import launched_as_rank, train_data_parallel

        if gpus is not None or launched_as_rank():  # DDP step throughput: accelbench.cli_multi
            if converge:
                fail("--gpus applies to the step-throughput sweep (no --epochs)")
            return train_data_parallel(layers, {"images": images, "lr": lr}, db, json_path, gpus or 1,
                                       dict(nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                                            global_batch=global_batch, timeout_s=timeout_s), resume)
        if converge:
            layers.append({"epochs": epochs, "train_images": images, "lr": lr})
            _converge(layers, db, json_path, resume, plot)
        else:
            if plot:
                fail("--plot applies to a convergence run (--epochs N)")
            layers.append({"images": images, "lr": lr})
            _sweep(layers, db, json_path, resume, wide)
    except AccelbenchError as exc:
        fail(str(exc))


def _device(layers: list[dict]):
    from accelbench.measure import resolve_device

    name = next((layer["device"] for layer in reversed(layers) if layer.get("device")), "auto")
    return resolve_device(name)


def _sweep(layers: list[dict], db: Path, json_path: Optional[Path], resume: bool, wide: bool = False) -> None:
    from accelbench.cli import finish, print_outcome, progress_bar, progress_cb
    from accelbench.report.train import sweep_table
    from accelbench.store import Store
    from accelbench.train.spec import build_train_spec
    from accelbench.train.throughput import run_train_sweep

    dev = _device(layers)
    spec = build_train_spec(*layers, cuda=dev.type == "cuda")
    store = Store(db)
    console.print(f"accelbench train: step throughput of {', '.join(spec.models)} on {dev} ({spec.data}), db {db}")
    with progress_bar() as progress:
        task = progress.add_task("checking the models and data", total=None)
        out = run_train_sweep(spec, store, resume=resume, on_case=progress_cb(progress, task))
    print_outcome(out.run_id, store, wide=wide, resumed=out.skipped_done, table=sweep_table)
    for r in store.cases(out.run_id).to_dict("records"):
        if r.get("input_bound") == 1:
            console.print(styled("input-bound:", "yellow", f" {case_label(r)}: the loader delivers "
                                 f"{r['loader_samples_per_s']:,.0f} img/s, the step takes {r['throughput_samples_per_s']:,.0f} img/s"))
    finish(store, out.run_id, interrupted=out.interrupted, json_path=json_path, statuses=[r["status"] for r in out.records])


def _converge(layers: list[dict], db: Path, json_path: Optional[Path], resume: bool, plot: Optional[Path]) -> None:
    from accelbench.report.train import epoch_table, plot_convergence, summary_table
    from accelbench.store import Store
    from accelbench.train.converge import run_convergence
    from accelbench.train.spec import build_converge_spec

    dev = _device(layers)
    spec = build_converge_spec(*layers, cuda=dev.type == "cuda")
    store = Store(db)
    console.print(f"accelbench train: {spec.model} from scratch on {dev}, {spec.epochs} epochs, batch sizes "
                  f"{', '.join(map(str, spec.batch_sizes))} ({spec.data} -> {spec.eval_data}, {spec.placement}), db {db}")

    def on_epoch(bs: int, r: dict) -> None:
        console.print(f"bs={bs} epoch {r['epoch']}/{spec.epochs}: loss {r['train_loss']:.3f}, test top-1 "
                      f"{100 * r['eval_top1']:.2f}%, {r['epoch_wall_s']:.1f} s" + (" (input-bound)" if r["input_bound"] else ""))

    def on_note(line: str) -> None:  # a checkpoint that could not be used on resume: which, why, where from
        err_console.print(styled("error:", "red", " " + line))

    out = run_convergence(spec, store, resume=resume, on_epoch=on_epoch, on_note=on_note)
    records = store.cases(out.run_id).to_dict("records")
    for bs, e in out.resumed.items():
        console.print(f"bs={bs}: resumed after epoch {e} from its checkpoint")
    console.print(epoch_table(records, title=f"Run {out.run_id}: test top-1 per epoch ({spec.eval_data})"))
    console.print(summary_table(records, title=f"target top-1 {spec.target_top1}" if spec.target_top1 else None))
    det = "on" if spec.deterministic else "off"
    console.print(f"seed {spec.seed}; cuDNN determinism {det}; lr = {spec.base_lr} x batch / {spec.base_batch_size}, "
                  f"{spec.schedule} schedule with {spec.warmup_epochs} warm-up epochs")
    if plot and any(r.get("row_type") == "epoch" for r in records):
        console.print(f"wrote {plot_convergence(records, plot, title=f'{spec.model} on {spec.data}')}")
    finish(store, out.run_id, interrupted=out.interrupted, json_path=json_path)


@app.command("input-pipeline")
def input_pipeline(
    data: str = typer.Option("cifar10-train-5k", "--data", help="cifar10-train-5k, cifar10-test, or an ImageFolder dir/.tar(.gz)."),
    images: Optional[int] = typer.Option(None, "--images", "-n", help="Images to load (default all)."),
    workers: str = typer.Option("0,2,4,8", "--workers", "-w", help="DataLoader worker counts, e.g. 0,2,4,8."),
    batch_size: int = typer.Option(256, "--batch-size", "-b"),
    image_size: Optional[int] = typer.Option(None, "--image-size", help="Resize in the loader (default: as stored)."),
    pin_memory: bool = typer.Option(True, "--pin-memory/--no-pin-memory", help="Pin batches (CUDA machines)."),
    augment: bool = typer.Option(True, "--augment/--no-augment", help="Random crop (padding 4) + flip."),
    min_batches: int = typer.Option(10, "--min-batches", help="Batches timed per row, after the first."),
    storage: bool = typer.Option(True, "--storage/--no-storage", help="Cold vs warm read test of the data files."),
    evict: str = typer.Option("fadvise", "--evict", help="Cold reads: fadvise (posix_fadvise DONTNEED on the files read, "
                              "default), drop-caches (root: drops the whole page cache, slowing every job on the host), "
                              "auto (deprecated: the same as fadvise)."),
    resident: bool = typer.Option(True, "--resident/--no-resident", help="Also time the device-resident path."),
    device: str = typer.Option("auto", "--device"),
    db: Path = DB_OPTION,
    json_path: Optional[Path] = typer.Option(None, "--json"),
) -> None:
    """Input pipeline alone: DataLoader images/s (decode + augment + collate) per worker count, the
    device-resident path, and storage read MB/s cold vs warm."""
    from accelbench.report.train import pipeline_table
    from accelbench.spec import parse_list
    from accelbench.store import Store
    from accelbench.train.input_bench import PipelineSpec, run_input_pipeline
    from accelbench.train.pipeline import DEPRECATED_EVICT

    try:
        spec = PipelineSpec(data=data, images=images, workers=parse_list("batch_sizes", workers), batch_size=batch_size,
                            image_size=image_size, pin_memory=pin_memory, augment=augment, min_batches=min_batches,
                            storage=storage, evict=evict, resident=resident, device=device)
        store = Store(db)
        if evict in DEPRECATED_EVICT:
            err_console.print(styled("warning:", "yellow", f" --evict {evict} is deprecated: {DEPRECATED_EVICT[evict]}"))
        run_id, records = run_input_pipeline(spec, store)
    except AccelbenchError as exc:
        fail(str(exc))
    console.print(pipeline_table(records, title=f"Input pipeline, run {run_id}: {data}, batch {batch_size}"))
    finish(store, run_id, json_path=json_path, statuses=[r["status"] for r in records])
