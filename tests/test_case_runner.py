"""One case runner for the single process and every torchrun rank: the same row,
cuDNN policy, statuses, cleanup and recorded settings; a scenario's own setting is declared, the user's flag wins,
and the row stores what ran."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import run_cli
from test_distributed import FAST

from accelbench import api, scenarios
from accelbench.core.errors import OK, OOM, ConfigError
from accelbench.core.rank import Rank
from accelbench.launchers.case import run_case
from accelbench.launchers.torchrun.ranks import RankInfo
from accelbench.launchers.torchrun.worker import RankSink, measure_case
from accelbench.store import Store

TINY = {
    "models": "helpers:tiny_conv_net",
    "batch_sizes": "4",
    "device": "cpu",
    "data": "synthetic",
    "images": 8,
    "min_timed_batches": 2,
    "warmup_batches": 1,
    "idle_s": 0,
}


def cli(*args: str):
    return run_cli(*args, check=True)


class OneRank(Rank):
    """Rank 0 of a torchrun job, without torch.distributed: what a scenario and the worker ask of a rank."""

    distributed = True

    def __init__(self, device, workdir):
        super().__init__(device)
        self.info = RankInfo(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, launcher="torchrun")
        self.workdir = str(workdir)


def _stored(db, run_id, column):
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute(f"SELECT {column} FROM cases WHERE run_id=? ORDER BY case_id", (run_id,))]


@pytest.mark.parametrize("flag, stored", [(False, 0), (True, 1), (None, 1)])
def test_train_step_stores_the_cudnn_setting_that_ran(tmp_path, flag, stored):
    """``--no-cudnn-benchmark`` used to store 1: the scenario set autotuning on inside its measurement. It now
    declares on as its default, and the user's flag wins."""
    spec = api.spec("train_step", {**TINY, "cudnn_benchmark": flag}, cuda=False)
    out = api.train(spec, Store(tmp_path / "t.db"))
    assert [r["status"] for r in out.records] == [OK]
    assert _stored(tmp_path / "t.db", out.run_id, "cudnn_benchmark") == [stored]


def test_train_cli_no_cudnn_benchmark_stores_0(tmp_path):
    db = tmp_path / "t.db"
    cli(
        "train",
        "--model",
        "helpers:tiny_conv_net",
        "-b",
        "4",
        "--images",
        "8",
        "--no-cudnn-benchmark",
        "--idle-s",
        "0",
        "--db",
        str(db),
        *FAST,
    )
    assert _stored(db, 1, "status") == [OK] and _stored(db, 1, "cudnn_benchmark") == [0]


def test_convergence_rows_store_the_cudnn_setting_and_determinism_refuses_autotuning(tmp_path):
    conv = {
        "model": "helpers:tiny_conv_net",
        "batch_sizes": "16",
        "epochs": 1,
        "images": 32,
        "eval_images": 16,
        "device": "cpu",
        "idle_s": 0,
        "checkpoint_dir": str(tmp_path / "ck"),
    }
    out = api.train(api.spec("converge", {**conv, "cudnn_benchmark": False}, cuda=False), Store(tmp_path / "c.db"))
    rows = _stored(tmp_path / "c.db", out.run_id, "row_type || ':' || status || ':' || cudnn_benchmark")
    assert rows == ["epoch:ok:0", "summary:ok:0"]  # stored 1 before: the run's default, set once at prepare
    with pytest.raises(ConfigError, match="invalid cudnn_benchmark True: allowed off with deterministic training"):
        api.spec("converge", {**conv, "deterministic": True, "cudnn_benchmark": True}, cuda=False)


def test_profile_rows_store_the_cudnn_setting_each_step_ran_under(tmp_path):
    """The profiled training step runs as ``accelbench train`` runs it (autotuning on); it stored 0 while it ran 1."""
    spec = api.spec(
        "profile",
        {
            "model": "helpers:tiny_conv_net",
            "batch_size": 2,
            "device": "cpu",
            "idle_s": 0,
            "ncu": "off",
            "timed_steps": 1,
            "steps": "inference,train",
        },
        cuda=False,
    )
    out, _, _ = api.profile(spec, Store(tmp_path / "p.db"))
    assert {r["step"]: (r["status"], r["cudnn_benchmark"]) for r in out.records} == {
        "inference": (OK, False),
        "train": (OK, True),
    }


def _inference_case(model: str, flags: dict):
    import torch

    scenario = scenarios.get("inference")
    spec = api.spec("inference", {**TINY, "models": model, **flags}, cuda=False)
    (case,) = scenario.cases(spec, "cpu")
    return scenario, spec, case, scenario.prepare(spec, torch.device("cpu"), None)


def test_a_rank_runs_a_case_as_one_process_does(tmp_path):
    import torch

    scenario, spec, case, state = _inference_case("helpers:tiny_conv_net", {"cudnn_benchmark": False})
    one, _ = run_case(scenario, case, spec, state, Rank(torch.device("cpu")), RankSink())
    ranked = measure_case(OneRank(torch.device("cpu"), tmp_path), scenario, case, spec, state, RankSink())["record"]
    settings = ("status", "error", "cudnn_benchmark", "compile_mode", "freezing", "model", "batch_size", "precision")
    assert one["status"] == OK and {k: one[k] for k in settings} == {k: ranked[k] for k in settings}
    assert one["cudnn_benchmark"] is False and ranked["case_wall_s"] > 0  # recorded on a rank too (was missing)
    assert (one["workload"], ranked["workload"]) == ("inference", "inference-dp")


def test_a_failing_rank_notes_the_row_and_stops_the_job(tmp_path):
    import torch

    scenario, spec, case, state = _inference_case("helpers:oom_model", {"batch_sizes": "8"})
    one, _ = run_case(scenario, case, spec, state, Rank(torch.device("cpu")), RankSink())
    assert one["status"] == OOM and "CUDA out of memory" in one["error"]
    with pytest.raises(Exception, match="CUDA out of memory"):  # torchrun then stops the other ranks
        measure_case(OneRank(torch.device("cpu"), tmp_path), scenario, case, spec, state, RankSink())
    noted = json.loads((tmp_path / "error-rank0.json").read_text())
    assert (noted["oom"], noted["error"], noted["key"]) == (True, one["error"], case.key)


# test_run_gpus2_rows_store_the_cudnn_setting_and_backend_columns (the rows a --gpus 2 run stores) is in
# test_distributed.py, where it reads a launch shared with the aggregate-row test instead of starting its own.
