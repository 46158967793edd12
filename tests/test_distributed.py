"""Real multi-process jobs on the CPU: torchrun + gloo, as on GPUs with NCCL (no mocks).

Each launch costs ~20-30 s on a 2-core machine (torch imports in the agent and every rank), so the quick
tests cover several behaviours per launch.
"""

import json
import math
import os
import socket
import subprocess
import sys

import pytest
from conftest import cli_env, run_cli

from accelbench.store import Store

FAST = ["--device", "cpu", "--data", "synthetic", "--min-timed-batches", "3", "--warmup-batches", "1"]


env = cli_env  # the environment of an accelbench subprocess (Popen, torchrun)


def rows(db, run_id=None):
    return Store(db).cases(run_id).to_dict("records")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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


def test_scale_train_ddp_1_and_2_processes_with_a_crashed_rank(tmp_path):
    """One scaling study: DDP on 1 and 2 gloo processes; the second model raises on rank 1 (only exists at 2)."""
    db, png = tmp_path / "s.db", tmp_path / "s.png"
    p = run_cli(
        "scale",
        "--gpus",
        "1,2",
        "--workload",
        "train",
        "--model",
        "cifar-resnet20,multi_helpers:crash_on_rank1",
        "-b",
        "8",
        "-n",
        "32",
        "--db",
        str(db),
        "--plot",
        str(png),
        *FAST,
    )
    assert p.returncode == 1, p.stdout + p.stderr  # the crashed case is an error row: exit 1 (errors.py)
    assert "1 of 4 cases ended in error" in p.stderr and "Traceback" not in p.stdout + p.stderr
    assert "Efficiency" in p.stdout and png.stat().st_size > 0
    run = Store(db).run()
    assert run["kind"] == "scale" and run["spec"]["gpus"] == [1, 2] and run["spec"]["workload"] == "train"
    assert run["status"] == "complete"
    all_rows = rows(db, run["run_id"])
    aggs = {(r["model"], r["world_size"]): r for r in all_rows if r["aggregate"] == 1}
    one, two = aggs[("cifar-resnet20", 1)], aggs[("cifar-resnet20", 2)]
    assert one["speedup"] == 1.0 and one["scaling_efficiency"] == 1.0
    assert two["speedup"] == two["throughput_samples_per_s"] / one["throughput_samples_per_s"]
    assert two["scaling_efficiency"] == two["speedup"] / 2
    assert two["baseline_case_id"] == one["case_id"] and two["global_batch_size"] == 16  # weak scaling
    ranks = sorted(
        (r for r in all_rows if r["aggregate"] == 0 and r["world_size"] == 2 and r["model"] == "cifar-resnet20"),
        key=lambda r: r["rank"],
    )
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["backend"] == "gloo" for r in ranks)
    check_aggregate(two, ranks)
    for r in ranks:
        assert r["workload"] == "train-ddp" and r["steps_timed"] >= 3 and math.isfinite(r["loss_last"])
        assert r["step_time_p50_ms"] > 0 and r["step_time_nosync_mean_ms"] > 0 and r["rank_images"] == 16
    assert len(Store(db).series(int(ranks[1]["case_id"]), "step_time_ms")) == ranks[1]["steps_timed"]
    sync = sum(r["step_time_mean_ms"] for r in ranks) / 2
    nosync = sum(r["step_time_nosync_mean_ms"] for r in ranks) / 2
    assert two["comm_exposed_share"] == pytest.approx((sync - nosync) / sync, rel=1e-12)
    # the failing model: fine on 1 process, one error row naming rank 1 on 2; finished rows are kept
    assert aggs[("multi_helpers:crash_on_rank1", 1)]["status"] == "ok"
    bad = aggs[("multi_helpers:crash_on_rank1", 2)]
    assert bad["status"] == "error" and bad["error"] == "rank 1 failed: RuntimeError: injected failure on this rank"
    assert not [
        r
        for r in all_rows
        if r["model"] == "multi_helpers:crash_on_rank1" and r["world_size"] == 2 and r["aggregate"] == 0
    ]


