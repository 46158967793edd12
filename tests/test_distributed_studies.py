"""Real multi-process studies on the CPU (torchrun + gloo, no mocks): a scaling study over 1 and 2 processes,
concurrent jobs against the same jobs one after another, and two torchrun agents forming one job over loopback.

Split from ``test_distributed.py`` (its helpers are shared) so that the two files, each run whole by one pytest-xdist
worker (``--dist loadfile``), take about as long as each other.
"""

import math
import subprocess
import sys

import pytest
from conftest import run_cli, run_cli_process
from test_distributed import CRASH, FAST, TINY_MODEL, check_aggregate, env, left_behind, rows

from accelbench.launchers.server import free_port
from accelbench.store import Store


def test_scale_train_ddp_1_and_2_processes_with_a_crashed_rank(tmp_path):
    """One scaling study: DDP on 1 and 2 gloo processes; the second model raises on rank 1 (only exists at 2)."""
    db, png = tmp_path / "s.db", tmp_path / "s.png"
    args = ["scale", "--gpus", "1,2", "--workload", "train", "--model", f"{TINY_MODEL},{CRASH}", "-b", "2", "-n", "8"]
    p = run_cli(*args, "--db", str(db), "--plot", str(png), *FAST, "--idle-s", "0")
    assert p.returncode == 1, p.stdout + p.stderr  # the crashed case is an error row: exit 1 (errors.py)
    assert "1 of 4 cases ended in error" in p.stderr and "Traceback" not in p.stdout + p.stderr
    assert "Efficiency" in p.stdout and png.stat().st_size > 0
    run = Store(db).run()
    assert run["kind"] == "scale" and run["spec"]["gpus"] == [1, 2] and run["spec"]["workload"] == "train"
    assert run["status"] == "complete"
    all_rows = rows(db, run["run_id"])
    aggs = {(r["model"], r["world_size"]): r for r in all_rows if r["aggregate"] == 1}
    one, two = aggs[(TINY_MODEL, 1)], aggs[(TINY_MODEL, 2)]
    assert one["speedup"] == 1.0 and one["scaling_efficiency"] == 1.0
    assert two["speedup"] == two["throughput_samples_per_s"] / one["throughput_samples_per_s"]
    assert two["scaling_efficiency"] == two["speedup"] / 2
    assert two["baseline_case_id"] == one["case_id"] and two["global_batch_size"] == 4  # weak scaling
    ranks = sorted(
        (r for r in all_rows if r["aggregate"] == 0 and r["world_size"] == 2 and r["model"] == TINY_MODEL),
        key=lambda r: r["rank"],
    )
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["backend"] == "gloo" for r in ranks)
    check_aggregate(two, ranks)
    for r in ranks:
        assert r["workload"] == "train-ddp" and r["steps_timed"] >= 3 and math.isfinite(r["loss_last"])
        assert r["step_time_p50_ms"] > 0 and r["step_time_nosync_mean_ms"] > 0 and r["rank_images"] == 4
    assert len(Store(db).series(int(ranks[1]["case_id"]), "step_time_ms")) == ranks[1]["steps_timed"]
    sync = sum(r["step_time_mean_ms"] for r in ranks) / 2
    nosync = sum(r["step_time_nosync_mean_ms"] for r in ranks) / 2
    assert two["comm_exposed_share"] == pytest.approx((sync - nosync) / sync, rel=1e-12)
    # the failing model: fine on 1 process, one error row naming rank 1 on 2; finished rows are kept
    assert aggs[(CRASH, 1)]["status"] == "ok"
    bad = aggs[(CRASH, 2)]
    assert bad["status"] == "error" and bad["error"] == "rank 1 failed: RuntimeError: injected failure on this rank"
    assert not [r for r in all_rows if r["model"] == CRASH and r["world_size"] == 2 and r["aggregate"] == 0]


def test_two_node_rendezvous_on_loopback(tmp_path):
    """Two torchrun agents (--nnodes 2, c10d on 127.0.0.1) form one job of 2 ranks."""
    port = free_port()
    node = ["--gpus", "1", "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{port}", "--idle-s", "0"]
    # bundled weights on real labelled images: the job's accuracy is a fact to check, not noise
    case = ["--model", "cifar-resnet20", "-b", "4", "-n", "16", *FAST, "--data", "cifar10-test"]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "accelbench",
                "run",
                *node,
                "--node-rank",
                str(k),
                "--db",
                str(tmp_path / f"n{k}.db"),
                *case,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env(),
        )
        for k in (0, 1)
    ]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    # each node's last lines: pytest shortens a long message in its middle, where the first node's end would be
    said = "\n".join(f"--- node {k}, exit {p.returncode}:\n{o[-2500:]}" for k, (p, o) in enumerate(zip(procs, outs)))
    assert [p.returncode for p in procs] == [0, 0], said
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


@pytest.mark.slow
def test_concurrent_jobs_vs_sequential(tmp_path):
    db, scratch = tmp_path / "c.db", tmp_path / "scratch"
    scratch.mkdir()
    args = ["concurrent", "--models", f"multi_helpers:tiny,{TINY_MODEL}", "-b", "2", "-n", "4", "--min-time-s", "0.3"]
    # a real process: the test reads its TMPDIR (in-process, that is the test's)
    p = run_cli_process(*args, "--db", str(db), *FAST, "--idle-s", "0", env={"TMPDIR": str(scratch)})
    assert p.returncode == 0, p.stdout + p.stderr
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
