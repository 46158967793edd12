"""The reusable training step and the step-throughput sweep, on the CPU with real models and images."""

import copy
import math

import pytest
import torch
from helpers import stop_after  # tests/helpers.py
from specs import build_train_spec

from accelbench.api import train as run_train_sweep
from accelbench.models import create_model
from accelbench.report.table import oom_boundary
from accelbench.scenarios.train.datasets import num_outputs, set_num_classes
from accelbench.store import Store
from accelbench.training.step import StepConfig, build_step, make_optimizer, unsupported_reason

CPU = torch.device("cpu")
FAST = {"warmup_batches": 1, "min_timed_batches": 2, "min_time_s": 0.0, "device": "cpu"}


pytestmark = pytest.mark.usefixtures("one_thread")


def _batch(n=16):
    from accelbench.data import load_images, to_model_input

    raw = load_images("cifar10-train-5k", n)
    return to_model_input(raw.images, 32, (0.5,) * 3, (0.25,) * 3), raw.labels


@pytest.mark.parametrize(
    "cfg",
    [
        StepConfig(lr=0.05),
        StepConfig(precision="amp-bf16", lr=0.05),
        StepConfig(optimizer="adamw", lr=1e-3, weight_decay=0.01),
        StepConfig(precision="bf16", lr=0.05, channels_last=True),
    ],
)
def test_step_fits_a_real_batch(cfg):
    torch.manual_seed(0)
    step = build_step(create_model("cifar-resnet20", pretrained=False).module, cfg, CPU)
    x, y = _batch()
    losses = [step(x, y)[0].item() for _ in range(6)]
    assert losses[-1] < 0.7 * losses[0]  # six steps on one batch of 16 real images: the loss falls
    assert step.first_step_s > 0 and step.compile_s is None and step.module.training
    assert step.optimizer.param_groups[0]["lr"] == cfg.lr
    step.set_lr(0.01)
    assert step.optimizer.param_groups[0]["lr"] == 0.01
    _, logits = step(x, y)
    assert logits.shape == (16, 10) and not logits.requires_grad


@pytest.mark.parametrize("autocast, dtype", [(True, torch.bfloat16), (False, torch.float32)])
def test_autocast_off_leaves_an_amp_step_in_the_parameters_dtype(autocast, dtype):
    """``StepConfig.autocast`` False (FSDP2's gathers in the compute dtype): the step adds no autocast, so a float32
    module's logits stay float32; with it the same amp-bf16 step computes them in bf16."""
    torch.manual_seed(0)
    cfg = StepConfig(precision="amp-bf16", lr=0.05, autocast=autocast)
    step = build_step(create_model("cifar-resnet20", pretrained=False).module, cfg, CPU)
    x, y = _batch(4)
    loss, logits = step(x, y)
    assert logits.dtype == dtype and loss.dtype == torch.float32 and math.isfinite(loss.item())


def test_state_dict_restores_the_same_trajectory():
    x, y = _batch(8)

    def fresh():
        torch.manual_seed(1)
        return build_step(create_model("cifar-resnet20", pretrained=False).module, StepConfig(lr=0.05), CPU)

    a = fresh()
    a(x, y)
    state = copy.deepcopy(a.state_dict())  # as a checkpoint file would hold it
    b = fresh()
    b.load_state_dict(state)
    la, lb = a(x, y)[0], b(x, y)[0]
    assert torch.equal(la, lb)
    pairs = list(zip(a.module.parameters(), b.module.parameters()))
    assert pairs and all(torch.equal(p, q) for p, q in pairs)


