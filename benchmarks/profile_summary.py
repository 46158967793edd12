"""Assemble the committed GPU profile results from what the device calls brought back.

    python benchmarks/profile_summary.py DB CSV_DIR [CSV_DIR...] --out DIR

Re-derives every ncu case from its raw CSV with the current code (accelbench.scenarios.profile.reprocess), then
writes profile-h200-cases.csv (one row per case), profile-h200-families.csv, profile-h200-kernels.csv,
profile-h200.json (env, ceilings, cases) and the charts (profile-charts/). Prints the markdown tables
of docs/results.md (roofline profiling).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

CASE_FIELDS = [
    "model",
    "step",
    "precision",
    "batch_size",
    "mode",
    "channels_last",
    "step_time_s",
    "throughput_samples_per_s",
    "analytic_flops",
    "analytic_min_bytes",
    "analytic_intensity_flop_per_byte",
    "theoretical_time_s",
    "measured_vs_theoretical",
    "achieved_flops_per_s",
    "ceiling_name",
    "ridge_point_flop_per_byte",
    "analytic_bound",
    "ncu_status",
    "ncu_wall_s",
    "case_wall_s",
    "ncu_kernels",
    "ncu_time_s",
    "ncu_flops",
    "ncu_flops_tensor",
    "ncu_flops_fp32",
    "ncu_flops_fp16",
    "ncu_dram_bytes",
    "ncu_intensity_flop_per_byte",
    "ncu_achieved_flops_per_s",
    "ncu_achieved_bytes_per_s",
    "ncu_bound",
    "ncu_roof_fraction",
    "ncu_gemm_conv_flops",
    "flops_agreement",
    "layers_paired",
    "layers_within_2pct",
    "layer_flops_ratio_median",
    "layer_flops_ratio_max",
    "layer_flops_ratio_max_analytic_flops",
    "layer_flops_ratio_max_kernel",
]


def _slug(r: dict) -> str:
    return f"{r['model']}-{r['step']}-{r['precision']}-bs{r['batch_size']}-{r['mode']}".replace(":", "_")


def _meta_calls(r: dict):
    """Ordered (op, FLOPs) of an eager inference forward, counted on the meta device (shapes only)."""
    import torch

    from accelbench.core.analytic import count_flops
    from accelbench.models import create_model

    m = create_model(r["model"], pretrained=False).module.to("meta").eval()
    x = torch.empty(r["batch_size"], 3, r["image_size"], r["image_size"], device="meta")
    with torch.no_grad():
        return count_flops(lambda: m(x))[3]


def main() -> None:
    from accelbench.report import roofline as chart
    from accelbench.scenarios.profile import storage
    from accelbench.scenarios.profile.reprocess import reprocess
    from accelbench.store import Store

    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("csv_dirs", nargs="+")
    ap.add_argument("--out", default="benchmarks/results")
    a = ap.parse_args()
    out = Path(a.out)
    work_db = out / "profile-h200.db"
    shutil.copy(a.db, work_db)
    store = Store(work_db)
    csvs = {p.stem: p for d in a.csv_dirs for p in Path(d).glob("*.csv")}
    latest = {}
    for row in reversed(store.find_cases(workload="profile")):
        latest[row["case_key"]] = row["case_id"]  # the newest run of each case
    runs = {r["run_id"]: store.run(r["run_id"]) for r in store.runs()}
    recs, kernels = [], []
    for _key, cid in latest.items():
        r = store.case(cid)
        env = runs[r["run_id"]]["env"]
        ceil = storage.cached_ceilings(store, env["device_name"])
        if _slug(r) in csvs:
            calls = None if r.get("analytic_flop_calls") else (_meta_calls(r) if r["step"] == "inference" else None)
            reprocess(store, cid, csvs[_slug(r)].read_text(), ceil, calls)
            r = store.case(cid)
        r["device_name"] = env["device_name"]
        rows = storage.kernel_rows(store, cid)
        stem = out / "profile-charts" / _slug(r)
        chart.model_chart(r, ceil, f"{stem}-model")
        if rows:
            chart.kernel_chart(r, rows, ceil, f"{stem}-kernels")
        recs.append(r)
        kernels += [{"case": _slug(r), **{k: v for k, v in row.items() if k != "case_id"}} for row in rows]
    chart.summary_chart(
        [r for r in recs if r["model"] != "cifar-resnet20"],
        ceil,
        out / "profile-charts" / "summary-model-roofline",
        title="Model roofline, NVIDIA H200",
    )
    _write(out, recs, kernels, ceil, runs)
    store.close()
    work_db.unlink()


def _write(out: Path, recs: list[dict], kernels: list[dict], ceil, runs) -> None:
    import pandas as pd

    from accelbench.core.kernels import FAMILIES

    pd.DataFrame([{k: r.get(k) for k in CASE_FIELDS} for r in recs]).to_csv(out / "profile-h200-cases.csv", index=False)
    fam_rows = []
    for r in recs:
        for f in FAMILIES:
            if r.get(f"family_{f}_kernels") is not None:
                fam_rows.append(
                    {
                        "case": _slug(r),
                        "family": f,
                        **{k.removeprefix(f"family_{f}_"): v for k, v in r.items() if k.startswith(f"family_{f}_")},
                    }
                )
    pd.DataFrame(fam_rows).to_csv(out / "profile-h200-families.csv", index=False)
    kd = pd.DataFrame(kernels)
    kd["name"] = kd["name"].str.slice(0, 160)
    kd.to_csv(out / "profile-h200-kernels.csv", index=False)
    env = next(iter(runs.values()))["env"]
    doc = {
        "env": {
            k: env.get(k)
            for k in (
                "device_name",
                "driver_version",
                "cuda",
                "cudnn",
                "torch",
                "torchvision",
                "compute_capability",
                "sm_count",
                "power_limit_w",
                "git_commit",
                "host",
            )
        },
        "ceilings": ceil.to_dict(),
        "cases": [{k: v for k, v in r.items() if k not in ("analytic_flop_calls", "ncu_metrics")} for r in recs],
    }
    (out / "profile-h200.json").write_text(json.dumps(doc, indent=1, default=str))
    for r in recs:
        print(
            _slug(r),
            {
                k: r.get(k)
                for k in (
                    "step_time_s",
                    "ncu_wall_s",
                    "case_wall_s",
                    "flops_agreement",
                    "layers_paired",
                    "layers_within_2pct",
                    "layer_flops_ratio_median",
                    "ncu_bound",
                    "ncu_roof_fraction",
                )
            },
        )
        lk = kd[(kd.case == _slug(r)) & kd.layer.notna()]
        if len(lk):  # agreement without the first layer (the stem convolution, 3 input channels)
            rest = lk[lk.layer > 0]
            meas = (rest.flops_tensor + rest.flops_fp32 + rest.flops_fp16 + rest.flops_fp64).sum()
            print(f"   GEMM/conv FLOPs vs analytic without layer 0: {meas / rest.analytic_flops.sum() - 1:+.4f}")


if __name__ == "__main__":
    main()
