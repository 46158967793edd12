"""Roofline charts from a real ncu CSV (matplotlib, Agg): files written, unplottable work listed."""

import gzip
from pathlib import Path

from accelbench.ceilings.measure import Ceilings
from accelbench.report import roofline as chart
from accelbench.scenarios.profile import ncu, results

DATA = Path(__file__).parent / "data" / "ncu"
CEIL = Ceilings(
    device_name="NVIDIA H200",
    matmul_flops_per_s={"fp32": 5.1e13, "bf16": 8.1e14, "int8": 1.3e14},
    dram_bytes_per_s=4.25e12,
    datasheet_flops_per_s={"bf16": 9.895e14},
    datasheet_dram_bytes_per_s=4.8e12,
)


def test_model_kernel_and_summary_charts(tmp_path):
    kernels = ncu.parse(gzip.open(DATA / "cifar-resnet20-inference-amp-bf16-bs8-eager.csv.gz", "rt").read()).kernels
    rec = {
        "model": "cifar-resnet20",
        "step": "inference",
        "precision": "amp-bf16",
        "batch_size": 8,
        "mode": "eager",
        "device": "cuda:0",
        "status": "ok",
        "ncu_status": "ok",
        "analytic_flops": 6.5e8,
        "analytic_min_bytes": 1.4e7,
        "analytic_intensity_flop_per_byte": 47.6,
        "achieved_flops_per_s": 2.4e11,
    }
    rec.update(results.ncu_fields(kernels, CEIL, "amp-bf16", 6.5e8))
    rows = [results.kernel_row(k, CEIL) for k in kernels]
    rows.append({**rows[0], "dram_read_bytes": 0.0, "dram_write_bytes": 0.0, "intensity_flop_per_byte": None})
    paths = chart.model_chart(rec, CEIL, tmp_path / "m") + chart.kernel_chart(rec, rows, CEIL, tmp_path / "k")
    paths += chart.summary_chart([rec, {**rec, "status": "error"}], CEIL, tmp_path / "s")
    assert sorted(p.name for p in paths) == ["k.png", "k.svg", "m.png", "m.svg", "s.png", "s.svg"]
    assert all(p.stat().st_size > 10_000 for p in paths)
    svg = (tmp_path / "k.svg").read_text()
    assert "gemm_conv" in svg and "moved no DRAM bytes" in svg and "int8" not in svg
