"""``accelbench loadgen``: MLPerf Inference scenarios through LoadGen (parsing only; :func:`accelbench.api.loadgen`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.help import ACCURACY, HOW, STORE, WHAT


@command()
def loadgen(
    model: Optional[str] = a.MODEL, precisions: Optional[str] = a.PREC, modes: Optional[str] = a.MODES,
    scenarios: Optional[str] = typer.Option(None, "--scenarios", "-s", rich_help_panel=WHAT, help="SingleStream,MultiStream,Server,Offline (default: all four)."),
    max_batch: Optional[str] = typer.Option(None, "--max-batch", "-b", rich_help_panel=WHAT, help="Offline and Server: the SUT's largest batch; several, e.g. 64,256, are a sweep axis (GPU 256, CPU 32)."),
    batch_timeout_us: Optional[int] = typer.Option(None, "--batch-timeout-us", rich_help_panel=WHAT, help="Server: the longest a batch waits for more queries after its first (default 2000)."),
    server_target_qps: Optional[float] = typer.Option(None, "--server-target-qps", rich_help_panel=WHAT, help="Server: arrival rate, queries/s (default: search for the highest VALID one)."),
    server_latency_ms: Optional[float] = typer.Option(None, "--server-latency-ms", rich_help_panel=WHAT, help="Server: p99 latency bound (default 15, MLPerf's ResNet-50 bound)."),
    server_search_steps: Optional[int] = typer.Option(None, "--server-search-steps", rich_help_panel=HOW, help="Server search: probes (default 6: within 0.8 % of the capacity bound)."),
    min_duration_s: Optional[float] = typer.Option(None, "--min-duration-s", rich_help_panel=HOW, help="Each test's minimum duration (GPU 10, CPU 2)."),
    min_query_count: Optional[int] = typer.Option(None, "--min-query-count", rich_help_panel=HOW, help="Each test's minimum query count (default: SingleStream 100, MultiStream and Server 662, Offline 1 query)."),
    mlperf_rules: Optional[bool] = typer.Option(None, "--mlperf-rules/--no-mlperf-rules", rich_help_panel=HOW, help="MLPerf's own settings from LoadGen's mlperf.conf: 600 s, official query counts."),
    accuracy: Optional[bool] = typer.Option(None, "--accuracy/--no-accuracy", rich_help_panel=ACCURACY, help="Also run LoadGen's AccuracyOnly mode: top-1/top-5."),
    log_dir: Optional[Path] = typer.Option(None, "--log-dir", rich_help_panel=STORE, help="LoadGen's logs go here (default: <db>-loadgen/ beside the store)."),
    channels_last: Optional[bool] = a.CL, images: Optional[int] = typer.Option(None, "--images", "-n", rich_help_panel=WHAT, help="Samples in the query sample library (GPU 1024, CPU 256)."),
    data: Optional[str] = a.DATA, image_size: Optional[int] = a.SIZE, device: Optional[str] = a.DEVICE,
    warmup_batches: Optional[int] = typer.Option(None, "--warmup-batches", rich_help_panel=HOW, help="Timed forwards per built batch size before the tests."),
    telemetry_period_ms: Optional[float] = a.TELEMETRY, idle_s: Optional[float] = a.IDLE,
    price_per_hour: Optional[float] = a.PRICE, kwh_price: Optional[float] = a.KWH,
    label_space: Optional[str] = a.LABEL_SPACE, labels: Optional[str] = a.LABELS, mean: Optional[str] = a.MEAN,
    std: Optional[str] = a.STD, resize: Optional[int] = a.RESIZE, crop_pct: Optional[float] = a.CROP_PCT,
    cudnn_benchmark: Optional[bool] = a.CUDNN, skip_bad_images: Optional[bool] = a.SKIP_BAD, seed: Optional[int] = a.SEED, db: Path = a.DB,
    json_path: Optional[Path] = a.JSON, config: Optional[Path] = a.CONFIG, resume: bool = a.RESUME, wide: bool = a.WIDE,
) -> None:
    """MLPerf Inference scenarios (SingleStream, MultiStream, Server, Offline) through LoadGen, with telemetry, energy and cost."""
    from accelbench import api

    flags = {**a.shared_flags(model, max_batch, precisions, modes, channels_last, images, data, image_size, device,
                              warmup_batches, None, None, telemetry_period_ms, idle_s, price_per_hour, kwh_price,
                              skip_bad_images, seed),
             "cudnn_benchmark": cudnn_benchmark, "scenarios": scenarios, "batch_timeout_us": batch_timeout_us, "server_target_qps": server_target_qps,
             "server_latency_ms": server_latency_ms, "server_search_steps": server_search_steps,
             "min_duration_s": min_duration_s, "min_query_count": min_query_count, "mlperf_rules": mlperf_rules,
             "accuracy": accuracy, "log_dir": str(log_dir) if log_dir else None,
             **a.eval_flags(label_space, labels, mean, std, resize, crop_pct)}
    spec = api.spec("loadgen", *a.layers(config, "loadgen", flags))
    where, store = a.before_run(spec, None, db, outputs=[json_path])
    rules = "MLPerf rules" if spec.settings.mlperf_rules else f"min {spec.settings.min_duration_s:g} s per test"
    console.print(f"accelbench loadgen: {', '.join(spec.models)} on {where}, {', '.join(spec.settings.scenarios)} "
                  f"({rules}), db {db}")
    out = a.run_with_progress(api.loadgen, spec, store, resume=resume)
    a.finish_outcome(out, store, json_path=json_path, wide=wide)
