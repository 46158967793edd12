"""``accelbench loadgen``: MLPerf Inference scenarios through LoadGen (parsing only; :func:`accelbench.api.loadgen`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.help import ACCURACY, HOW, STORE, WHAT
from accelbench.cli.options import Cost, How, Inputs, Label, Output, What, config_option


@command()
def loadgen(
    what: What = What.take(
        omit=("batch_sizes",),
        images=typer.Option(
            None,
            "--images",
            "-n",
            rich_help_panel=WHAT,
            help="Samples in the query sample library (GPU 1024, CPU 256).",
        ),
    ),
    scenarios: str | None = typer.Option(
        None,
        "--scenarios",
        "-s",
        rich_help_panel=WHAT,
        help="SingleStream,MultiStream,Server,Offline (default: all four).",
    ),
    max_batch: str | None = typer.Option(
        None,
        "--max-batch",
        "-b",
        rich_help_panel=WHAT,
        help="Offline and Server: the SUT's largest batch; several, e.g. 64,256, are a sweep axis (GPU 256, CPU 32).",
    ),
    batch_timeout_us: int | None = typer.Option(
        None,
        "--batch-timeout-us",
        rich_help_panel=WHAT,
        help="Server: the longest a batch waits for more queries after its first (default 2000).",
    ),
    server_target_qps: float | None = typer.Option(
        None,
        "--server-target-qps",
        rich_help_panel=WHAT,
        help="Server: arrival rate, queries/s (default: search for the highest VALID one).",
    ),
    server_latency_ms: float | None = typer.Option(
        None,
        "--server-latency-ms",
        rich_help_panel=WHAT,
        help="Server: p99 latency bound (default 15, MLPerf's ResNet-50 bound).",
    ),
    server_search_steps: int | None = typer.Option(
        None,
        "--server-search-steps",
        rich_help_panel=HOW,
        help="Server search: probes (default 6: within 0.8 % of the capacity bound).",
    ),
    min_duration_s: float | None = typer.Option(
        None, "--min-duration-s", rich_help_panel=HOW, help="Each test's minimum duration (GPU 10, CPU 2)."
    ),
    min_query_count: int | None = typer.Option(
        None,
        "--min-query-count",
        rich_help_panel=HOW,
        help="Each test's minimum query count (default: SingleStream 100, MultiStream and Server 662, Offline 1 query).",
    ),
    mlperf_rules: bool | None = typer.Option(
        None,
        "--mlperf-rules/--no-mlperf-rules",
        rich_help_panel=HOW,
        help="MLPerf's own settings from LoadGen's mlperf.conf: 600 s, official query counts.",
    ),
    accuracy: bool | None = typer.Option(
        None,
        "--accuracy/--no-accuracy",
        rich_help_panel=ACCURACY,
        help="Also run LoadGen's AccuracyOnly mode: top-1/top-5.",
    ),
    log_dir: Path | None = typer.Option(
        None,
        "--log-dir",
        rich_help_panel=STORE,
        help="LoadGen's logs go here (default: <db>-loadgen/ beside the store).",
    ),
    inputs: Inputs = Inputs.take(),
    how: How = How.take(
        only=("warmup_batches", "cudnn_benchmark", "seed"),
        warmup_batches=typer.Option(
            None, "--warmup-batches", rich_help_panel=HOW, help="Timed forwards per built batch size before the tests."
        ),
    ),
    cost: Cost = Cost.take(),
    config: Path | None = config_option("loadgen"),
    out: Output = Output.take(),
    label: Label = Label.take(),
) -> None:
    """MLPerf Inference scenarios (SingleStream, MultiStream, Server, Offline) through LoadGen, with telemetry, energy and cost."""
    from accelbench import api

    flags = {
        **what.fields(),
        **inputs.fields(),
        **how.fields(),
        **cost.fields(),
        "max_batch": max_batch,
        "scenarios": scenarios,
        "batch_timeout_us": batch_timeout_us,
        "server_target_qps": server_target_qps,
        "server_latency_ms": server_latency_ms,
        "server_search_steps": server_search_steps,
        "min_duration_s": min_duration_s,
        "min_query_count": min_query_count,
        "mlperf_rules": mlperf_rules,
        "accuracy": accuracy,
        "log_dir": str(log_dir) if log_dir else None,
    }
    layers = a.layers(config, "loadgen", flags)
    named = label.of(layers)
    spec = api.spec("loadgen", *layers)
    where, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    rules = "MLPerf rules" if spec.settings.mlperf_rules else f"min {spec.settings.min_duration_s:g} s per test"
    console.print(
        f"accelbench loadgen: {', '.join(spec.models)} on {where}, {', '.join(spec.settings.scenarios)} "
        f"({rules}), db {out.db}"
    )
    result = a.run_with_progress(api.loadgen, spec, store, resume=out.resume, name=named.name, tags=named.tags)
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)
