"""Real multi-process jobs on the CPU: torchrun + gloo, as on GPUs with NCCL (no mocks): ``run --gpus 2``, a user's
own torchrun, ``train --gpus 2`` and the interconnect scenario. The studies (``scale``, ``concurrent``, two nodes)
are in ``test_distributed_studies.py``.

Each launch costs ~10-30 s on a 2-core machine (torch imports in the agent and every rank), so tests that check
different things of the same run share one launch: a module-scoped fixture runs the job once into a store, and
several tests read its rows. Every launch is as small as its assertions allow (a tiny model, a few images, one timed
batch, no idle-power wait).
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import cli_env, run_cli, run_cli_process

from accelbench.core.errors import OK
from accelbench.store import Store

FAST = ["--device", "cpu", "--data", "synthetic", "--min-timed-batches", "3", "--warmup-batches", "1"]
# the smallest measurement a case can make: one warm-up and one timed batch, no idle-power wait
SMALL = ["--device", "cpu", "--data", "synthetic", "--min-timed-batches", "1", "--warmup-batches", "1", "--idle-s", "0"]
TINY_MODEL = "helpers:tiny_conv_net"  # 8x8 inputs, 5,346 parameters: builds and runs in milliseconds
# A hung case is stopped this many seconds after it started (--timeout-s). The same value is the ranks' gloo timeout
# (their rendezvous and collectives, launchers/torchrun/context.py), so it must also cover one rank importing torch
# later than the other, and the healthy case after the hang (model, warm-up, one batch, gather), on a loaded 2-core
# machine: 10 s was too short there when that case was cifar-resnet20; the tiny model's case takes far less.
HANG_S = 15


env = cli_env  # the environment of an accelbench subprocess (Popen, torchrun)


def rows(db, run_id=None):
    return Store(db).cases(run_id).to_dict("records")


def left_behind(tmpdir) -> list[str]:
    """What accelbench's processes left in their ``TMPDIR``, less Inductor's cache (kept across runs by design)."""
    return [p.name for p in tmpdir.iterdir() if not p.name.startswith("torchinductor_")]


def check_aggregate(agg, ranks):
    """The aggregate row against its rank rows: common window, sums, straggler."""
    assert agg["window_start_epoch_s"] == min(r["window_start_epoch_s"] for r in ranks)
    assert agg["window_end_epoch_s"] == max(r["window_end_epoch_s"] for r in ranks)
    assert agg["window_s"] == pytest.approx(agg["window_end_epoch_s"] - agg["window_start_epoch_s"], rel=1e-12)
    assert agg["samples_timed"] == sum(r["samples_timed"] for r in ranks)
    assert agg["throughput_samples_per_s"] == pytest.approx(agg["samples_timed"] / agg["window_s"], rel=1e-12)
    assert agg["throughput_per_gpu_samples_per_s"] == pytest.approx(
        agg["throughput_samples_per_s"] / len(ranks), rel=1e-12
    )
    slow = max(ranks, key=lambda r: r["window_end_epoch_s"] - r["window_start_epoch_s"])
    assert agg["straggler_rank"] == slow["rank"]


@dataclass(frozen=True)
class Launched:
    """One shared ``accelbench`` run: how it ended and where it left its store and scratch folder."""

    proc: subprocess.CompletedProcess
    db: Path
    folder: Path
    tag: str = ""


# ---- one launch of three failing and healthy cases: a crashed rank, a hung rank, a case that runs after both ----
CRASH, HANG, HEALTHY = "multi_helpers:crash_on_rank1", "multi_helpers:hang_on_rank1", "multi_helpers:tiny"


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> Launched:
    """``run --gpus 2`` of a case whose rank 1 raises, one whose rank 1 hangs, then a healthy one: torchrun is started
    three times (after the crash, and after the hang is stopped at ``HANG_S``), in a real process whose ``TMPDIR``
    and process tag the tests read."""
    folder = tmp_path_factory.mktemp("faulty")
    db, scratch = folder / "r.db", folder / "scratch"
    scratch.mkdir()
    tag = f"hung-{os.getpid()}-{folder.name}"  # marks this run's processes (other tests may run ranks meanwhile)
    models = f"{CRASH},{HANG},{HEALTHY}"
    args = ["run", "--gpus", "2", "--model", models, "-b", "2", "-n", "4", "--timeout-s", str(HANG_S), "--db", str(db)]
    # a real process: the tests read its TMPDIR and its children's environment (in-process, both are the test's)
    p = run_cli_process(*args, *SMALL, env={"TMPDIR": str(scratch), "ACCELBENCH_TEST_TAG": tag})
    return Launched(p, db, scratch, tag)


@pytest.mark.slow
def test_run_gpus2_crash_then_next_case_runs(faulty):
    """A rank that raises: its case is an error row naming the rank, the run completes, exit 1 with the count of
    failed cases and no traceback, and torchrun starts again on the cases left."""
    p = faulty.proc
    assert p.returncode == 1, p.stdout + p.stderr  # cases ended in error: exit 1 (errors.py)
    assert "2 of 3 cases ended in error" in p.stderr and "Traceback" not in p.stdout + p.stderr
    # each launch's work directory (job file, progress, results, torchelastic's rank logs) is gone when it ends
    assert not left_behind(faulty.folder)
    assert Store(faulty.db).run()["status"] == "complete"
    by = {r["model"]: r for r in rows(faulty.db) if r["aggregate"] == 1}
    assert by[CRASH]["status"] == "error" and by[CRASH]["world_size"] == 2
    assert by[CRASH]["error"] == "rank 1 failed: RuntimeError: injected failure on this rank"
    assert by[HEALTHY]["status"] == "ok" and by[HEALTHY]["world_size"] == 2


@pytest.mark.slow
def test_hung_rank_times_out_and_all_ranks_stop(faulty):
    import psutil

    p = faulty.proc
    assert p.returncode == 1, p.stdout + p.stderr  # the timed-out case is an error row: exit 1 (errors.py)
    assert "Traceback" not in p.stdout + p.stderr and "SignalException" not in p.stdout + p.stderr
    by = {r["model"]: r for r in rows(faulty.db) if r["aggregate"] == 1}
    assert by[HANG]["status"] == "error"
    assert "timeout" in by[HANG]["error"] and f"{HANG_S} s" in by[HANG]["error"]
    assert by[HEALTHY]["status"] == "ok"  # torchrun started again on the cases left

    def ours(proc) -> bool:
        try:
            return proc.environ().get("ACCELBENCH_TEST_TAG") == faulty.tag
        except psutil.Error:  # ended meanwhile, or another user's
            return False

    left = [
        p
        for p in psutil.process_iter(["pid", "cmdline"])
        if "accelbench.launchers.torchrun.worker" in " ".join(p.info["cmdline"] or []) and ours(p)
    ]
    assert not left


# ---- one compiled launch: the aggregate row's columns, the JSON export and the case runner's recorded settings ----
COMPILED = ["run", "--gpus", "2", "--model", TINY_MODEL, "-b", "2", "-n", "4", "--modes", "compile-freeze"]


@pytest.fixture(scope="module")
def compiled(tmp_path_factory) -> Launched:
    """``run --gpus 2 --modes compile-freeze --no-cudnn-benchmark --resume`` of the tiny model into a new store (a new
    run: nothing to resume), exported to JSON."""
    folder = tmp_path_factory.mktemp("compiled")
    db = folder / "g.db"
    p = run_cli(*_compiled_args(folder), check=True)
    return Launched(p, db, folder)


def _compiled_args(folder: Path) -> list[str]:
    files = ["--db", str(folder / "g.db"), "--json", str(folder / "g.json")]
    return [*COMPILED, "--no-cudnn-benchmark", *files, *SMALL, "--resume"]


def test_resume_of_a_complete_gpus_run_measures_nothing(compiled):
    """``--resume`` is idempotent under ``--gpus 2`` too (test_resume_idempotent.py for one process): the first
    ran the settings as a new run; the second says the run is complete, starts no torchrun and adds nothing."""
    db = compiled.db
    assert f"--resume: no earlier run of these settings in {db}: ran them as new run 1" in compiled.proc.stdout
    before = [r["case_id"] for r in rows(db)]
    again = run_cli(*_compiled_args(compiled.folder))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"nothing to resume: run 1 in {db} is complete with these settings" in again.stdout, again.stdout
    assert "Traceback" not in again.stderr and not again.stderr.strip(), again.stderr
    assert before and [r["case_id"] for r in rows(db)] == before  # nothing measured, nothing added
    assert [r["run_id"] for r in Store(db).runs()] == [1]


def test_run_gpus2_aggregate_row_keeps_every_column_by_its_rule(compiled):
    """The aggregate row was copied from a whitelist, so `run --gpus 2 --modes compile-freeze` stored
    compile_mode=None, freezing=None and no energy_source; now every column of the rank rows reaches it by its
    declared rule (per-rank ones excepted), and the exported rows validate against `accelbench schema`."""
    jsonschema = pytest.importorskip("jsonschema")
    from accelbench.core import columns

    got = Store(compiled.db).records()
    (agg,) = [r for r in got if r.get("aggregate")]
    ranks = [r for r in got if r.get("aggregate") is False]
    assert len(ranks) == 2 and agg["status"] == "ok"
    assert (agg["compile_mode"], agg["freezing"], agg["mode"]) == ("default", True, "compile-freeze")
    assert agg["energy_source"] == ranks[0]["energy_source"] is not None
    carried = {k for r in ranks for k, v in r.items() if v is not None and columns.rule(k) != "rank"}
    assert carried and not carried - set(agg), sorted(carried - set(agg))
    check_aggregate(agg, ranks)
    validator = jsonschema.Draft202012Validator(columns.json_schema())
    exported = json.loads((compiled.folder / "g.json").read_text())["results"]
    assert len(exported) == 3 and not [e.message for r in exported for e in validator.iter_errors(r)]


@pytest.mark.slow
def test_run_gpus2_rows_store_the_cudnn_setting_and_backend_columns(compiled):
    """Under ``--gpus`` every row stored ``cudnn_benchmark`` None: the worker ran a case through its own path (one
    case runner for the single process and every rank; moved here from test_case_runner.py to share the launch)."""
    stored = Store(compiled.db).cases().to_dict("records")
    ranks = [r for r in stored if r["aggregate"] == 0]
    assert len(ranks) == 2 and len(stored) == 3
    for r in ranks:
        assert (r["status"], r["cudnn_benchmark"], r["compile_mode"], r["freezing"]) == (OK, 0, "default", 1)
    (agg,) = [r for r in stored if r["aggregate"] == 1]
    assert agg["cudnn_benchmark"] == 0


def test_interconnect_collectives_on_gloo(tmp_path):
    from accelbench import api
    from accelbench.launchers.torchrun.job import DistOptions

    os.environ["PYTHONPATH"] = env()["PYTHONPATH"]
    spec = api.spec(
        "interconnect", {"sizes": (1024, 65536), "warmup": 1, "iters": 3, "device": "cpu", "idle_s": 0}, cuda=False
    )
    run_id = api.interconnect(spec, Store(tmp_path / "i.db"), DistOptions(gpus=2, device="cpu")).run_id
    got = Store(tmp_path / "i.db").cases(run_id).to_dict("records")
    coll = [r for r in got if r["workload"] == "collective"]
    s = spec.settings
    assert {(r["op"], r["requested_bytes"]) for r in coll} == {(o, size) for o in s.ops for size in s.sizes}
    for r in coll:
        assert r["status"] == "ok" and r["backend"] == "gloo" and r["world_size"] == 2
        assert r["algbw_bytes_per_s"] == r["size_bytes"] / r["time_s"]
        factor = {"all_reduce": 1.0, "all_gather": 0.5, "broadcast": 1.0}[r["op"]]
        assert r["busbw_bytes_per_s"] == r["algbw_bytes_per_s"] * factor
        assert 0 < r["time_min_rank_s"] <= r["time_s"]
    assert not [r for r in got if r["workload"] == "p2p"]  # no GPUs, no pair copies
    assert Store(tmp_path / "i.db").run(run_id)["kind"] == "interconnect"


@pytest.mark.slow
def test_launched_by_users_torchrun_runs_as_ranks(tmp_path):
    db = tmp_path / "u.db"
    cmd = [
        *[sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"],
        *["-m", "accelbench", "run", "--model", TINY_MODEL, "-b", "2", "-n", "4", "--db", str(db), *SMALL],
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env(), timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    got = rows(db)
    (agg,) = [r for r in got if r["aggregate"] == 1]
    assert agg["world_size"] == 2 and agg["status"] == "ok"
    check_aggregate(agg, [r for r in got if r["aggregate"] == 0])
    assert Store(db).run()["status"] == "complete"


@pytest.mark.slow
def test_train_cli_gpus2_runs_the_training_step_under_ddp(tmp_path):
    db = tmp_path / "t.db"
    args = ["train", "--gpus", "2", "--model", TINY_MODEL, "-b", "2", "-n", "4", "-p", "fp32,fp16", "--lr", "0.05"]
    run_cli(*args, "--modes", "eager", "--db", str(db), *SMALL, check=True)
    by = {r["precision"]: r for r in rows(db) if r["aggregate"] == 1}
    assert by["fp16"]["status"] == "unsupported" and "not a training precision" in by["fp16"]["error"]
    ok = by["fp32"]
    assert ok["status"] == "ok" and ok["workload"] == "train-ddp" and ok["world_size"] == 2
    assert ok["lr"] == 0.05 and ok["optimizer"] == "sgd"
