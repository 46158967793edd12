"""``accelbench serve``: an OpenAI-compatible LLM server under load (parsing only; the work is
:func:`accelbench.api.serve`)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import WHAT
from accelbench.cli.options import Cost, How, Label, Output, What, config_option
from accelbench.core.options.serve import OPTIONS


@command()
def serve(
    what: What = What.take(
        only=("model", "device"),
        model=typer.Option(
            None,
            "--model",
            "-m",
            rich_help_panel=WHAT,
            help="accelbench's model (tokenizer, context, ceiling): hf:<architecture> (random weights), "
            "hf:tiny-shakespeare (bundled), a checkpoint folder (hf:/path or /path); requests name its folder's path "
            "unless --served-model-name says otherwise. Another name: the served model id itself.",
        ),
        device=typer.Option(
            None,
            "--device",
            rich_help_panel=WHAT,
            help="The GPU whose telemetry is sampled beside the requests, and the built-in launch's device "
            "(auto, cpu, cuda, cuda:N).",
        ),
    ),
    settings: Given = declared(OPTIONS),
    how: How = How.take(only=("seed",)),
    cost: Cost = Cost.take(),
    config: Path | None = config_option("serve"),
    out: Output = Output.take(),
    label: Label = Label.take(),
) -> None:
    """Serving: TTFT, TPOT, ITL, end-to-end latency, throughput and goodput of an OpenAI-compatible server under load, with GPU telemetry, energy and cost per token."""
    from accelbench import api

    flags = {**what.fields(), **how.fields(), **cost.fields(), **settings.fields()}
    layers = a.layers(config, "serve", flags)
    named = label.of(layers)
    spec = api.spec("serve", *layers)
    where, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    st = spec.settings
    server = st.url if st.launch is None and st.engine is None else (st.launch or f"{st.engine} serve {spec.models[0]}")
    load = (
        f"request rates {','.join(f'{r:g}' for r in st.request_rates)}/s ({st.arrival})"
        if st.request_rates
        else f"concurrency {','.join(map(str, st.concurrency))}"
        if st.concurrency
        else "the default concurrencies"
    )
    console.print(f"accelbench serve: {server}, {load}, telemetry on {where}, db {out.db}")
    result = a.run_with_progress(api.serve, spec, store, resume=out.resume, name=named.name, tags=named.tags)
    a.finish_outcome(result, store, json_path=out.json_path, wide=out.wide)
