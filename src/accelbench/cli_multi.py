"""Multi-GPU commands: ``scale``, ``interconnect``, ``concurrent``, and ``--gpus N`` for ``run`` and ``train``.

Each command only parses flags and calls :mod:`accelbench.distributed`. They follow the exit-code contract of
every command (:mod:`accelbench.errors`): the sweeps end through :func:`accelbench.cli.finish` (0 every case
ran, 1 a case ended in ``error``, 130 interrupted and resumable with ``--resume``); bad input is one line and
exit 2 before any run exists.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from accelbench.cli import DB_OPTION, app, console, err_console, fail, finish, styled
from accelbench.errors import EXIT_CASE_ERRORS, EXIT_INTERRUPTED, AccelbenchError

# Options shared by the commands below (typer reads these objects per command).
MODEL = typer.Option(None, "--model", "-m", help="Model(s), comma-separated (see accelbench models).")
BATCH = typer.Option(None, "--batch-sizes", "-b", help="Per-GPU batch sizes (global with --global-batch).")
PREC = typer.Option(None, "--precisions", "-p", help="fp32,tf32,amp-fp16,amp-bf16,fp16,bf16")
MODES = typer.Option(None, "--modes", help="eager,compile,max-autotune (cudagraphs: inference only)")
CL = typer.Option(None, "--channels-last/--no-channels-last", help="Default: where it helps.")
IMAGES = typer.Option(None, "--images", "-n", help="Images per pass, split over the ranks.")
DATA = typer.Option(None, "--data", help="cifar10-test, cifar10-train-5k, synthetic, or an ImageFolder path.")
SIZE = typer.Option(None, "--image-size", help="Input side in pixels (default: the model's).")
DEVICE = typer.Option(None, "--device", help="auto (GPUs when visible), cuda, or cpu (gloo processes).")
WARM = typer.Option(None, "--warmup-batches")
MIN_B = typer.Option(None, "--min-timed-batches")
MIN_T = typer.Option(None, "--min-time-s")
CONFIG = typer.Option(None, "--config", "-c", help="Sweep TOML file; flags override it.")
WORKLOAD = typer.Option("inference", "--workload", "-w", help="inference (data parallel) or train (DDP steps).")
GLOBAL = typer.Option(False, "--global-batch", help="Batch sizes are global, split over the ranks (strong scaling).")
NNODES = typer.Option(1, "--nnodes", help="Nodes (torchrun --nnodes); run the same command on each.")
NODE_RANK = typer.Option(0, "--node-rank", help="This node's index (torchrun --node-rank).")
RDZV = typer.Option(None, "--rdzv-endpoint", help="host:port of the rendezvous (torchrun --rdzv-endpoint).")
TIMEOUT = typer.Option(900.0, "--timeout-s", help="Seconds a case may run before its ranks are stopped.")
JSON = typer.Option(None, "--json", help="Also write the run (spec, environment, results) as JSON.")
RESUME = typer.Option(False, "--resume", help="Continue the newest unfinished run of the same settings (its missing cases only).")


def dist_device(spec_device: str | None) -> str:
    """DistOptions.device for a sweep's device: each rank picks ``cuda:<local rank>`` itself."""
    if spec_device in (None, "auto"):
        return "auto"
    return "cpu" if spec_device == "cpu" else "cuda"


def build(flags: dict[str, Any], config: Optional[Path]):
    """The sweep spec from a TOML config and flags, with GPU or CPU defaults as the ranks will run."""
    import torch

    from accelbench.spec import build_spec, load_toml

    layers = [load_toml(config)] if config else []
    device = flags.get("device") or next((lay.get("device") for lay in layers if lay.get("device")), "auto")
    cuda = device != "cpu" and torch.cuda.is_available()
    return build_spec(*layers, flags, cuda=cuda)


def options(spec, gpus: int = 1, **kw):
    from accelbench.distributed.job import DistOptions

    return DistOptions(gpus=gpus, device=dist_device(spec.device), **kw)


def _flags(model, batch_sizes, precisions, modes, channels_last, images, data, image_size, device, warm, min_b, min_t):
    return dict(models=model, batch_sizes=batch_sizes, precisions=precisions, modes=modes, channels_last=channels_last,
                images=images, data=data, image_size=image_size, device=device, warmup_batches=warm,
                min_timed_batches=min_b, min_time_s=min_t)


def launched_as_rank() -> bool:
    """True in a process started by a user's torchrun or srun (rank variables set)."""
    from accelbench.distributed.ranks import rank_info

    return rank_info() is not None


