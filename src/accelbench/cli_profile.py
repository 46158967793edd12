"""``accelbench profile``: roofline profile of an inference or training step (parsing only)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import DB_OPTION, app, console, fail, finish
from accelbench.errors import AccelbenchError


@app.command()
def profile(
    model: str = typer.Option("resnet50", "--model", "-m", help="Model(s), comma-separated, as for `run`."),
    batch_size: str = typer.Option("32", "--batch-size", "-b", help="Batch size(s), e.g. 32 or 32,256."),
    precision: Optional[str] = typer.Option(None, "--precision", "-p", help="fp32,tf32,amp-fp16,amp-bf16,fp16,bf16 (default: amp-bf16 on a GPU, fp32 on a CPU)."),
    mode: str = typer.Option("eager", "--mode", help="eager,compile,cudagraphs,max-autotune"),
    step: str = typer.Option("inference", "--step", help="inference, train, or both: inference,train"),
    channels_last: Optional[bool] = typer.Option(None, "--channels-last/--no-channels-last", help="Default: as `run`."),
    data: Optional[str] = typer.Option(None, "--data", help="cifar10-test (default), synthetic, or an ImageFolder path."),
    image_size: Optional[int] = typer.Option(None, "--image-size"),
    device: Optional[str] = typer.Option(None, "--device", help="auto, cpu, cuda, cuda:N"),
    ncu: str = typer.Option("auto", "--ncu", help="auto (on a GPU when ncu is found), on, off"),
    warmup_steps: Optional[int] = typer.Option(None, "--warmup-steps", help="Untimed steps (GPU 5, CPU 1)."),
    timed_steps: Optional[int] = typer.Option(None, "--timed-steps", help="Timed steps (GPU 20, CPU 3)."),
    charts: Optional[Path] = typer.Option(None, "--charts", help="Write roofline charts (PNG + SVG) to this folder."),
    ncu_csv: Optional[Path] = typer.Option(None, "--ncu-csv", help="Keep ncu's raw CSV files in this folder."),
    remeasure_ceilings: bool = typer.Option(False, "--remeasure-ceilings", help="Measure the machine ceilings again."),
    db: Path = DB_OPTION,
    json_path: Optional[Path] = typer.Option(None, "--json", help="Also write the run (spec, env, results, kernels) as JSON."),
) -> None:
    """Roofline profile: analytic FLOPs and bytes, measured time, machine ceilings and (GPU) Nsight Compute counters."""
    from accelbench.measure import resolve_device
    from accelbench.profile.profiler import NCU_MODES, ProfileOptions, run_profile
    from accelbench.profile.step import STEPS
    from accelbench.spec import build_spec
    from accelbench.store import Store

    steps = tuple(s.strip() for s in step.split(",") if s.strip())
    if not steps or any(s not in STEPS for s in steps):
        fail(f"invalid step {step!r}: allowed {', '.join(STEPS)}")
    if ncu not in NCU_MODES:
        fail(f"invalid ncu {ncu!r}: allowed {', '.join(NCU_MODES)}")
    try:
        dev = resolve_device(device or "auto")
        cuda = dev.type == "cuda"
        flags = dict(models=model, batch_sizes=batch_size, precisions=precision or ("amp-bf16" if cuda else "fp32"),
                     modes=mode, channels_last=channels_last, data=data, image_size=image_size, device=device)
        spec = build_spec(flags, cuda=cuda)
        spec = build_spec(flags, {"images": max(spec.batch_sizes), "warmup_batches": 0}, cuda=cuda)
        store = Store(db)
    except AccelbenchError as exc:
        fail(str(exc))
    opt = ProfileOptions(ncu=ncu, warmup_steps=warmup_steps, timed_steps=timed_steps,
                         chart_dir=str(charts) if charts else None, ncu_csv_dir=str(ncu_csv) if ncu_csv else None,
                         remeasure_ceilings=remeasure_ceilings)
    console.print(f"accelbench profile: {', '.join(spec.models)} ({', '.join(steps)}) on {dev}, db {db}")
    out = run_profile(spec, steps, store, opt, on_case=_progress)
    _report(out, store)
    if json_path:
        from accelbench.profile.export import write_json

        write_json(json_path, store, out.run_id)
        console.print(f"wrote {json_path}")
    finish(store, out.run_id, interrupted=out.interrupted, statuses=[r["status"] for r in out.records])


def _progress(i: int, n: int, pc, rec) -> None:
    if rec is None:
        c = pc.case
        console.print(f"[{i + 1}/{n}] {c.model} {pc.step} bs={c.batch_size} {c.precision} {c.mode} ...")


def _report(out, store) -> None:
    from accelbench.report.profile_table import ceilings_table, family_table, profile_table

    c = out.ceilings
    console.print(ceilings_table(c, cached=out.ceilings_cached))
    console.print(profile_table(out.records))
    for rec in out.records:
        if rec.get("status") != "ok":
            continue
        if rec.get("ncu_status") == "ok":
            console.print(family_table(rec))
        elif rec.get("ncu_error"):
            console.print(f"ncu {rec['ncu_status']}: {rec['ncu_error']}")
        if rec.get("analytic_uncounted_ops"):
            from accelbench.profile.analytic import AnalyticCounts

            text = AnalyticCounts(flops=0, forward_flops=0, uncounted_ops=rec["analytic_uncounted_ops"]).uncounted_text()
            console.print(f"{rec['model']} {rec['step']}: ops FlopCounterMode does not count: {text}")
    for p in out.charts:
        console.print(f"chart: {p}")