def test_unsupported_training_configs():
    assert "not a training precision" in unsupported_reason(StepConfig(precision="fp16"), CPU)
    assert "not a training mode" in unsupported_reason(StepConfig(mode="compile-freeze"), CPU)
    assert "needs a CUDA GPU" in unsupported_reason(StepConfig(mode="cudagraphs"), CPU)
    cuda = torch.device("cuda")  # the rule itself, asked without a GPU: a whole-step graph needs the fused optimizer
    assert "fused optimizer" in unsupported_reason(
        StepConfig(precision="amp-fp16", mode="compile-cudagraphs", fused=False), cuda
    )
    assert "CUDA" in unsupported_reason(StepConfig(precision="tf32"), CPU)
    assert unsupported_reason(StepConfig(precision="amp-fp16"), CPU) is None
    with pytest.raises(ValueError):
        build_step(torch.nn.Linear(2, 2), StepConfig(precision="fp16"), CPU)


def _overflow_then_train(opt, model, scaler, steps=3):
    """A first step with non-finite gradients (the scaler skips it), then ``steps`` finite ones; the losses."""
    import torch.nn.functional as F

    x, y = torch.randn(16, 8, generator=torch.Generator().manual_seed(0)), torch.arange(16) % 4
    losses = []
    for inp in [x * float("inf")] + [x] * steps:
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.float16):
            loss = F.cross_entropy(model(inp).float(), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses[1:]


def test_fused_sgd_with_zero_momentum_survives_a_skipped_first_step():
    from accelbench.training.step import zero_momentum_buffers

    def run(**impl):
        torch.manual_seed(0)
        m = torch.nn.Linear(8, 4)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, **impl)
        if impl.get("fused"):
            zero_momentum_buffers(opt)
        return _overflow_then_train(opt, m, torch.amp.GradScaler("cpu"))

    ref = run(foreach=True)
    try:
        fused = run(fused=True)
    except (RuntimeError, TypeError) as e:  # fused SGD on CPUs needs a recent torch
        pytest.skip(f"no fused SGD on this CPU build: {e}")
    assert all(map(math.isfinite, ref)) and fused == pytest.approx(ref, rel=1e-6)


def test_make_optimizer_zero_momentum_only_for_fused_sgd():
    params = list(torch.nn.Linear(2, 2).parameters())
    cpu = make_optimizer(StepConfig(), params, CPU)
    assert cpu.defaults.get("foreach") and not cpu.state  # torch's own lazy buffers
    gpu = make_optimizer(StepConfig(precision="amp-fp16"), params, torch.device("cuda"))
    if gpu.defaults.get("fused"):
        assert params and all(torch.equal(gpu.state[p]["momentum_buffer"], torch.zeros_like(p)) for p in params)


def test_amp_fp16_skipped_first_step_on_cpu():
    torch.manual_seed(0)
    step = build_step(torch.nn.Linear(8, 4), StepConfig(precision="amp-fp16", lr=0.1), CPU)
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    before = [p.detach().clone() for p in step.module.parameters()]
    scale = step.scaler.get_scale()
    step(x * float("inf"), y)  # non-finite gradients: skipped, scale halved
    assert step.scaler.get_scale() == scale / 2
    assert before and all(torch.equal(p, b) for p, b in zip(step.module.parameters(), before))
    losses = [step(x, y)[0].item() for _ in range(3)]
    assert all(map(math.isfinite, losses)) and losses[-1] < losses[0]


def test_classifier_resized_to_the_data():
    import torchvision

    m = set_num_classes(torchvision.models.resnet18(), 10)
    assert num_outputs(m) == 10 and m.eval()(torch.rand(1, 3, 32, 32)).shape == (1, 10)
    m = set_num_classes(torchvision.models.mobilenet_v3_small(), 7)
    assert num_outputs(m) == 7


