"""Accuracy that cannot be trusted is not stored as a figure: outputs that cannot be scored
against the labels (NaN or inf, fewer outputs than the label space, another batch size than the input's) give no
top-1 and a note naming why, never a "cheapest precision meeting the target"; non-finite outputs and a
non-finite training loss are validity flags with their own reason. Pure checks first, then fault rows run as a
user would (``python -m accelbench``)."""

from __future__ import annotations

import pytest
import torch
from conftest import flags, tiny_case
from fault_harness import Fault, cases, check

from accelbench.core.validity import assess
from accelbench.data.evaluation import accuracy_pass
from accelbench.quant.accuracy import cheapest_meeting_target
from accelbench.studies import tune_search as ts

TINY = [*flags(tiny_case(model=None, images=8)), "--db", "{db}"]


def _pass(out_fn, n_classes=10, labels=True):
    batches = [torch.randn(2, 3, 4, 4) for _ in range(2)]
    blabels = [torch.tensor([0, 2]), torch.tensor([3, 7])] if labels else [None, None]
    return accuracy_pass(out_fn, batches, blabels, 4, lambda x: x, n_classes)


def test_scored_outputs_count_hits_and_unscorable_outputs_say_why():
    ranked = lambda x: torch.arange(10.0).flip(0).repeat(x.shape[0], 1)  # noqa: E731  (top-1 class 0, top-5 0..4)
    good = _pass(ranked)
    assert good.hits == {1: 1, 5: 3} and good.note is None and good.finite  # labels 0, 2 | 3, 7
    nan = _pass(lambda x: torch.full((x.shape[0], 10), float("nan")))
    assert nan.hits is None and not nan.finite and "NaN or inf" in nan.note
    few = _pass(lambda x: torch.zeros(x.shape[0], 3))
    assert few.hits is None and few.finite and "3 outputs, fewer than the 10 classes" in few.note
    one = _pass(lambda x: torch.zeros(1, 10))
    assert one.hits is None and "1 outputs for a batch of 2 inputs" in one.note
    shaped = _pass(lambda x: torch.zeros(x.shape[0], 10, 2, 2))
    assert shaped.hits is None and "(2, 10, 2, 2), not (batch, classes)" in shaped.note
    unlabelled = _pass(lambda x: torch.full((x.shape[0], 10), float("inf")), labels=False)
    assert unlabelled.hits is None and not unlabelled.finite  # the first step alone still checks the numerics


def test_non_finite_outputs_and_loss_are_flags_with_their_own_reason():
    out = assess({"latency_spread": 0.01, "outputs_finite": 0})
    assert out["validity"] == "non-finite-output" and "NaN or inf" in out["validity_reason"]
    assert out["validity_checks"] == "spread,outputs"
    out = assess({"step_time_spread": 0.2, "loss_finite": False, "loss_last": float("nan")}, "step_time_spread")
    assert out["validity"] == "latency-spread,non-finite-loss"
    assert "training loss is not finite (last loss nan)" in out["validity_reason"]
    assert assess({"outputs_finite": 1, "loss_finite": True})["validity"] == "ok"


def test_a_non_finite_row_is_never_the_cheapest_nor_the_tune_winner():
    rows = [
        {
            "model": "m",
            "precision": "fp32",
            "status": "ok",
            "top1": 0.0,
            "throughput_samples_per_s": 10.0,
            "outputs_finite": 0,
        },
        {
            "model": "m",
            "precision": "amp-fp16",
            "status": "ok",
            "top1": 0.0,
            "throughput_samples_per_s": 20.0,
            "outputs_finite": 0,
        },
    ]
    assert rows and cheapest_meeting_target(rows) == []  # no reference, no candidate: no line at all
    assert "not finite" in ts.violation({**rows[0]}, ts.TuneSettings())
    assert "loss not finite" in ts.violation({"status": "ok", "loss_finite": 0}, ts.TuneSettings())
    assert ts.violation({"status": "ok", "outputs_finite": float("nan")}, ts.TuneSettings()) is None  # absent
    note = {"status": "ok", "top1": None, "accuracy_note": "the model has 3 outputs"}
    assert "3 outputs" in ts.violation(note, ts.TuneSettings(min_top1_ratio=0.99), top1_ref=0.9)


def _row(db):
    got = cases(db)
    assert len(got) == 1, got
    return got[0]


def _unscored(reason: str, flagged: bool):
    def check_store(db, tmp):
        r = _row(db)
        assert r["status"] == "ok" and r["top1"] is None and r["top5"] is None, r
        assert reason in r["accuracy_note"] and r["throughput_samples_per_s"] > 0
        assert ("non-finite-output" in r["validity"]) == flagged and r["outputs_finite"] == (0 if flagged else 1)

    return check_store


def _diverged(db, tmp):
    r = _row(db)
    assert r["status"] == "ok" and r["loss_finite"] == 0 and "non-finite-loss" in r["validity"]


FAULTS = [
    Fault(
        "nan-outputs",
        ["run", "-m", "measure_helpers:nan_outputs", "--label-space", "cifar10", *TINY],
        0,
        store=_unscored("NaN or inf", True),
        stdout="no accuracy: the model's outputs hold NaN or inf",
    ),
    Fault(
        "fewer-outputs-than-the-label-space",
        ["run", "-m", "measure_helpers:three_outputs", "--label-space", "cifar10", *TINY],
        0,
        store=_unscored("3 outputs, fewer than the 10 classes", False),
    ),
    Fault(
        "output-batch-of-one",
        ["run", "-m", "measure_helpers:first_only", "--label-space", "cifar10", *TINY],
        0,
        store=_unscored("returned 1 outputs for a batch of 2 inputs", False),
    ),
    Fault(
        "train-loss-not-finite",
        ["train", "-m", "cifar-resnet20", "--lr", "1e30", *TINY],
        0,
        store=_diverged,
        stdout="training loss is not finite",
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.id)
def test_fault(fault, tmp_path):
    p = check(fault, tmp_path)
    assert "cheapest precision meeting the target" not in p.stdout, p.stdout
