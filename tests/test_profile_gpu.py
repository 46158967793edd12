"""GPU and Nsight Compute tests of `accelbench profile` (run on the device machine)."""

import json

import pytest
from conftest import run_cli


@pytest.mark.gpu
def test_ceilings_ordered_and_below_datasheet():
    import torch

    from accelbench.ceilings.measure import measure

    c = measure(torch.device("cuda"), matmul_n=4096, copy_bytes=512 << 20)
    f = c.matmul_flops_per_s
    assert f["fp32"] > 0 and c.dram_bytes_per_s > 1e11
    if "bf16" in f and "tf32" in f:  # tensor cores: bf16 beats tf32 beats plain fp32
        assert f["bf16"] > f["tf32"] > f["fp32"]
    for name, v in f.items():
        sheet = c.datasheet_flops_per_s.get(name)
        if sheet:
            assert v < 1.1 * sheet, (name, v, sheet)
    if c.datasheet_dram_bytes_per_s:
        assert c.dram_bytes_per_s < 1.1 * c.datasheet_dram_bytes_per_s


@pytest.mark.gpu
def test_analytic_counts_do_not_depend_on_device():
    import torch
    from specs import build_profile_spec, expand

    from accelbench.core import analytic
    from accelbench.scenarios.profile.step import build

    out = []
    for dev in ("cpu", "cuda"):
        spec = build_profile_spec(
            {
                "model": "resnet18",
                "batch_size": 2,
                "precision": "fp32",
                "device": dev,
                "images": 2,
                "image_size": 64,
                "data": "synthetic",
            },
            cuda=dev == "cuda",
        )
        case = expand(spec, "cuda:0" if dev == "cuda" else "cpu")[0]
        work = build(case, spec, torch.device(case.device))
        out.append(analytic.count(work, "inference"))
    assert out[0].flops == out[1].flops > 0 and out[0].min_bytes == out[1].min_bytes


@pytest.mark.ncu
def test_profile_with_ncu_end_to_end(tmp_path):
    js = tmp_path / "p.json"
    run_cli(
        "profile",
        "--model",
        "cifar-resnet20",
        "--batch-size",
        "8",
        "--precision",
        "amp-bf16",
        "--step",
        "inference",
        "--ncu",
        "on",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(js),
        "--charts",
        str(tmp_path / "c"),
        check=True,
    )
    rec = json.loads(js.read_text())["results"][0]
    assert rec["status"] == "ok" and rec["ncu_status"] == "ok", rec.get("ncu_error")
    kernels = rec["kernels"]
    assert len(kernels) == rec["ncu_kernels"] > 10
    assert rec["ncu_flops_tensor"] > 0 and rec["ncu_tensor_source"] == "bf16"
    assert rec["ncu_dram_bytes"] > 0 and rec["ncu_time_s"] > 0
    assert abs(sum(rec[f"family_{f}_time_share"] for f in {k["family"] for k in kernels}) - 1) < 1e-9
    gemm = [k for k in kernels if k["family"] == "gemm_conv"]
    assert sum(k["flops_tensor"] for k in gemm) == pytest.approx(rec["ncu_flops_tensor"], rel=1e-9)
    assert rec["ncu_gemm_conv_flops"] > 0.5 * rec["analytic_flops"]
    assert sorted(p.suffix for p in (tmp_path / "c").iterdir()) == [".png", ".png", ".svg", ".svg"]


@pytest.mark.gpu
def test_bf16_and_fp8_steps_each_under_their_own_roof(tmp_path):
    """a precision's roof comes from ``Precision.ceiling``; an fp8 step (Linear layers quantized as ``run``
    quantizes them) is placed under the fp8 ceiling, a bf16 step under bf16's, never the fp32 fallback."""
    js = tmp_path / "p.json"
    run_cli(
        "profile",
        "--model",
        "vit_b_16",
        "--batch-size",
        "8",
        "--precision",
        "bf16,fp8",
        "--ncu",
        "off",
        "--data",
        "synthetic",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(js),
        check=True,
    )
    rows = {r["precision"]: r for r in json.loads(js.read_text())["results"]}
    assert set(rows) == {"bf16", "fp8"}
    assert all(r["status"] == "ok" for r in rows.values()), {p: r.get("error") for p, r in rows.items()}
    assert rows["bf16"]["ceiling_name"] == "bf16" and rows["fp8"]["ceiling_name"] == "fp8"
    assert rows["fp8"]["ceiling_flops_per_s"] > rows["bf16"]["ceiling_flops_per_s"]
