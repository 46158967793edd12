"""``accelbench loadgen``: MLPerf Inference scenarios through LoadGen (parsing only; :func:`accelbench.api.loadgen`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import HOW, WHAT
from accelbench.cli.options import Cost, How, Inputs, Label, Output, What, config_option
from accelbench.core.options.loadgen import LOADGEN


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
    max_batch: str | None = typer.Option(
        None,
        "--max-batch",
        "-b",
        rich_help_panel=WHAT,
        help="Offline and Server: the SUT's largest batch; several, e.g. 64,256, are a sweep axis (GPU 256, CPU 32).",
    ),
    settings: Given = declared(LOADGEN),
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
        **settings.fields(),
        "max_batch": max_batch,
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
