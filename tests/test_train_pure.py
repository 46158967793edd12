"""Pure parts of the training workloads: schedules, augmentation, specs, time to accuracy, tables."""

import math

import pytest
import torch
import torch.nn.functional as F
from specs import build_converge_spec, build_train_spec, expand

from accelbench.core.errors import ConfigError
from accelbench.report.train import epoch_markdown
from accelbench.scenarios.train.augment import crop_flip, epoch_plan, scaled_pad
from accelbench.scenarios.train.convergence import lr_for, time_to_target
from accelbench.scenarios.train.schedule import lr_at


def test_warmup_then_cosine():
    # 10 steps, 2 warm-up: 0.05, 0.1, then 0.1 * 0.5 * (1 + cos(pi * k / 8)) for k = 0..7
    lrs = [lr_at(s, 10, 0.1, 2, "cosine") for s in range(10)]
    assert lrs[:2] == pytest.approx([0.05, 0.1])
    assert lrs[2:] == pytest.approx([0.05 * (1 + math.cos(math.pi * k / 8)) for k in range(8)])
    assert lr_at(9, 10, 0.1, 0, "cosine") == pytest.approx(0.05 * (1 + math.cos(math.pi * 0.9)))


def test_step_schedule_divides_by_ten_at_half_and_three_quarters():
    lrs = [lr_at(s, 8, 1.0, 0, "step") for s in range(8)]
    assert lrs == pytest.approx([1, 1, 1, 1, 0.1, 0.1, 0.01, 0.01])
    with pytest.raises(ValueError):
        lr_at(0, 8, 1.0, 0, "linear")


def test_crop_flip_matches_pad_then_slice():
    x = torch.randint(0, 256, (6, 3, 9, 9), dtype=torch.uint8)
    plan = epoch_plan(6, seed=3, epoch=1, pad=2)
    y = crop_flip(x, plan.offsets, plan.flips, 2)
    for i in range(6):
        r, c = plan.offsets[i].tolist()
        ref = F.pad(x[i], (2, 2, 2, 2))[:, r : r + 9, c : c + 9]
        assert torch.equal(y[i], ref.flip(-1) if plan.flips[i] else ref)


def test_epoch_plan_is_a_function_of_seed_and_epoch():
    a, b, c = epoch_plan(100, 0, 5, 4), epoch_plan(100, 0, 5, 4), epoch_plan(100, 0, 6, 4)
    assert torch.equal(a.order, b.order) and torch.equal(a.offsets, b.offsets) and torch.equal(a.flips, b.flips)
    assert not torch.equal(a.order, c.order)
    assert sorted(a.order.tolist()) == list(range(100))
    assert a.offsets.min() >= 0 and a.offsets.max() <= 8 and 20 < int(a.flips.sum()) < 80
    plain = epoch_plan(10, 0, 0, 4, augment=False)  # centre crop, no flip: the identity
    x = torch.rand(10, 3, 8, 8)
    assert torch.equal(crop_flip(x, plain.offsets, plain.flips, 4), x)
    assert scaled_pad(4, 32) == 4 and scaled_pad(4, 224) == 28


def test_time_to_target_is_first_crossing():
    h = [
        {"epoch": e, "eval_top1": a, "elapsed_s": 10.0 * e, "elapsed_train_s": 8.0 * e}
        for e, a in ((1, 0.5), (2, 0.72), (3, 0.69), (4, 0.8))
    ]
    assert time_to_target(h, 0.7) == {"epochs_to_target": 2, "time_to_target_s": 20.0, "time_to_target_train_s": 16.0}
    assert time_to_target(h, 0.9)["time_to_target_s"] is None


def test_linear_lr_scaling_and_converge_spec_parsing():
    s = build_converge_spec(
        {"batch_sizes": "64,256", "lr": 0.1, "target_top1": 80, "models": "cifar-resnet20"}, cuda=False
    )
    assert s.batch_sizes == (64, 256) and s.settings.target_top1 == pytest.approx(0.8)
    assert lr_for(s.settings, 64) == pytest.approx(0.05) and lr_for(s.settings, 256) == pytest.approx(0.2)
    assert build_converge_spec({}, cuda=True).precisions == ("amp-bf16",)
    # the checkpoint folder does not change the identity of a run (resume finds it from anywhere)
    assert (
        s.spec_hash()
        == build_converge_spec(
            {"batch_sizes": "64,256", "target_top1": 0.8, "checkpoint_dir": "/x"}, cuda=False
        ).spec_hash()
    )


