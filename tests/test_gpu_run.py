"""GPU tests of the inference runner (marker ``gpu``; run on the device machine)."""

import pytest
from specs import build_spec

from accelbench.api import run as run_sweep
from accelbench.store import Store

pytestmark = pytest.mark.gpu


def test_gpu_sweep_all_modes(tmp_path):
    spec = build_spec(
        {
            "model": "cifar-resnet20",
            "batch_sizes": "1,64",
            "precisions": "fp32,tf32,amp-bf16,fp16",
            "modes": "eager,cudagraphs,compile",
            "images": 256,
            "device": "cuda",
        },
        cuda=True,
    )
    out = run_sweep(spec, Store(tmp_path / "g.db"))
    assert len(out.records) == 2 * 4 * 3
    for r in out.records:
        assert r["status"] == "ok", (r["case_key"], r["error"])
        assert r["peak_mem_bytes"] > 0 and r["throughput_samples_per_s"] > 0
        assert r["device_time_s"] <= r["timed_wall_s"] * 1.01  # events sit inside the wall window
        assert 0.85 < r["top1"] <= 1.0  # real weights on 256 balanced real test images
        if r["mode"] != "eager":
            assert r["compile_s"] > 0
    assert any(r.get("gpu_util_mean_pct") is not None for r in out.records)


def test_gpu_oom_is_a_row_and_next_case_runs(tmp_path):
    # vgg16 at an absurd batch on 224x224 needs far more than any GPU's memory for activations.
    spec = build_spec(
        {
            "model": "vgg16",
            "batch_sizes": "16384",
            "precisions": "fp32",
            "modes": "eager",
            "images": 16384,
            "data": "synthetic",
            "device": "cuda",
            "min_timed_batches": 1,
        },
        cuda=True,
    )
    out = run_sweep(spec, Store(tmp_path / "o.db"))
    assert out.records[0]["status"] == "oom" and "out of memory" in out.records[0]["error"].lower()
    ok = run_sweep(
        build_spec(
            {
                "model": "cifar-resnet20",
                "batch_sizes": "8",
                "images": 64,
                "device": "cuda",
                "precisions": "fp32",
                "modes": "eager",
            },
            cuda=True,
        ),
        Store(tmp_path / "o.db"),
    )
    assert ok.records[0]["status"] == "ok"