def test_sweep_rows_on_real_images(db):
    s = build_train_spec({**FAST, "batch_sizes": "4,8", "precisions": "fp32,amp-bf16,tf32", "images": 16}, cuda=False)
    out = run_train_sweep(s, Store(db))
    by = {(r["precision"], r["batch_size"]): r for r in out.records}
    assert by[("tf32", 4)]["status"] == "unsupported" and "CUDA" in by[("tf32", 4)]["error"]
    for p in ("fp32", "amp-bf16"):
        for b in (4, 8):
            r = by[(p, b)]
            assert r["status"] == "ok", r.get("error")
            assert r["samples_timed"] == r["steps_timed"] * b and r["steps_timed"] >= 2
            assert r["throughput_samples_per_s"] == pytest.approx(r["samples_timed"] / r["timed_wall_s"])
            assert r["step_time_p50_ms"] <= r["step_time_p99_ms"] <= r["step_time_max_ms"]
            assert r["loss_finite"] and r["num_classes"] == 10 and "real images" in r["data_description"]
    st = Store(db)
    r = by[("fp32", 8)]
    assert len(st.series(r["case_id"], "step_time_ms")) == r["steps_timed"]
    assert st.run(out.run_id)["kind"] == "training"
    assert set(st.cases(out.run_id)["workload"]) == {"training"}


def test_sweep_failures_are_rows_and_oom_boundary(db):
    s = build_train_spec(
        {
            **FAST,
            "models": "helpers:oom_model,helpers:broken_model",
            "batch_sizes": "2,4,8,16",
            "images": 16,
            "data": "synthetic",
        },
        cuda=False,
    )
    out = run_train_sweep(s, Store(db))
    rows = {(r["model"], r["batch_size"]): r for r in out.records}
    assert [rows[("helpers:oom_model", b)]["status"] for b in (2, 4, 8, 16)] == ["ok", "ok", "oom", "skipped"]
    assert oom_boundary(out.records)[("helpers:oom_model", "fp32", "eager")] == {"largest_ok": 4, "smallest_oom": 8}
    broken = rows[("helpers:broken_model", 2)]
    # a model without parameters cannot be trained: the optimizer's error is the row's one-line reason
    assert broken["status"] == "error" and broken["error"] == "ValueError: optimizer got an empty parameter list"
    assert len(Store(db).cases(out.run_id)) == 8


def test_sweep_resume_runs_only_missing_cases(db):
    s = build_train_spec({**FAST, "batch_sizes": "2,4,8", "images": 8, "data": "synthetic"}, cuda=False)
    first = run_train_sweep(s, Store(db), on_case=stop_after(2, []))
    assert first.interrupted and [r["batch_size"] for r in first.records] == [2, 4]
    second = run_train_sweep(s, Store(db), resume=True)
    assert second.run_id == first.run_id and second.skipped_done == 2
    assert [r["batch_size"] for r in second.records] == [8]
    assert Store(db).run(first.run_id)["status"] == "complete"


def test_sweep_flags_input_bound_against_the_loader(db):
    s = build_train_spec({**FAST, "batch_sizes": "8", "images": 32, "loader_workers": 0}, cuda=False)
    r = run_train_sweep(s, Store(db)).records[0]
    assert r["status"] == "ok" and r["loader_samples_per_s"] > 0 and r["loader_workers"] == 0
    assert r["input_bound"] == (r["loader_samples_per_s"] < r["throughput_samples_per_s"])


@pytest.mark.parametrize("fused", [True, False])
def test_fused_optimizer_setting_with_a_skipped_first_step(fused):
    """``StepConfig.fused`` picks the kernels; fused SGD with a GradScaler keeps the zero-buffer guard."""
    torch.manual_seed(0)
    try:
        step = build_step(torch.nn.Linear(8, 4), StepConfig(precision="amp-fp16", lr=0.1, fused=fused), CPU)
    except (RuntimeError, TypeError) as e:
        pytest.skip(f"no fused SGD on this CPU build: {e}")
    kernels = step.optimizer.defaults
    assert bool(kernels.get("fused")) is fused and bool(kernels.get("foreach")) is not fused
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    before = [p.detach().clone() for p in step.module.parameters()]
    step(x * float("inf"), y)  # non-finite gradients: the scaler skips the step
    assert before and all(torch.equal(p, b) for p, b in zip(step.module.parameters(), before))
    losses = [step(x, y)[0].item() for _ in range(3)]
    assert all(map(math.isfinite, losses)) and losses[-1] < losses[0]