@pytest.mark.parametrize(
    "layer, field",
    [
        ({"precisions": "fp8x"}, "precision"),
        ({"modes": "jit"}, "mode"),
        ({"batch_sizes": "0"}, "batch_sizes"),
        ({"optimizer": "lamb"}, "optimizer"),
        ({"loader_workers": -1}, "loader_workers"),
        ({"nope": 1}, "config key"),
    ],
)
def test_train_spec_rejects_bad_values(layer, field):
    with pytest.raises(ConfigError) as err:
        build_train_spec(layer, cuda=False)
    assert str(err.value).startswith(f"invalid {field} ")


def test_a_step_that_cannot_train_is_an_unsupported_case_in_either_launcher():
    """One rule for one process and for --gpus: pure fp16 and compile-freeze exist, but cannot train."""
    import torch

    from accelbench import scenarios

    s = build_train_spec({"precisions": "fp32,fp16", "modes": "eager,compile-freeze"}, cuda=False)
    why = {
        (c.precision, c.mode): scenarios.get("train_step").unsupported_reason(c, torch.device("cpu"))
        for c in expand(s, "cpu")
    }
    assert (
        "not a training precision" in why[("fp16", "eager")]
        and "not a training mode" in why[("fp32", "compile-freeze")]
    )
    assert why[("fp32", "eager")] is None


@pytest.mark.parametrize(
    "layer, field",
    [
        ({"precision": "fp32,bf16"}, "precision"),
        ({"schedule": "poly"}, "schedule"),
        ({"epochs": 0}, "epochs"),
        ({"placement": "disk"}, "placement"),
        ({"target_top1": 0}, "target_top1"),
        ({"eval_data": None, "warmup_batches": 3}, "config key"),
    ],
)
def test_converge_spec_rejects_bad_values(layer, field):
    with pytest.raises(ConfigError) as err:
        build_converge_spec(layer, cuda=False)
    assert str(err.value).startswith(f"invalid {field} ")


def test_sweep_plan_order_and_keys():
    s = build_train_spec({"models": "a,b", "batch_sizes": "8,16", "precisions": "fp32,amp-bf16"}, cuda=False)
    cases = expand(s, "cpu")
    assert len(cases) == 8 and len({c.key for c in cases}) == 8
    assert [c.batch_size for c in cases[:2]] == [8, 16] and cases[0].key == "a|bs=8|fp32|eager|cl=auto|sgd"
    gpu = build_train_spec({}, cuda=True)
    assert gpu.models == ("resnet50",) and gpu.batch_sizes == (64, 128, 256, 512)


def test_epoch_markdown_table():
    rows = [
        {
            "row_type": "epoch",
            "batch_size": b,
            "epoch": e,
            "eval_top1": 0.1 * e,
            "train_loss": 2.0 / e,
            "elapsed_s": 3.0 * e,
        }
        for b in (64, 256)
        for e in (1, 2)
    ] + [{"row_type": "summary", "batch_size": 64}]
    md = epoch_markdown(rows).splitlines()
    assert (
        md[0]
        == "| Epoch | bs=64 top-1 | bs=64 train loss | bs=64 time (s) | bs=256 top-1 | bs=256 train loss | bs=256 time (s) |"
    )
    assert md[3] == "| 2 | 20.00% | 1.000 | 6.0 | 20.00% | 1.000 | 6.0 |"


def test_store_keeps_numbers_numeric_after_a_first_empty_value():
    # compile_s is None for eager cases and a float for compiled ones, in the same column
    from accelbench.store import Store

    st = Store(":memory:")
    run = st.begin_run("training", {}, "h", {})
    st.add_case(run, {"case_key": "a", "workload": "training", "status": "ok", "compile_s": None})
    st.add_case(run, {"case_key": "b", "workload": "training", "status": "ok", "compile_s": 1.5})
    assert st.cases(run)["compile_s"].tolist()[1] == 1.5