_SPEC_KEYS = ("models", "batch_sizes", "precisions", "modes", "channels_last", "images", "data", "image_size",
              "device", "warmup_batches", "min_timed_batches", "min_time_s", "seed")
_STEP_KEYS = ("optimizer", "lr", "momentum", "weight_decay")


def train_data_parallel(layers: list[dict], extra: dict, db: Path, json_path: Optional[Path], gpus: int, launch: dict,
                        resume: bool = False) -> None:
    """``accelbench train --gpus N``: the step-throughput sweep's flags as a DDP sweep (issue 4's defaults)."""
    import torch

    from accelbench.spec import build_spec
    from accelbench.train.spec import TRAIN_CPU_DEFAULTS, TRAIN_GPU_DEFAULTS

    merged = {k: v for layer in [*layers, extra] for k, v in layer.items() if v is not None}
    if merged.get("loader_workers") is not None:
        fail("--loader-workers does not apply with --gpus")
    device = merged.get("device", "auto")
    cuda = device != "cpu" and torch.cuda.is_available()
    base = {k: v for k, v in (TRAIN_GPU_DEFAULTS if cuda else TRAIN_CPU_DEFAULTS).items() if k in _SPEC_KEYS}
    spec = build_spec({**base, "data": "cifar10-train-5k"}, {k: v for k, v in merged.items() if k in _SPEC_KEYS},
                      {"extra": {k: merged[k] for k in _STEP_KEYS if k in merged}}, cuda=cuda)
    run_data_parallel(spec, db, json_path, options(spec, gpus, **launch), workload="train", resume=resume)


def run_data_parallel(spec, db: Path, json_path: Optional[Path], opts, workload: str = "inference",
                      resume: bool = False) -> None:
    """``accelbench run --gpus N`` / ``train --gpus N`` (and a run started by a user's torchrun/srun): run, print, exit.

    Args:
        resume: continue the newest unfinished run of the same sweep (not for a rank of a user's job).
    Raises:
        typer.Exit: from :func:`accelbench.cli.finish` (0, 1 or 130); nothing on ranks other than 0 of a user's job.
        AccelbenchError: bad input, a store that cannot be used, a run being resumed elsewhere (the caller exits 2).
    """
    from accelbench.distributed.ranks import rank_info
    from accelbench.distributed.runner import DistOutcome, run_distributed, run_here
    from accelbench.store import Store

    info = rank_info()
    if info is not None:  # we are one rank of someone else's job
        run_id = run_here(spec, str(db), info, workload, opts, echo=console.print)
        if info.rank != 0:
            return
        store = Store(db)
        out = DistOutcome(run_id=run_id, rows=_aggregates(store, run_id))
    else:
        store = Store(db)
        console.print(f"accelbench {workload} on {opts.world_size} ranks ({opts.gpus} per node x {opts.nnodes} nodes), db {db}")
        out = run_distributed(spec, store, opts, workload, resume=resume)
    rows = _aggregates(store, out.run_id)
    if not rows and opts.nnodes > 1 and not out.interrupted:
        console.print(f"global rank 0 ran on another node: the results are in that node's store (run {out.run_id} here is empty)")
        return
    _print_sweep(rows, f"Run {out.run_id}: data-parallel {workload}", workload)
    if out.skipped_done:
        console.print(f"resumed run {out.run_id}: {out.skipped_done} cases were already done")
    finish(store, out.run_id, interrupted=out.interrupted, json_path=json_path, statuses=[r["status"] for r in out.rows])


def _aggregates(store, run_id: int) -> list[dict[str, Any]]:
    return [r for r in store.cases(run_id).to_dict("records") if r.get("aggregate") == 1]


def _print_sweep(rows: list[dict[str, Any]], title: str, workload: str) -> None:
    """The scaling table, the training settings, and one note per case that did not run (why, on how many ranks)."""
    from accelbench.report.scaling import scale_table
    from accelbench.report.table import case_notes

    if not rows:
        console.print("no cases ran")
        return
    console.print(scale_table(rows, title=title))
    ok = [r for r in rows if r.get("status") == "ok"]
    if workload == "train" and ok:
        console.print(f"optimizer {ok[0].get('optimizer')}, lr {ok[0].get('lr')}; comm share: the step with gradient "
                      "all-reduce against the same step under no_sync()")
    if ok and not any(r.get("scaling_efficiency") == r.get("scaling_efficiency") for r in rows):
        console.print("no 1-GPU result of these cases in the store yet: run with --gpus 1 (or accelbench scale) for speed-up")
    for r in rows:
        for label, text in case_notes([r]):
            style = "yellow" if label in ("unsupported:", "skipped:", "flagged:") else "red"
            where = f" on {int(r['world_size'])} ranks" if r.get("world_size") == r.get("world_size") else ""
            (err_console if label == "error:" else console).print(styled(label, style, f" {text}{where}"))


