"""``accelbench generate``: language-model prefill and decode (parsing only; the work is :func:`accelbench.api.generate`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.help import ACCURACY, HOW, WHAT


@command()
def generate(
    model: Optional[str] = typer.Option(None, "--model", "-m", rich_help_panel=WHAT, help="Language model(s): hf:<architecture> (random weights), hf:tiny-shakespeare (bundled, trained), hf:/path/to/checkpoint, pkg.mod:factory (GPU: hf:llama-3.2-1b,hf:llama-3.1-8b; CPU: hf:tiny-shakespeare)."),
    batch_sizes: Optional[str] = typer.Option(None, "--batch-sizes", "-b", rich_help_panel=WHAT, help="Sequences generated together (GPU 1,2,4,...,64; CPU 1,8)."),
    prompt_lens: Optional[str] = typer.Option(None, "--prompt-lens", rich_help_panel=WHAT, help="Prompt lengths in tokens (GPU 128,2048; CPU 64)."),
    new_tokens: Optional[str] = typer.Option(None, "--new-tokens", rich_help_panel=WHAT, help="Tokens generated a sequence, >= 2 (GPU 128; CPU 32)."),
    precisions: Optional[str] = typer.Option(None, "--precisions", "-p", rich_help_panel=WHAT, help="bf16, fp16, fp32, int8-weight-only, fp8-weight-only (GPU bf16; CPU fp32)."),
    modes: Optional[str] = typer.Option(None, "--modes", rich_help_panel=WHAT, help="hf-generate (what users get), static, static-compile (CUDA graphs on a GPU), static-compile-fused (GPU static-compile; CPU hf-generate,static)."),
    prompt_source: Optional[str] = typer.Option(None, "--prompt-source", rich_help_panel=WHAT, help="random (token ids, default) or text (windows of the shipped text; needs a tokenizer)."),
    perplexity: Optional[bool] = typer.Option(None, "--perplexity/--no-perplexity", rich_help_panel=ACCURACY, help="Perplexity on the held-out text for models with real weights and a tokenizer (default on)."),
    perplexity_window: Optional[int] = typer.Option(None, "--perplexity-window", rich_help_panel=ACCURACY, help="Tokens a perplexity window (default 256)."),
    repeats: Optional[int] = typer.Option(None, "--repeats", rich_help_panel=HOW, help="Timed generations a case (default 3); each is a window of the confidence intervals."),
    device: Optional[str] = a.DEVICE, telemetry_period_ms: Optional[float] = a.TELEMETRY, idle_s: Optional[float] = a.IDLE,
    price_per_hour: Optional[float] = a.PRICE, kwh_price: Optional[float] = a.KWH, seed: Optional[int] = a.SEED,
    db: Path = a.DB, json_path: Optional[Path] = a.JSON, config: Optional[Path] = a.CONFIG, resume: bool = a.RESUME,
    wide: bool = a.WIDE,
) -> None:
    """Language-model generation: time to first token, time per output token, tokens/s, KV cache, MBU/MFU, energy and cost per token."""
    from accelbench import api

    flags = {"models": model, "batch_sizes": batch_sizes, "prompt_lens": prompt_lens, "new_tokens": new_tokens,
             "precisions": precisions, "modes": modes, "prompt_source": prompt_source, "perplexity": perplexity,
             "perplexity_window": perplexity_window, "repeats": repeats, "device": device,
             "telemetry_period_ms": telemetry_period_ms, "idle_s": idle_s, "price_per_hour": price_per_hour,
             "kwh_price": kwh_price, "seed": seed}
    spec = api.spec("generate", *a.layers(config, "generate", flags))
    where, store = a.before_run(spec, None, db, outputs=[json_path])
    console.print(f"accelbench generate: {', '.join(spec.models)} on {where}, prompts "
                  f"{','.join(map(str, spec.settings.prompt_lens))} + {','.join(map(str, spec.settings.new_tokens))} "
                  f"new tokens ({spec.settings.prompt_source}), db {db}")
    out = a.run_with_progress(api.generate, spec, store, resume=resume)
    a.finish_outcome(out, store, json_path=json_path, wide=wide)
