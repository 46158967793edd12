"""``accelbench profile``: roofline profile of an inference or training step, or of a language model's prefill,
decode or training step (parsing only)."""

from __future__ import annotations

from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console, styled
from accelbench.cli.declared import Given, declared
from accelbench.cli.help import STORE, WHAT, complete_backends, complete_models, complete_precisions
from accelbench.cli.options import Cost, Inputs, Label, Output, What
from accelbench.core.errors import OK
from accelbench.core.options.profile import PROFILE


@command()
def profile(
    model: str = typer.Option(
        "resnet50",
        "--model",
        "-m",
        rich_help_panel=WHAT,
        autocompletion=complete_models,
        help="Model(s), comma-separated, as for `run`; hf:<model> (as for `generate`) for --step prefill/decode, or "
        "for --step train with --seq-len (the step `train -m hf:...` times).",
    ),
    batch_sizes: str = typer.Option(
        "32", "--batch-sizes", "--batch-size", "-b", rich_help_panel=WHAT, help="Batch size(s), e.g. 32 or 32,256."
    ),
    precisions: str | None = typer.Option(
        None,
        "--precisions",
        "--precision",
        "-p",
        rich_help_panel=WHAT,
        autocompletion=complete_precisions,
        help="Precisions, comma-separated: {precisions}.",
    ),
    modes: str | None = typer.Option(
        None,
        "--modes",
        "--mode",
        "--backend",
        rich_help_panel=WHAT,
        autocompletion=complete_backends,
        help="Backends (execution modes), comma-separated: {backends}. Default eager; "
        "static-cache for prefill/decode (static-compile: the compiled decode step).",
    ),
    settings: Given = declared(PROFILE),
    what: What = What.take(only=("channels_last", "device")),
    inputs: Inputs = Inputs.take(only=("data", "image_size", "mean", "std", "resize", "crop_pct")),
    cost: Cost = Cost.take(),
    out: Output = Output.take(
        omit=("resume",),
        json_path=typer.Option(
            None,
            "--json",
            rich_help_panel=STORE,
            callback=a.json_to_stdout,
            help="Also write the run (spec, env, results, kernels) as JSON; - for stdout.",
        ),
    ),
    label: Label = Label.take(),
) -> None:
    """Roofline profile: analytic FLOPs and bytes, measured time, machine ceilings and (GPU) Nsight Compute counters."""
    from accelbench import api

    charts = settings.values.get("chart_dir")
    if charts is not None and Path(charts).exists() and not Path(charts).is_dir():
        a.fail(f"--charts {charts} is a file: give a folder for the charts")
    flags = dict(
        models=model,
        batch_sizes=batch_sizes,
        precisions=precisions,
        modes=modes,
        **settings.fields(),
        **what.fields(),
        **inputs.fields(),
        **cost.fields(),
    )
    named = label.of()
    spec = api.spec("profile", flags)
    _check_lengths(spec, settings.fields())
    where, store = a.before_run(spec, None, out.db, outputs=[out.json_path])
    console.print(
        f"accelbench profile: {', '.join(spec.models)} ({', '.join(spec.settings.steps)}) on {where}, db {out.db}"
    )
    result = api.profile(spec, store, on_case=_progress, name=named.name, tags=named.tags)
    _report(result, result.ceilings, result.ceilings_cached, out.wide)
    chart_errors = [f"{r['model']} {r['step']}: {r['chart_error']}" for r in result.records if r.get("chart_error")]
    for text in chart_errors:  # the rows are stored and measured; only the charts failed: exit 1
        a.err_console.print(a.styled("error:", "red", f" charts not written for {text}"))
    try:
        a.finish(
            store, result.run_id, interrupted=result.interrupted, json_path=out.json_path, statuses=result.statuses
        )
    except typer.Exit as done:
        raise typer.Exit(done.exit_code or int(bool(chart_errors))) from None


def _progress(i: int, n: int, case, rec) -> None:
    if rec is None:
        console.print(
            f"[{i + 1}/{n}] {case.model} {case.extras.step} bs={case.batch_size} {case.precision} {case.mode} ..."
        )


def _report(out, ceilings, cached: bool, wide: bool) -> None:
    from accelbench.report.notes import case_notes
    from accelbench.report.profile_table import ceilings_table, family_table, phase_line, profile_table, replay_note

    console.print(ceilings_table(ceilings, cached=cached))
    a.print_table(profile_table(out.records, compact=not wide), wide)
    for rec in out.records:
        if rec.get("status") != OK:
            continue
        if rec.get("ncu_status") == "ok":
            a.print_table(family_table(rec, compact=not wide), wide)
            note = replay_note(rec)
            if note:
                console.print(note, markup=False, highlight=False, soft_wrap=True)
        elif rec.get("ncu_error"):
            console.print(f"ncu {rec['ncu_status']}: {rec['ncu_error']}")
        if rec.get("analytic_uncounted_ops"):
            from accelbench.core.analytic import AnalyticCounts

            text = AnalyticCounts(
                flops=0, forward_flops=0, uncounted_ops=rec["analytic_uncounted_ops"]
            ).uncounted_text()
            console.print(f"{rec['model']} {rec['step']}: ops FlopCounterMode does not count: {text}")
        line = phase_line(rec)
        if line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)  # one line, as tests and greps read it
        for p in rec.get("charts") or []:
            console.print(f"chart: {p}")
    for rec in out.records:
        if rec.get("status") != OK and rec.get("error"):
            console.print(f"{rec['status']}: {rec['model']} {rec['step']}: {rec['error']}")
    for label, text in case_notes(r for r in out.records if r.get("status") == OK):  # flagged, grouped
        console.print(styled(label, "yellow", " " + text))


def _check_lengths(spec, given: dict) -> None:
    """``--seq-len`` is a language model's training step's, ``--prompt-len`` its prefill's and decode's: given to a
    run that does not use it, it is one line, not ignored."""
    from accelbench.scenarios.profile.scenario import LM_STEPS, lm_train_run

    if "seq_lens" in given and not lm_train_run(spec.settings.steps, spec.models):
        a.fail("--seq-len applies to a language model's training step (--step train -m hf:...)")
    if "prompt_lens" in given and not set(spec.settings.steps) & set(LM_STEPS):
        a.fail("--prompt-len applies to a language model's prefill and decode steps (--step prefill,decode)")
