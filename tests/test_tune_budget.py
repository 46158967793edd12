"""``accelbench tune`` keeps its budget: trials planned from measured costs, a trial that runs
past the budget stopped, the final rounds sized to fit, a budget too small for one trial refused up front with the
minimum it needs, and the time spent reported as it was. The cost model with exact numbers first, then real tunes
of tiny models on the CPU."""

from __future__ import annotations

import re
import time

import pytest
from conftest import tiny_case
from fault_harness import Fault, check, no_run

from accelbench.core.errors import ConfigError
from accelbench.studies import tune_budget as tb
from accelbench.studies import tune_search as ts

TINY = tiny_case(model=None, batch_sizes=None, images=8, telemetry_period_ms=0, min_timed_batches=4, warmup_batches=1)


def test_the_cost_model_predicts_from_the_trials_measured():
    m = tb.CostModel(warmup=2, min_steps=3, images=8)
    # 10 timed steps in 1.0 s: 0.1 s a step; fixed = 3.0 - 1.0 timed - 2 x 0.1 warm-up
    m.observe(("fp32", "eager"), 2, {"timed_wall_s": 1.0, "batches_timed": 10}, trial_s=3.0)
    assert m.fixed[("fp32", "eager")] == pytest.approx(1.8)
    # same batch, 2 windows of 0.5 s (more than 3 steps of 0.1 s): 1.8 + 0.2 + 2 x 0.5
    assert m.predict(("fp32", "eager"), 2, window_s=0.5, repeats=2) == pytest.approx(3.0)
    # batch 4: the step scales with the samples (0.2 s), 3 steps (0.6 s) outlast a 0.1 s window
    assert m.predict(("fp32", "eager"), 4, window_s=0.1, repeats=1) == pytest.approx(1.8 + 0.4 + 0.6)
    # batch 1: the nearest larger batch's step (an upper bound)
    assert m.step_s(("fp32", "eager"), 1) == pytest.approx(0.1)
    # another precision in the same mode: its fixed cost; a compiling backend never measured: + the prior
    assert m.fixed_s(("bf16", "eager")) == pytest.approx(1.8)
    assert m.fixed_s(("bf16", "compile")) == pytest.approx(1.8 + tb.COMPILE_PRIOR_S)
    m.observe(("bf16", "compile"), 2, {"status": "oom"}, trial_s=40.0)  # a failed trial: all of it is fixed
    assert m.fixed_s(("fp32", "compile")) == pytest.approx(40.0) and m.step_s(("bf16", "compile"), 2) == 0.1
    train = tb.CostModel(warmup=0, min_steps=3, images=8, whole_passes=True, probe=tb.Probe(setup_s=1.0, step_s=0.1))
    # nothing measured: the probe's build + an accuracy pass (8 steps of 0.1) + one whole pass a window (8 steps)
    assert train.predict(("fp32", "eager"), 1, window_s=0.0, repeats=1) == pytest.approx(
        1.0 + tb.LOOP_OVERHEAD_S + 0.8 + 0.8
    )


def test_the_final_rounds_fit_what_is_left():
    cost = {"leader": 2.0, "runner-up": 3.0, "default": 5.0}.__getitem__
    cands = ["leader", "runner-up", "default"]
    assert tb.fit_final(cands, cost, left_s=25.0, rounds=2) == (cands, 2)
    assert tb.fit_final(cands, cost, left_s=12.0, rounds=2) == (cands, 1)
    assert tb.fit_final(cands, cost, left_s=9.0, rounds=2) == (["leader", "runner-up"], 1)  # the default goes first
    assert tb.fit_final(cands, cost, left_s=4.0, rounds=2) == (["leader"], 2)
    assert tb.fit_final(cands, cost, left_s=1.0, rounds=2) == ([], 0)


def test_the_deadline_stops_the_block():
    with pytest.raises(tb.BudgetCut):
        with tb.deadline(0.05):
            time.sleep(30)  # interrupted: the test would take 30 s otherwise
    with tb.deadline(None):  # no deadline: nothing armed
        time.sleep(0.01)


