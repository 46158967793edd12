"""Export the GPU training results of ``benchmarks/train_gpu.sh`` (a ``train.db``) into
``benchmarks/results/``: JSON per run kind, a CSV of the step sweep, markdown tables and the
convergence plot. Usage: ``python benchmarks/train_export.py PATH/train.db [TAG]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from accelbench.report.train import epoch_markdown, plot_convergence
from accelbench.store import Store
from accelbench.train.converge import time_to_target

RESULTS = Path(__file__).parent / "results"


def _runs(store: Store, kind: str) -> list[dict]:
    out = []
    for r in store.runs():
        if r["kind"] == kind:
            run = store.run(r["run_id"])
            df = store.cases(r["run_id"])
            out.append({"run_id": r["run_id"], "status": run["status"], "spec": run["spec"], "env": run["env"],
                        "results": json.loads(df.to_json(orient="records"))})
    return out


def sweep_markdown(rows: list[dict]) -> str:
    head = "| model | batch | precision | mode | NHWC | img/s | step p50 (ms) | step p99 (ms) | peak alloc (GB) | loader img/s (8 workers) | input-bound | status |"
    lines = [head, "| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        def f(k, fmt):
            v = r.get(k)
            return fmt.format(v) if v is not None else "-"
        lines.append(f"| {r['model']} | {r['batch_size']} | {r['precision']} | {r['mode']} | {'yes' if r.get('channels_last') else 'no'} "
                     f"| {f('throughput_samples_per_s', '{:,.0f}')} | {f('step_time_p50_ms', '{:.1f}')} | {f('step_time_p99_ms', '{:.1f}')} "
                     f"| {(r['peak_mem_bytes'] / 1e9):.1f} | {f('loader_samples_per_s', '{:,.0f}')} "
                     f"| {'yes' if r.get('input_bound') else ('no' if r.get('input_bound') is not None else '-')} | {r['status']} |")
    return "\n".join(lines)


def main(db: str, tag: str = "h200") -> None:
    store = Store(db)
    RESULTS.mkdir(exist_ok=True)
    sweep = _runs(store, "training")
    conv = _runs(store, "convergence")
    pipe = _runs(store, "input-pipeline")
    for name, runs in (("train-step-sweep", sweep), ("train-convergence", conv), ("input-pipeline", pipe)):
        (RESULTS / f"{name}-{tag}.json").write_text(json.dumps(runs, indent=1, default=str))
    rows = [r for run in sweep for r in run["results"]]
    import pandas as pd

    pd.DataFrame(rows).to_csv(RESULTS / f"train-step-sweep-{tag}.csv", index=False)
    md = [sweep_markdown(rows)]
    for run in conv:
        epochs = [r for r in run["results"] if r.get("row_type") == "epoch"]
        md.append(f"\nconvergence run {run['run_id']} ({run['status']}):\n\n" + epoch_markdown(epochs))
        for b in sorted({r["batch_size"] for r in epochs}):
            hist = sorted((r for r in epochs if r["batch_size"] == b), key=lambda r: r["epoch"])
            t = run["spec"].get("target_top1")
            md.append(f"\nbs={b}: best top-1 {max(r['eval_top1'] for r in hist):.4f}, final {hist[-1]['eval_top1']:.4f}, "
                      f"target {t}: {time_to_target(hist, t)}")
        if run["status"] != "complete" or len(epochs) > 10:
            plot_convergence(epochs, RESULTS / f"train-convergence-run{run['run_id']}-{tag}.png",
                             title=f"{run['spec']['model']} on {run['spec']['data']} ({tag})")
    (RESULTS / f"train-tables-{tag}.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
