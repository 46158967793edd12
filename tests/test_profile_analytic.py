"""Analytic counts against hand-computed values (see tests/helpers.py:TinyConvNet)."""

import pytest
import torch
from specs import build_profile_spec, expand

from accelbench.core import analytic
from accelbench.scenarios.profile.step import build


def _work(step, batch=1, precision="fp32"):
    spec = build_profile_spec(
        {
            "model": "helpers:tiny_conv_net",
            "batch_size": batch,
            "precision": precision,
            "device": "cpu",
            "images": batch,
            "data": "synthetic",
            "steps": step,
        },
        cuda=False,
    )
    case = expand(spec, "cpu")[0]
    return build(case, spec, torch.device("cpu"))


@pytest.mark.parametrize("batch", [1, 4])
def test_inference_counts_by_hand(batch):
    c = analytic.count(_work("inference", batch), "inference")
    assert c.flops == c.forward_flops == batch * (27_648 + 10_240)
    assert c.flops_by_op == {"aten.convolution": batch * 27_648, "aten.addmm": batch * 10_240}
    # every counted call in launch order, also under torch.inference_mode (where conv2d is decomposed)
    assert c.flop_calls == (("aten.convolution", batch * 27_648), ("aten.addmm", batch * 10_240))
    assert c.params == 5_346 and c.param_bytes == 4 * 5_346
    assert c.input_bytes == batch * 3 * 8 * 8 * 4
    # new leaf outputs: conv (8x8x8 fp32) + relu (same) + fc (10); Flatten returns a view: not counted
    assert c.activation_bytes == batch * 4 * (512 + 512 + 10)
    assert c.min_bytes == c.param_bytes + c.input_bytes + 2 * c.activation_bytes
    assert c.uncounted_ops == {"aten.relu": 1}  # FlopCounterMode has no formula for relu; views are not listed


def test_training_step_counts_backward_and_lists_uncounted_ops():
    c = analytic.count(_work("train", 2), "train")
    fwd = 2 * (27_648 + 10_240)
    # backward: conv weight gradient only (the input needs no gradient) = 1x conv; linear: input and
    # weight gradients = 2x linear
    assert c.forward_flops == fwd
    assert c.flops == fwd + 2 * 27_648 + 2 * 2 * 10_240
    assert c.flops_by_op["aten.convolution_backward"] == 2 * 27_648
    assert c.min_bytes == 8 * c.param_bytes + c.input_bytes + 5 * c.activation_bytes
    for op in ("aten.relu", "aten.threshold_backward", "aten._log_softmax"):
        assert op in c.uncounted_ops, c.uncounted_ops
    assert "aten.add_" in c.uncounted_ops or "aten._foreach_add_" in c.uncounted_ops  # the SGD update
    assert not any(op.startswith("profiler.") for op in c.uncounted_ops)
    assert "aten.view" not in c.uncounted_ops and "aten.t" not in c.uncounted_ops


def test_min_bytes_formula_and_unknown_step():
    assert analytic.min_bytes("inference", 100, 10, 1000) == 2110
    assert analytic.min_bytes("train", 100, 10, 1000) == 5810
    with pytest.raises(ValueError):
        analytic.min_bytes("eval", 1, 1, 1)


def test_uncounted_text_orders_by_calls():
    c = analytic.AnalyticCounts(flops=0, forward_flops=0, uncounted_ops={"aten.a": 1, "aten.b": 5, "aten.c": 5})
    assert c.uncounted_text(limit=2) == "aten.b x5, aten.c x5 and 1 more"