def test_two_node_rendezvous_on_loopback(tmp_path):
    """Two torchrun agents (--nnodes 2, c10d on 127.0.0.1) form one job of 2 ranks."""
    port = free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "accelbench",
                "run",
                "--gpus",
                "1",
                "--nnodes",
                "2",
                "--node-rank",
                str(k),
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--model",
                "cifar-resnet20",
                "-b",
                "4",
                "-n",
                "16",
                "--db",
                str(tmp_path / f"n{k}.db"),
                *FAST,
                "--data",
                "cifar10-test",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env(),
        )
        for k in (0, 1)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    stored = [rows(tmp_path / f"n{k}.db") for k in (0, 1)]
    # global rank 0 sits on one of the nodes (c10d orders nodes itself); that node's store has the case
    (mine,) = [s for s in stored if s]
    ranks = sorted((r for r in mine if r["aggregate"] == 0), key=lambda r: r["rank"])
    (agg,) = [r for r in mine if r["aggregate"] == 1]
    assert [r["rank"] for r in ranks] == [0, 1] and {r["node_rank"] for r in ranks} == {0, 1}
    assert agg["world_size"] == 2 and agg["nnodes"] == 2 and agg["status"] == "ok"
    check_aggregate(agg, ranks)
    assert all(r["rank_images"] == 8 and r["backend"] == "gloo" for r in ranks)  # the 16 images are sharded
    # accuracy of the whole job from the ranks' hit counts (real labelled images, bundled weights)
    assert agg["accuracy_samples"] == 16
    assert agg["top1"] == (ranks[0]["top1_correct"] + ranks[1]["top1_correct"]) / 16 and agg["top1"] > 0.5
    assert any("rank 0 ran on another node" in o for o in outs)


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


def test_run_gpus2_aggregate_row_keeps_every_column_by_its_rule(tmp_path):
    """Issue 22: the aggregate row was copied from a whitelist, so `run --gpus 2 --modes compile-freeze` stored
    compile_mode=None, freezing=None and no energy_source; now every column of the rank rows reaches it by its
    declared rule (per-rank ones excepted), and the exported rows validate against `accelbench schema`."""
    jsonschema = pytest.importorskip("jsonschema")
    from accelbench.core import columns

    db, js = tmp_path / "g.db", tmp_path / "g.json"
    run_cli(
        "run",
        "--gpus",
        "2",
        "--model",
        "cifar-resnet20",
        "-b",
        "4",
        "-n",
        "8",
        "--modes",
        "compile-freeze",
        "--db",
        str(db),
        "--json",
        str(js),
        *FAST,
        check=True,
    )
    got = Store(db).records()
    (agg,) = [r for r in got if r.get("aggregate")]
    ranks = [r for r in got if r.get("aggregate") is False]
    assert len(ranks) == 2 and agg["status"] == "ok"
    assert (agg["compile_mode"], agg["freezing"], agg["mode"]) == ("default", True, "compile-freeze")
    assert agg["energy_source"] == ranks[0]["energy_source"] is not None
    carried = {k for r in ranks for k, v in r.items() if v is not None and columns.rule(k) != "rank"}
    assert carried and not carried - set(agg), sorted(carried - set(agg))
    check_aggregate(agg, ranks)
    validator = jsonschema.Draft202012Validator(columns.json_schema())
    rows = json.loads(js.read_text())["results"]
    assert len(rows) == 3 and not [e.message for r in rows for e in validator.iter_errors(r)]


@pytest.mark.slow
def test_run_gpus2_crash_then_next_case_runs(tmp_path):
    db, scratch = tmp_path / "r.db", tmp_path / "scratch"
    scratch.mkdir()
    p = run_cli(
        "run",
        "--gpus",
        "2",
        "--model",
        "multi_helpers:crash_on_rank1,cifar-resnet20",
        "-b",
        "4",
        "-n",
        "8",
        "--db",
        str(db),
        *FAST,
        env={"TMPDIR": str(scratch)},
    )
    assert p.returncode == 1, p.stdout + p.stderr  # one case ended in error: exit 1 (errors.py)
    # each launch's work directory (job file, progress, results, torchelastic's rank logs) is gone when it ends
    assert not left_behind(scratch)
    by = {r["model"]: r for r in rows(db) if r["aggregate"] == 1}
    assert by["multi_helpers:crash_on_rank1"]["error"] == "rank 1 failed: RuntimeError: injected failure on this rank"
    assert by["cifar-resnet20"]["status"] == "ok" and by["cifar-resnet20"]["world_size"] == 2


