"""Export GPU training results (``accelbench train`` / ``input-pipeline`` stores, e.g. the ``train.db`` of
``benchmarks/train_gpu.sh``) into a folder: JSON per run kind, a CSV of the step sweep,
markdown tables and the convergence plot.

Usage: ``python benchmarks/train_export.py TAG SOURCE [SOURCE ...]``. A SOURCE is a store (``.db``) or
a step-sweep JSON written earlier by this script (its runs are kept as they are, so figures measured
in earlier device calls stay in the merged table). Runs are listed in the order given."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from accelbench.report.train import epoch_markdown, plot_convergence
from accelbench.scenarios.train.convergence import time_to_target
from accelbench.store import Store

RESULTS = Path(__file__).parent / "results"


def _runs(store: Store, kind: str) -> list[dict]:
    out = []
    for r in store.runs():
        if r["kind"] == kind:
            run = store.run(r["run_id"])
            df = store.cases(r["run_id"])
            out.append(
                {
                    "run_id": r["run_id"],
                    "status": run["status"],
                    "spec": run["spec"],
                    "env": run["env"],
                    "results": json.loads(df.to_json(orient="records")),
                }
            )
    return out


def sweep_markdown(rows: list[dict]) -> str:
    head = (
        "| model | batch | precision | mode | NHWC | SGD | img/s | step p50 (ms) | step p99 (ms) | spread | compile (s) "
        "| peak alloc (GB) | final loss | loader img/s (8 workers) | input-bound | status |"
    )
    lines = [
        head,
        "| --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:

        def f(k, fmt):
            v = r.get(k)  # noqa: B023
            return fmt.format(v) if v is not None else "-"

        sgd = {None: "fused", 1: "fused", 0: "foreach"}[r.get("optimizer_fused")]
        loss = f("loss_last", "{:.3f}") if r.get("loss_finite") else "**NaN**"
        lines.append(
            f"| {r['model']} | {r['batch_size']} | {r['precision']} | {r['mode']} | {'yes' if r.get('channels_last') else 'no'} | {sgd} "
            f"| {f('throughput_samples_per_s', '{:,.0f}')} | {f('step_time_p50_ms', '{:.1f}')} | {f('step_time_p99_ms', '{:.1f}')} "
            f"| {100 * r['step_time_spread']:.1f} % | {f('compile_s', '{:.1f}')} "
            f"| {(r['peak_mem_bytes'] / 1e9):.1f} | {loss} | {f('loader_samples_per_s', '{:,.0f}')} "
            f"| {'yes' if r.get('input_bound') else ('no' if r.get('input_bound') is not None else '-')} | {r['status']} |"
        )
    return "\n".join(lines)


def main(tag: str, *sources: str) -> None:
    RESULTS.mkdir(exist_ok=True)
    sweep, conv, pipe = [], [], []
    for src in sources:
        if src.endswith(".json"):  # an earlier export of step-sweep runs
            sweep += [{**run, "source": Path(src).name} for run in json.loads(Path(src).read_text())]
            continue
        store = Store(src)
        for kind, dest in (("training", sweep), ("convergence", conv), ("input-pipeline", pipe)):
            dest += [{**run, "source": f"{Path(src).parent.name}/{Path(src).name}"} for run in _runs(store, kind)]
    for name, runs in (("train-step-sweep", sweep), ("train-convergence", conv), ("input-pipeline", pipe)):
        if runs:
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
            md.append(
                f"\nbs={b}: best top-1 {max(r['eval_top1'] for r in hist):.4f}, final {hist[-1]['eval_top1']:.4f}, "
                f"target {t}: {time_to_target(hist, t)}"
            )
        if run["status"] != "complete" or len(epochs) > 10:
            plot_convergence(
                epochs,
                RESULTS / f"train-convergence-run{run['run_id']}-{tag}.png",
                title=f"{run['spec']['model']} on {run['spec']['data']} ({tag})",
            )
    (RESULTS / f"train-tables-{tag}.md").write_text("\n".join(md) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
