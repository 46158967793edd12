"""int8 precisions and the onnxruntime backend (CPU side).

Pure rules (what runs where, calibration plans, the accuracy target) run everywhere; the quantization and
onnxruntime tests skip with a reason when ``torchao`` / ``onnxruntime`` (the ``quant`` extra) are absent.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from conftest import run_cli

from accelbench import backends, precisions
from accelbench.quant import calibration
from accelbench.quant.accuracy import TARGET_RATIO, accuracy_columns

HAS_ORT = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None
needs_ort = pytest.mark.skipif(not HAS_ORT, reason="onnxruntime/onnx not installed: pip install 'accelbench[quant]'")


def _has_pt2e() -> bool:
    from accelbench.quant import pt2e

    try:
        pt2e.api()
    except ImportError:
        return False
    return True


needs_pt2e = pytest.mark.skipif(not _has_pt2e(), reason="no PT2E flow (torchao): pip install 'accelbench[quant]'")


class Unexportable(torch.nn.Module):
    """``aten::searchsorted`` has no ONNX symbolic at opset 17: the export fails."""

    def forward(self, x):
        return torch.searchsorted(torch.linspace(-3, 3, 10), x.flatten(1)[:, :10].contiguous()).float()


def unexportable_model():
    return Unexportable()


# what runs where --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["int8", "int8-dynamic"])
def test_int8_is_unsupported_on_cuda_with_the_reason_and_runs_on_cpu(name):
    reason = precisions.unsupported_reason(name, torch.device("cuda", 0))
    assert reason and "no INT8 convolution kernel path" in reason and "--device cpu" in reason
    assert precisions.unsupported_reason(name, torch.device("cpu")) is None
    assert "inference only" in precisions.unsupported_reason(name, torch.device("cpu"), training=True)
    assert precisions.quant_scheme(name) in ("static", "dynamic")
    assert precisions.quant_scheme("fp32") is None


# calibration ------------------------------------------------------------------------------------------------
def test_bundled_test_split_calibrates_on_the_train_split():
    p = calibration.plan("cifar10-test", n_eval=10_000, n_calib=512)
    assert p.data == "cifar10-train-5k" and p.data != "cifar10-test" and p.count == 512 and p.skip == 0
    assert "disjoint from cifar10-test" in p.description


def test_a_folder_calibrates_on_images_after_the_measured_ones(tmp_path):
    from PIL import Image

    from accelbench.data import load_images

    for c in ("a", "b"):
        (tmp_path / c).mkdir()
        for i in range(6):  # every image a distinct colour, so images identify themselves
            Image.new("RGB", (4, 4), (10 * i, 100 if c == "a" else 200, 0)).save(tmp_path / c / f"{i}.png")
    n_eval, n_calib = 4, 5
    p = calibration.plan(str(tmp_path), n_eval, n_calib)
    assert (p.skip, p.count) == (n_eval, n_calib) and f"disjoint from the {n_eval} measured" in p.description
    measured = load_images(str(tmp_path), n_eval).images
    x, desc = calibration.load(p, 4, (0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    assert x.shape[0] == n_calib and desc == p.description
    seen = {tuple(im[:, 0, 0].tolist()) for im in measured}
    calib = {tuple((im[:, 0, 0] * 255).round().int().tolist()) for im in x}
    assert len(calib) == n_calib and not seen & calib  # no calibration image is a measured one


def test_synthetic_calibration_uses_another_seed_and_a_bad_count_raises():
    assert calibration.plan("synthetic", 8, 4, seed=3).seed != 3
    with pytest.raises(ValueError):
        calibration.plan("cifar10-test", 8, 0)


def test_accuracy_columns_follow_the_mlperf_rule():
    ref = 0.9
    met = accuracy_columns(ref * TARGET_RATIO, ref)
    assert met["accuracy_target_met"] and met["top1_delta_pts"] == pytest.approx((TARGET_RATIO - 1) * ref * 100)
    assert not accuracy_columns(ref * TARGET_RATIO - 1e-6, ref)["accuracy_target_met"]
    assert accuracy_columns(None, ref) == {} and accuracy_columns(ref, None) == {}


# quantized accuracy ------------------------------------------------------------------------------------------
def _cifar(n: int, data: str = "cifar10-test"):
    from accelbench.data import load_images, to_model_input
    from accelbench.models import create_model

    loaded = create_model("cifar-resnet20")
    raw = load_images(data, n)
    return loaded, to_model_input(raw.images, 32, loaded.info.mean, loaded.info.std), raw.labels


@needs_pt2e
def test_int8_pt2e_top1_stays_within_two_points_of_fp32_on_cifar(one_thread):
    from accelbench.quant import pt2e

    # 128 balanced test images, one calibration batch of 64: fp32 gets 113 right, int8 114 (a tolerance of 2.5 images)
    loaded, x, y = _cifar(128)
    cx, _ = calibration.load(calibration.plan("cifar10-test", 128, 64), 32, loaded.info.mean, loaded.info.std)
    with torch.no_grad():
        ref = (loaded.module(x).argmax(1) == y).float().mean().item()
        q, cols = pt2e.quantize(loaded.module, "static", calibration.batches(cx, 64), x[:64])
        got = (torch.cat([q(b) for b in calibration.batches(x, 64)]).argmax(1) == y).float().mean().item()
    assert abs(got - ref) * 100 <= 2.0, (got, ref)
    assert "per-channel symmetric" in cols["quant_config"] and getattr(q, pt2e.FREEZE_ATTR)


# onnxruntime -----------------------------------------------------------------------------------------------
@needs_ort
def test_onnxruntime_fp32_logits_match_torch(one_thread):
    loaded, x, _ = _cifar(64)
    ort = backends.get("onnxruntime")
    fwd, build_s = ort.build(loaded.module, x[:32], torch.device("cpu"))
    with torch.no_grad():
        ref = loaded.module(x)
    got = fwd(x)  # another batch size than the export's example: the batch axis is dynamic
    assert got.shape == ref.shape and build_s > 0
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)
    assert ort.columns(fwd)["ort_provider"] == "CPUExecutionProvider"


def test_best_provider_prefers_gpu_providers_on_a_gpu_only():
    from accelbench.backends.onnxruntime import best_provider

    avail = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert best_provider(avail, "cuda") == "CUDAExecutionProvider"
    assert best_provider(avail, "cpu") == "CPUExecutionProvider"
    with pytest.raises(RuntimeError):
        best_provider([], "cpu")


@needs_ort
def test_an_export_failure_is_a_row_not_a_crash(tmp_path):

    out = tmp_path / "run.json"
    proc = run_cli(
        "run",
        "--model",
        "test_int8:unexportable_model",
        "--data",
        "synthetic",
        "--images",
        "4",
        "--batch-sizes",
        "2",
        "--image-size",
        "8",
        "--modes",
        "eager,onnxruntime",
        "--precisions",
        "fp32,int8-dynamic",
        "--device",
        "cpu",
        "--idle-s",
        "0",
        "--db",
        str(tmp_path / "r.db"),
        "--json",
        str(out),
        timeout=300,
    )
    rows = {(r["precision"], r["mode"]): r for r in json.loads(out.read_text())["results"]}
    for prec in ("fp32", "int8-dynamic"):
        assert rows[(prec, "onnxruntime")]["status"] == "error", proc.stderr[-2000:]
        assert "torch.onnx export failed" in rows[(prec, "onnxruntime")]["error"]
        assert "searchsorted" in rows[(prec, "onnxruntime")]["error"]
    assert rows[("fp32", "eager")]["status"] == "ok", proc.stderr[-2000:]
    if _has_pt2e():  # dynamic int8 needs no calibration images, and says so
        dyn = rows[("int8-dynamic", "eager")]
        assert dyn["status"] == "ok" and dyn["calibration_images"] == 0 and "dynamic" in dyn["calibration_data"]


@needs_ort
def test_onnxruntime_int8_is_preprocessed_and_keeps_accuracy(one_thread):
    """The QDQ model is built from onnxruntime's pre-processed graph (batch norm folded; its docs' first step)."""
    loaded, x, y = _cifar(256)
    cx, _ = calibration.load(calibration.plan("cifar10-test", 256, 64), 32, loaded.info.mean, loaded.info.std)
    ort = backends.get("onnxruntime")
    q, cols = ort.quantize(loaded.module, "static", list(calibration.batches(cx, 32)), x[:32], torch.device("cpu"))
    fwd, _ = ort.build(q, x[:32], torch.device("cpu"))
    with torch.no_grad():
        ref = (loaded.module(x).argmax(1) == y).float().mean().item()
    got = (fwd(x).argmax(1) == y).float().mean().item()
    assert "pre-processed" in cols["quant_config"] and abs(got - ref) * 100 <= 2.0, (cols, got, ref)