@pytest.mark.slow
def test_hung_rank_times_out_and_all_ranks_stop(tmp_path):
    import psutil

    db = tmp_path / "h.db"
    tag = f"hung-{os.getpid()}-{tmp_path.name}"  # marks this test's processes (other tests may run ranks meanwhile)
    p = run_cli(
        "run",
        "--gpus",
        "2",
        "--model",
        "multi_helpers:hang_on_rank1,cifar-resnet20",
        "-b",
        "4",
        "-n",
        "8",
        "--timeout-s",
        "30",
        "--db",
        str(db),
        *FAST,
        env={"ACCELBENCH_TEST_TAG": tag},
    )
    assert p.returncode == 1, p.stdout + p.stderr  # the timed-out case is an error row: exit 1 (errors.py)
    assert "Traceback" not in p.stdout + p.stderr and "SignalException" not in p.stdout + p.stderr
    by = {r["model"]: r for r in rows(db) if r["aggregate"] == 1}
    assert by["multi_helpers:hang_on_rank1"]["status"] == "error"
    # 30 s, not 10: on a loaded 2-core machine the healthy case's ranks (torch imports, gloo) took over 10 s
    assert (
        "timeout" in by["multi_helpers:hang_on_rank1"]["error"] and "30 s" in by["multi_helpers:hang_on_rank1"]["error"]
    )
    assert by["cifar-resnet20"]["status"] == "ok"  # torchrun started again on the cases left

    def ours(proc) -> bool:
        try:
            return proc.environ().get("ACCELBENCH_TEST_TAG") == tag
        except psutil.Error:  # ended meanwhile, or another user's
            return False

    left = [
        p
        for p in psutil.process_iter(["pid", "cmdline"])
        if "accelbench.launchers.torchrun.worker" in " ".join(p.info["cmdline"] or []) and ours(p)
    ]
    assert not left


@pytest.mark.slow
def test_concurrent_jobs_vs_sequential(tmp_path):
    db, scratch = tmp_path / "c.db", tmp_path / "scratch"
    scratch.mkdir()
    p = run_cli(
        "concurrent",
        "--models",
        "multi_helpers:tiny,cifar-resnet20",
        "-b",
        "4",
        "-n",
        "8",
        "--min-time-s",
        "1",
        "--db",
        str(db),
        *FAST,
        check=True,
        env={"TMPDIR": str(scratch)},
    )
    assert "concurrent vs sequential" in p.stdout
    assert not left_behind(scratch)  # the jobs' own stores were merged and removed, as were the launches' folders
    got = rows(db)
    aggs = [r for r in got if r.get("aggregate") == 1]
    assert {(r["job"], r["schedule"]) for r in aggs} == {
        (0, "concurrent"),
        (1, "concurrent"),
        (0, "sequential"),
        (1, "sequential"),
    }
    summ = {r["schedule"]: r for r in got if r["workload"] == "concurrent-summary"}
    assert summ["comparison"]["makespan_speedup"] == summ["sequential"]["makespan_s"] / summ["concurrent"]["makespan_s"]
    assert summ["comparison"]["work_speedup"] == summ["sequential"]["work_time_s"] / summ["concurrent"]["work_time_s"]
    for s in ("concurrent", "sequential"):
        mine = [r for r in aggs if r["schedule"] == s]
        works = [r["images"] / r["throughput_samples_per_s"] for r in sorted(mine, key=lambda r: r["job"])]
        assert summ[s]["work_time_s"] == pytest.approx(max(works) if s == "concurrent" else sum(works), rel=1e-12)
    assert 0 <= summ["concurrent"]["overlap_fraction"] <= 1


@pytest.mark.slow
def test_launched_by_users_torchrun_runs_as_ranks(tmp_path):
    db = tmp_path / "u.db"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "-m",
        "accelbench",
        "run",
        "--model",
        "cifar-resnet20",
        "-b",
        "4",
        "-n",
        "8",
        "--db",
        str(db),
        *FAST,
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
    run_cli(
        "train",
        "--gpus",
        "2",
        "--model",
        "cifar-resnet20",
        "-b",
        "8",
        "-n",
        "32",
        "-p",
        "fp32,fp16",
        "--lr",
        "0.05",
        "--modes",
        "eager",
        "--db",
        str(db),
        *FAST,
        check=True,
    )
    by = {r["precision"]: r for r in rows(db) if r["aggregate"] == 1}
    assert by["fp16"]["status"] == "unsupported" and "not a training precision" in by["fp16"]["error"]
    ok = by["fp32"]
    assert ok["status"] == "ok" and ok["workload"] == "train-ddp" and ok["world_size"] == 2
    assert ok["lr"] == 0.05 and ok["optimizer"] == "sgd"
