"""The drifts the renovation fixed ("One core, three axes"), each held by a test: every scenario's rows carry
the derived columns, the price/idle/telemetry flags mean the same under --gpus, the case key and the batch
size agree under --global-batch, the profiled training step is the one ``accelbench train`` times, and a
toy backend is one registry line (docs/extending.md)."""

from __future__ import annotations

import pytest
import torch
from conftest import run_cli
from test_distributed import FAST, rows

from accelbench import api
from accelbench.store import Store

DERIVED = (
    "device_name",
    "validity",
    "validity_checks",
    "price_per_hour_usd",
    "price_source",
    "cost_usd",
    "cost_per_1000_samples_usd",
)


@pytest.mark.slow
def test_gpus_rows_carry_derived_columns_and_the_flags_apply(tmp_path):
    db = tmp_path / "d.db"
    run_cli(
        "run",
        "--gpus",
        "2",
        "--global-batch",
        "--model",
        "cifar-resnet20",
        "-b",
        "8",
        "-n",
        "16",
        "--db",
        str(db),
        "--price-per-hour",
        "3.0",
        "--kwh-price",
        "0.25",
        "--idle-s",
        "0.2",
        "--telemetry-period-ms",
        "50",
        *FAST,
        check=True,
    )
    all_rows = rows(db)
    (agg,) = [r for r in all_rows if r["aggregate"] == 1]
    ranks = [r for r in all_rows if r["aggregate"] == 0]
    for key in DERIVED:
        assert agg[key] is not None, key
    # --price-per-hour is per device-hour: the job's CPU "device" (gloo ranks share the host)
    assert agg["price_per_hour_usd"] == 3.0 and agg["price_source"] == "--price-per-hour / config"
    assert agg["cost_usd"] == pytest.approx(3.0 * agg["total_time_s"] / 3600, rel=1e-9)
    assert agg["kwh_price_usd"] == 0.25
    assert {r["telemetry_period_ms"] for r in ranks} == {50.0}  # the period reaches the ranks' monitors
    run = Store(db).run()
    # --idle-s reaches the launch (measured once before it where the host can: NVML or RAPL; this CPU cannot)
    assert run["spec"]["idle_s"] == 0.2 and run["env"]["idle_power_source"] == "not available"
    # --global-batch: the key, the batch_size column and the split agree
    assert agg["case_key"].startswith("cifar-resnet20|bs=8|") and agg["batch_size"] == 8
    assert agg["global_batch_size"] == 8 and agg["rank_batch_size"] == 4 and agg["scaling_mode"] == "strong"
    assert {r["batch_size"] for r in ranks} == {8} and {r["rank_batch_size"] for r in ranks} == {4}


def test_convergence_and_profile_rows_carry_derived_columns(tmp_path, one_thread):
    st = Store(tmp_path / "c.db")
    spec = api.spec(
        "converge",
        {
            "model": "cifar-resnet20",
            "batch_sizes": "64",
            "epochs": 1,
            "images": 128,
            "eval_images": 100,
            "device": "cpu",
            "idle_s": 0,
            "price_per_hour": 1.0,
            "checkpoint_dir": str(tmp_path / "ck"),
        },
        cuda=False,
    )
    out = api.train(spec, st)
    recs = st.cases(out.run_id).to_dict("records")
    (epoch,) = [r for r in recs if r["row_type"] == "epoch"]
    (summary,) = [r for r in recs if r["row_type"] == "summary"]
    assert epoch["cost_usd"] == pytest.approx(epoch["epoch_wall_s"] / 3600, rel=1e-9) and epoch["validity"]
    assert summary["cost_usd"] == pytest.approx(summary["total_wall_s"] / 3600, rel=1e-9)
    prof = api.spec(
        "profile",
        {
            "model": "helpers:tiny_conv_net",
            "batch_size": 2,
            "device": "cpu",
            "idle_s": 0,
            "price_per_hour": 2.0,
            "ncu": "off",
            "timed_steps": 2,
        },
        cuda=False,
    )
    pout, _, _ = api.profile(prof, st)
    (row,) = pout.records
    for key in DERIVED:
        assert row[key] is not None, key
    assert row["cost_usd"] == pytest.approx(2.0 * row["timed_wall_s"] / 3600, rel=1e-9)


def test_the_profiled_training_step_is_the_one_train_times():
    from accelbench.scenarios.profile.step import build
    from accelbench.training.step import SWEEP_OPTIMIZER, TrainStep

    spec = api.spec(
        "profile",
        {"model": "helpers:tiny_conv_net", "batch_size": 2, "device": "cpu", "steps": "train", "data": "synthetic"},
        cuda=False,
    )
    case = api_cases(spec)[0]
    work = build(case, spec, torch.device("cpu"))
    step = work.run.__closure__[0].cell_contents  # the TrainStep the profiled callable runs
    assert isinstance(step, TrainStep)
    group = step.optimizer.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (
        SWEEP_OPTIMIZER["lr"],
        SWEEP_OPTIMIZER["momentum"],
        SWEEP_OPTIMIZER["weight_decay"],
    )
    train = api.spec("train_step", {}, cuda=False).settings
    assert (train.optimizer, train.lr, train.momentum, train.weight_decay) == tuple(SWEEP_OPTIMIZER.values())


def api_cases(spec):
    from accelbench import scenarios

    return scenarios.get(spec.scenario).cases(spec, "cpu")


def test_a_toy_backend_is_one_file_and_one_registry_line(tmp_path, one_thread):
    """docs/extending.md's example: a backend that runs the model under ``torch.jit.trace``, registered in one
    line, is accepted by the spec, runs through the one loop, and its rows carry the derived columns."""
    from accelbench import backends
    from accelbench.backends.base import Backend, register

    class Traced(Backend):
        name = "jit-trace"

        def _build(self, module, example, device):
            return torch.jit.trace(module, example)

    register(Traced())
    try:
        spec = api.spec(
            "inference",
            {
                "model": "cifar-resnet20",
                "batch_sizes": "2",
                "images": 4,
                "device": "cpu",
                "modes": "eager,jit-trace",
                "idle_s": 0,
            },
            cuda=False,
        )
        out = api.run(spec, Store(tmp_path / "t.db"))
        by = {r["mode"]: r for r in out.records}
        assert by["jit-trace"]["status"] == "ok" and by["jit-trace"]["compile_s"] > 0
        assert by["jit-trace"]["top1"] == by["eager"]["top1"] and by["jit-trace"]["validity"]
    finally:
        del backends.BACKENDS["jit-trace"]
