"""``accelbench run``: the inference sweep (parsing only; the work is :func:`accelbench.api.run`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.declared import Given, declared
from accelbench.cli.options import CONFIG, Cost, How, Inputs, Label, Launch, Output, What
from accelbench.core.options.inference import INFERENCE


@command()
def run(
    what: What = What.take(),
    inputs: Inputs = Inputs.take(),
    settings: Given = declared(INFERENCE),
    how: How = How.take(),
    cost: Cost = Cost.take(),
    config: Path | None = CONFIG,
    out: Output = Output.take(),
    launch: Launch = Launch.take(),
    label: Label = Label.take(),
) -> None:
    """Inference sweep: model x batch size x precision x mode, on real images, stored with provenance."""
    from accelbench import api

    flags = {
        **what.fields(),
        **inputs.fields(),
        **how.fields(),
        **cost.fields(),
        **settings.fields(),
    }
    layers = a.layers(config, "sweep", flags)
    named = label.of(layers)
    spec = api.spec("inference", *layers)
    opts = launch.options(spec.device)
    where, store = a.before_run(spec, opts, out.db, outputs=[out.json_path])
    console.print(
        f"accelbench run: {', '.join(spec.models)} on {where} ({spec.data}, {spec.images} images/pass), db {out.db}"
    )
    result = a.run_with_progress(api.run, spec, store, opts=opts, resume=out.resume, name=named.name, tags=named.tags)
    if result is None:  # a rank other than 0 of a job the user launched: rank 0 reports
        raise typer.Exit(0)
    if opts and opts.nnodes > 1 and not result.records and not result.interrupted:
        console.print(
            f"global rank 0 ran on another node: the results are in that node's store (run {result.run_id} "
            "here is empty)"
        )
        raise typer.Exit(0)
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)
