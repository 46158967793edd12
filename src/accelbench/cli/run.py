"""``accelbench run``: the inference sweep (parsing only; the work is :func:`accelbench.api.run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.help import HOW, WHAT


@command()
def run(
    model: Optional[str] = a.MODEL, batch_sizes: Optional[str] = a.BATCH, precisions: Optional[str] = a.PREC,
    modes: Optional[str] = a.MODES, channels_last: Optional[bool] = a.CL, images: Optional[int] = a.IMAGES,
    data: Optional[str] = a.DATA, image_size: Optional[int] = a.SIZE, device: Optional[str] = a.DEVICE,
    include_transfer: Optional[bool] = typer.Option(None, "--include-transfer/--no-include-transfer", rich_help_panel=HOW, help="Time the host-to-device copy too."),
    calibration_images: Optional[int] = typer.Option(None, "--calibration-images", rich_help_panel=WHAT, help="Images that calibrate int8 (default 512), disjoint from the measured ones."),
    warmup_batches: Optional[int] = a.WARM, min_timed_batches: Optional[int] = a.MIN_B, min_time_s: Optional[float] = a.MIN_T,
    repeats: Optional[int] = a.REPEATS, telemetry_period_ms: Optional[float] = a.TELEMETRY, idle_s: Optional[float] = a.IDLE,
    price_per_hour: Optional[float] = a.PRICE, kwh_price: Optional[float] = a.KWH,
    label_space: Optional[str] = a.LABEL_SPACE, labels: Optional[str] = a.LABELS, mean: Optional[str] = a.MEAN,
    std: Optional[str] = a.STD, resize: Optional[int] = a.RESIZE, crop_pct: Optional[float] = a.CROP_PCT,
    cudnn_benchmark: Optional[bool] = a.CUDNN, skip_bad_images: Optional[bool] = a.SKIP_BAD, seed: Optional[int] = a.SEED, db: Path = a.DB,
    json_path: Optional[Path] = a.JSON, config: Optional[Path] = a.CONFIG, resume: bool = a.RESUME,
    gpus: Optional[int] = a.GPUS, nnodes: int = a.NNODES, node_rank: int = a.NODE_RANK,
    rdzv_endpoint: Optional[str] = a.RDZV, global_batch: bool = a.GLOBAL, timeout_s: float = a.TIMEOUT,
    wide: bool = a.WIDE,
) -> None:
    """Inference sweep: model x batch size x precision x mode, on real images, stored with provenance."""
    from accelbench import api

    flags = {**a.shared_flags(model, batch_sizes, precisions, modes, channels_last, images, data, image_size, device,
                              warmup_batches, min_timed_batches, min_time_s, telemetry_period_ms, idle_s,
                              price_per_hour, kwh_price, skip_bad_images, seed), "include_transfer": include_transfer,
             "cudnn_benchmark": cudnn_benchmark, "repeats": repeats, "calibration_images": calibration_images,
             **a.eval_flags(label_space, labels, mean, std, resize, crop_pct)}
    spec = api.spec("inference", *a.layers(config, "sweep", flags))
    opts = a.launch_options(gpus, nnodes=nnodes, node_rank=node_rank, rdzv_endpoint=rdzv_endpoint,
                            global_batch=global_batch, timeout_s=timeout_s, device=spec.device)
    where, store = a.before_run(spec, opts, db, outputs=[json_path])
    console.print(f"accelbench run: {', '.join(spec.models)} on {where} ({spec.data}, {spec.images} images/pass), db {db}")
    out = a.run_with_progress(api.run, spec, store, opts=opts, resume=resume)
    if out is None:  # a rank other than 0 of a job the user launched: rank 0 reports
        raise typer.Exit(0)
    if opts and opts.nnodes > 1 and not out.records and not out.interrupted:
        console.print(f"global rank 0 ran on another node: the results are in that node's store (run {out.run_id} "
                      "here is empty)")
        raise typer.Exit(0)
    a.finish_outcome(out, store, json_path=json_path, wide=wide)