@app.command()
def scale(
    gpus: str = typer.Option("1,2", "--gpus", help="Process counts, e.g. 1,2,4 (GPUs; CPU processes without GPUs)."),
    workload: str = WORKLOAD, model: Optional[str] = MODEL, batch_sizes: Optional[str] = BATCH,
    precisions: Optional[str] = PREC, modes: Optional[str] = MODES, channels_last: Optional[bool] = CL,
    images: Optional[int] = IMAGES, data: Optional[str] = DATA, image_size: Optional[int] = SIZE,
    device: Optional[str] = DEVICE, warmup_batches: Optional[int] = WARM, min_timed_batches: Optional[int] = MIN_B,
    min_time_s: Optional[float] = MIN_T, global_batch: bool = GLOBAL, timeout_s: float = TIMEOUT,
    config: Optional[Path] = CONFIG, db: Path = DB_OPTION, json_path: Optional[Path] = JSON,
    plot: Optional[Path] = typer.Option(None, "--plot", help="Save throughput vs GPUs as an image (needs matplotlib)."),
    resume: bool = RESUME,
) -> None:
    """Scaling study: the same sweep on 1, 2, 4, ... GPUs; speed-up and scaling efficiency, stored for plotting."""
    from accelbench.distributed.study import run_scale
    from accelbench.report.scaling import plot_scaling
    from accelbench.spec import parse_list
    from accelbench.store import Store

    try:
        counts = list(parse_list("batch_sizes", gpus))
        spec = build(_flags(model, batch_sizes, precisions, modes, channels_last, images, data, image_size, device,
                            warmup_batches, min_timed_batches, min_time_s), config)
        opts = options(spec, global_batch=global_batch, timeout_s=timeout_s)
        store = Store(db)
        out = run_scale(spec, store, opts, counts, workload, resume=resume)
    except AccelbenchError as exc:
        fail(str(exc))
    _print_sweep(out.rows, f"Run {out.run_id}: scaling study ({workload})", workload)
    if out.skipped_done:
        console.print(f"resumed run {out.run_id}: {out.skipped_done} cases were already done")
    if plot and out.rows:
        plot_scaling(out.rows, str(plot))
        console.print(f"wrote {plot}")
    finish(store, out.run_id, interrupted=out.interrupted, json_path=json_path, statuses=out.statuses)


@app.command()
def interconnect(
    gpus: Optional[int] = typer.Option(None, "--gpus", help="Ranks (default: every visible GPU; 2 CPU processes without GPUs)."),
    ops: str = typer.Option("all_reduce,all_gather,broadcast", "--ops", help="Collectives to time."),
    min_bytes: str = typer.Option("1K", "--min-bytes", help="Smallest message (nccl-tests -b)."),
    max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help="Largest message (default 1G on GPUs, 4M on CPUs)."),
    factor: int = typer.Option(2, "--factor", help="Size multiplier between steps (nccl-tests -f)."),
    warmup: int = typer.Option(5, "--warmup"), iters: int = typer.Option(20, "--iters"),
    p2p_bytes: str = typer.Option("256M", "--p2p-bytes", help="Buffer copied between each GPU pair (0: skip)."),
    device: Optional[str] = DEVICE, nnodes: int = NNODES, node_rank: int = NODE_RANK, rdzv_endpoint: Optional[str] = RDZV,
    timeout_s: float = TIMEOUT, db: Path = DB_OPTION, json_path: Optional[Path] = JSON,
) -> None:
    """Interconnect: collective time, algorithm and bus bandwidth over sizes; GPU pair copies; NVLink/PCIe topology."""
    import torch

    from accelbench.distributed.collectives import parse_bytes, sizes_between
    from accelbench.distributed.interconnect import InterconnectSpec, run_interconnect
    from accelbench.distributed.job import DistOptions
    from accelbench.report.scaling import collective_table, p2p_table
    from accelbench.runner import write_json
    from accelbench.store import Store

    cuda = dist_device(device) != "cpu" and torch.cuda.is_available()
    try:
        n = gpus or (torch.cuda.device_count() if cuda else 2)
        sizes = sizes_between(parse_bytes(min_bytes), parse_bytes(max_bytes or ("1G" if cuda else "4M")), factor)
        spec = InterconnectSpec(ops=tuple(o.strip() for o in ops.split(",") if o.strip()), sizes=tuple(sizes),
                                warmup=warmup, iters=iters, p2p_bytes=parse_bytes(p2p_bytes))
        opts = DistOptions(gpus=n, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                           timeout_s=timeout_s, device=dist_device(device))
        store = Store(db)
        run_id, rows = run_interconnect(spec, opts, store)
    except (AccelbenchError, ValueError) as exc:
        fail(str(exc))
    status = store.run(run_id)["status"]
    if status == "interrupted":  # one launch, nothing to resume: rank 0 stores its rows at the end
        err_console.print(f"interrupted: run {run_id} stopped before the ranks stored their rows; run it again")
        raise typer.Exit(EXIT_INTERRUPTED)
    console.print(collective_table(rows, title=f"Run {run_id}: collectives over {opts.world_size} ranks"))
    table = p2p_table(rows)
    if table is not None:
        console.print(table)
    for r in rows:
        if r.get("status") != "ok":
            err_console.print(styled(f"{r.get('status')}:", "red", f" {r.get('error')}"))
    if json_path:
        write_json(json_path, store, run_id)
    console.print(f"stored run {run_id} in {store.path}")
    raise typer.Exit(EXIT_CASE_ERRORS if status == "failed" else 0)


