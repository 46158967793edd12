"""Training workloads on a CUDA GPU (run with ``python -m pytest -m gpu``)."""

import pytest
import torch

from accelbench.store import Store
from accelbench.train.converge import run_convergence
from accelbench.train.spec import build_converge_spec, build_train_spec
from accelbench.train.throughput import run_train_sweep

pytestmark = pytest.mark.gpu
FAST = {"warmup_batches": 2, "min_timed_batches": 5, "min_time_s": 0.0, "device": "cuda", "images": 64}


def test_every_training_precision_on_gpu(db):
    s = build_train_spec({**FAST, "models": "cifar-resnet20", "batch_sizes": "32",
                          "precisions": "fp32,tf32,amp-fp16,amp-bf16,bf16"}, cuda=True)
    out = run_train_sweep(s, Store(db))
    by = {r["precision"]: r for r in out.records}
    for p, r in by.items():
        assert r["status"] == "ok", (p, r.get("error"))
        assert r["loss_finite"] and r["peak_mem_bytes"] > 0 and r["throughput_samples_per_s"] > 0
        assert r["device_time_s"] <= r["timed_wall_s"] * 1.05  # CUDA-event step times fit in the wall window
    assert by["fp32"]["channels_last"] is False and by["amp-bf16"]["channels_last"] is True  # auto: NHWC below fp32
    assert "gpu_util_mean_pct" in by["fp32"]


def test_compiled_step_and_oom_boundary(db):
    s = build_train_spec({**FAST, "models": "cifar-resnet20", "batch_sizes": "16", "precisions": "amp-bf16",
                          "modes": "compile"}, cuda=True)
    r = run_train_sweep(s, Store(db)).records[0]
    assert r["status"] == "ok", r.get("error")
    assert r["compile_s"] > 0 and r["compile_s"] == r["first_step_s"]
    big = build_train_spec({**FAST, "models": "resnet50", "batch_sizes": "4096,8192", "images": 1,
                            "data": "synthetic", "precisions": "fp32"}, cuda=True)
    rows = run_train_sweep(big, Store(db)).records
    assert [x["status"] for x in rows] == ["oom", "skipped"] and "out of memory" in rows[0]["error"].lower()
    torch.cuda.empty_cache()


def test_gpu_resident_and_loader_training(tmp_path):
    base = {"device": "cuda", "train_images": 1024, "eval_images": 1000, "epochs": 2, "batch_sizes": "128",
            "checkpoint_dir": str(tmp_path / "ck"), "deterministic": True, "precision": "fp32"}
    res = run_convergence(build_converge_spec({**base, "placement": "resident"}, cuda=True), Store(tmp_path / "a.db"))
    ld = run_convergence(build_converge_spec({**base, "placement": "loader", "workers": 4}, cuda=True), Store(tmp_path / "b.db"))
    for out in (res, ld):
        e1, e2 = out.epochs
        assert out.summaries[0]["status"] == "ok" and e2["train_loss"] < e1["train_loss"]
        assert e1["epoch_gpu_s"] > 0 and e1["epoch_gpu_s"] <= e1["epoch_wall_s"] and e1["cudnn_deterministic"] is True
    # same plan, same decoder, deterministic cuDNN: both paths see identical batches
    assert res.epochs[0]["train_loss"] == pytest.approx(ld.epochs[0]["train_loss"], rel=1e-5)