def _tune(tmp_path, budget_s: float, model: str = "cifar-resnet20", name: str = "t", **kw):
    from accelbench import api
    from accelbench.store import Store

    spec = api.spec("inference", {**TINY, "model": model})
    settings = ts.TuneSettings(
        **{
            "precisions": ("fp32", "bf16"),
            "modes": ("eager",),
            "screen_time_s": 0.05,
            "final_rounds": 2,
            "final_repeats": 2,
            "budget_s": budget_s,
            **kw,
        }
    )
    store = Store(tmp_path / f"{name}.db")
    return api.tune(spec, store, settings), store


def _minimum(tmp_path, model: str) -> int:
    """The minimum budget the tune asks for here (a too-small budget is refused before a run opens)."""
    with pytest.raises(ConfigError, match=r"invalid budget_s 0\.5: allowed at least \d+ s here") as got:
        _tune(tmp_path, 0.5, model, name="refused")
    from fault_harness import runs

    assert runs(tmp_path / "refused.db") == []  # refused before the run opened
    return int(re.search(r"at least (\d+) s", str(got.value)).group(1))


def _honest(out, store, budget_s: float) -> None:
    rows = store.cases(out.run_id).to_dict("records")
    assert rows and len(rows) == len(out.trials)
    assert out.spent_s <= 1.1 * budget_s, (out.spent_s, budget_s)
    assert all(r["tune_trial_s"] > 0 for r in rows)
    assert sum(r["tune_trial_s"] for r in rows) <= out.spent_s  # the spent time covers every trial


def _accepted(tmp_path, budget_s: float, name: str, **kw):
    """A tune at ``budget_s``, or, where this machine's load made the probe slower than the minimum was measured
    at (a shared CI machine), at the new minimum the refusal states plus 6 s; returns (outcome, store, the budget
    it kept)."""
    for attempt in range(3):
        try:
            return (*_tune(tmp_path, budget_s, name=f"{name}-{attempt}", **kw), budget_s)
        except ConfigError as e:
            least = int(re.search(r"at least (\d+) s", str(e)).group(1))
            assert least > budget_s  # refused only as too small
            budget_s = least + 6.0
    raise AssertionError(f"no budget accepted after 3 probes, the last {budget_s} s")


def test_a_real_tune_keeps_its_budget_and_refuses_one_too_small(tmp_path, one_thread):
    least = _minimum(tmp_path, "cifar-resnet20")
    for i, budget in enumerate((least + 6.0, 2 * least + 15.0)):
        out, store, kept = _accepted(tmp_path, budget, name=f"b{i}")
        _honest(out, store, kept)
    assert out.winner is not None  # the larger budget measured a winner


def test_a_trial_running_past_the_budget_is_stopped(tmp_path, one_thread):
    # batches 1 and 2 take milliseconds, batch 4 sleeps 30 s a step: nothing measured before predicts it
    budget = _minimum(tmp_path, "measure_helpers:slow_above_two") + 6.0
    out, store, budget = _accepted(
        tmp_path, budget, "slow", model="measure_helpers:slow_above_two", precisions=("fp32",)
    )
    _honest(out, store, budget)
    stopped = [r for r in out.trials if r["status"] == "skipped"]
    assert stopped and all(int(r["batch_size"]) > 2 and "stopped at the tune's budget" in r["error"] for r in stopped)
    assert out.winner is None or out.winner["batch_size"] <= 2


FAULTS = [
    Fault(
        "tune-budget-too-small",
        ["tune", "-m", "cifar-resnet20", "--device", "cpu", "--images", "8", "--budget-s", "0.5", "--db", "{db}"],
        2,
        "invalid budget_s 0.5: allowed at least",
        store=no_run,
        one_line=True,
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.id)
def test_fault(fault, tmp_path):
    check(fault, tmp_path)