@app.command()
def concurrent(
    models: str = typer.Option(..., "--models", help="One job per model, e.g. resnet50,vit_b_16 (repeat a name for copies)."),
    gpus_per_job: int = typer.Option(1, "--gpus-per-job", help="GPUs (processes) of each job; sets are disjoint."),
    sequential_gpus: Optional[int] = typer.Option(None, "--sequential-gpus", help="GPUs per job when run alone (default: the same)."),
    workload: str = WORKLOAD, batch_sizes: Optional[str] = BATCH, precisions: Optional[str] = PREC,
    modes: Optional[str] = MODES, channels_last: Optional[bool] = CL, images: Optional[int] = IMAGES,
    data: Optional[str] = DATA, image_size: Optional[int] = SIZE, device: Optional[str] = DEVICE,
    warmup_batches: Optional[int] = WARM, min_timed_batches: Optional[int] = MIN_B, min_time_s: Optional[float] = MIN_T,
    timeout_s: float = TIMEOUT, config: Optional[Path] = CONFIG, db: Path = DB_OPTION, resume: bool = RESUME,
) -> None:
    """Concurrent jobs: K jobs at once on disjoint GPU sets vs one after another (total time compared)."""
    from accelbench.distributed.study import ConcurrentJob, run_concurrent
    from accelbench.report.scaling import concurrent_table
    from accelbench.store import Store

    try:
        names = [m.strip() for m in models.split(",") if m.strip()]
        base = _flags(None, batch_sizes, precisions, modes, channels_last, images, data, image_size, device,
                      warmup_batches, min_timed_batches, min_time_s)
        jobs = [ConcurrentJob(spec=build({**base, "models": m}, config), workload=workload, gpus=gpus_per_job) for m in names]
        store = Store(db)
        out = run_concurrent(jobs, store, options(jobs[0].spec, timeout_s=timeout_s), sequential_gpus, resume=resume)
    except AccelbenchError as exc:
        fail(str(exc))
    console.print(concurrent_table(out.rows, title=f"Run {out.run_id}: {len(jobs)} jobs, concurrent vs sequential"))
    summary = {r["schedule"]: r for r in out.rows if r.get("workload") == "concurrent-summary"}
    for name in ("concurrent", "sequential"):
        if name in summary:
            r, work = summary[name], summary[name].get("work_time_s")
            console.print(f"{name}: wall {r['makespan_s']:.1f} s" + (f", work time {work:.2f} s" if work == work and work else ""))
    if "comparison" in summary:
        c, over = summary["comparison"], summary["concurrent"].get("overlap_fraction")
        work = f"{c['work_speedup']:.2f}x on work time, " if c.get("work_speedup") == c.get("work_speedup") else ""
        console.print(f"concurrent vs sequential: {work}{c['makespan_speedup']:.2f}x on wall time"
                      + (f" (timed windows overlapped {100 * over:.0f}%)" if over == over and over is not None else ""))
    if out.skipped_done:
        console.print(f"resumed run {out.run_id}: {out.skipped_done} phases were already done")
    finish(store, out.run_id, interrupted=out.interrupted, statuses=out.statuses)
