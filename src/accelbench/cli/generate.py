"""``accelbench generate``: language-model prefill and decode (parsing only; the work is :func:`accelbench.api.generate`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, fail
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import WHAT
from accelbench.cli.options import Cost, How, Label, Launch, Output, What, config_option
from accelbench.core.options.generate import OPTIONS


@command()
def generate(
    what: What = What.take(
        only=("model", "batch_sizes", "precisions", "modes", "device"),
        model=typer.Option(
            None,
            "--model",
            "-m",
            rich_help_panel=WHAT,
            help="Language model(s): hf:<architecture> (random weights), hf:tiny-shakespeare (bundled, trained), hf:/path/to/checkpoint, pkg.mod:factory.",
        ),
        batch_sizes=typer.Option(
            None, "--batch-sizes", "-b", rich_help_panel=WHAT, help="Sequences generated together."
        ),
    ),
    settings: Given = declared(OPTIONS, omit=("repeats",)),
    how: How = How.take(only=("seed",)),
    repeats: Given = declared(OPTIONS, only=("repeats",)),
    cost: Cost = Cost.take(),
    config: Path | None = config_option("generate"),
    out: Output = Output.take(),
    launch: Launch = Launch.take(omit=("global_batch",)),
    label: Label = Label.take(),
) -> None:
    """Language-model generation: time to first token, time per output token, tokens/s, KV cache, MBU/MFU, energy and cost per token."""
    from accelbench import api

    flags = {
        **what.fields(),
        **how.fields(),
        **cost.fields(),
        **settings.fields(),
        **repeats.fields(),
    }
    layers = a.layers(config, "generate", flags)
    named = label.of(layers)
    opts = launch.options(what.device)
    layers = _layout(layers, opts)
    spec = api.spec("generate", *layers)
    where, store = a.before_run(spec, opts, out.db, outputs=[out.json_path])
    console.print(
        f"accelbench generate: {', '.join(spec.models)} on {where}, prompts "
        f"{','.join(map(str, spec.settings.prompt_lens))} + {','.join(map(str, spec.settings.new_tokens))} "
        f"new tokens ({spec.settings.prompt_source}), db {out.db}"
    )
    result = a.run_with_progress(
        api.generate, spec, store, opts=opts, resume=out.resume, name=named.name, tags=named.tags
    )
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)


def _layout(layers: list[dict], opts) -> list[dict]:
    """The layers with ``--parallel tp`` written as the layout over every rank of ``--gpus N`` (``tp=N``); a layout
    without ``--gpus``, ``--gpus`` without a layout, or a degree other than the ranks' is one line (exit 2)."""
    from accelbench.core.errors import ConfigError
    from accelbench.core.parallel_dims import ParallelDims

    given = next((layer["parallel"] for layer in reversed(layers) if layer.get("parallel") is not None), None)
    if given is not None and opts is None:
        fail("--parallel tp applies with --gpus N (the GPUs the model is split over)")
    if opts is not None and given is None:
        fail("generate --gpus N needs --parallel tp (one copy of the model split over the N GPUs)")
    if opts is None:
        return layers
    try:
        dims = ParallelDims.parse(given, opts.world_size)
        dims.check_world(opts.world_size)
    except ConfigError as exc:
        fail(str(exc))
    return [*layers, {"parallel": dims.label}]
