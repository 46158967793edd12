"""``accelbench generate``: language-model prefill and decode (parsing only; the work is :func:`accelbench.api.generate`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import WHAT
from accelbench.cli.options import Cost, How, Label, Output, What, config_option
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
    spec = api.spec("generate", *layers)
    where, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    console.print(
        f"accelbench generate: {', '.join(spec.models)} on {where}, prompts "
        f"{','.join(map(str, spec.settings.prompt_lens))} + {','.join(map(str, spec.settings.new_tokens))} "
        f"new tokens ({spec.settings.prompt_source}), db {out.db}"
    )
    result = a.run_with_progress(api.generate, spec, store, resume=out.resume, name=named.name, tags=named.tags)
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)
