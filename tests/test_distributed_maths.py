"""Pure parts of the distributed package, with exact numbers (no processes)."""

import re

import pytest

from accelbench.core import parallel as maths
from accelbench.core import stage
from accelbench.core.errors import ConfigError
from accelbench.core.stage import Where, from_events
from accelbench.launchers.torchrun import results
from accelbench.launchers.torchrun.job import DistOptions
from accelbench.launchers.torchrun.launch import LaunchResult, failure, torchrun_argv
from accelbench.launchers.torchrun.ranks import SAFE_ENV, child_env, rank_info
from accelbench.scenarios.interconnect import parse_bytes, sizes_between
from accelbench.studies.concurrent import gpu_sets, job_work_s
from accelbench.telemetry.sources.topology import link_label


def test_speedup_and_scaling_efficiency_exact():
    s = maths.scaling(300.0, 4, 100.0)
    assert (s.speedup, s.scaling_efficiency) == (3.0, 0.75)
    s = maths.scaling(300.0, 4, 160.0, base_world_size=2)  # baseline on 2 GPUs
    assert (s.speedup, s.scaling_efficiency) == (1.875, 0.9375)
    # the hand-loop reference: 4,581 img/s on 1 GPU, 18,176 on 4
    ref = maths.scaling(18176.0, 4, 4581.0)
    assert ref.scaling_efficiency == 18176.0 / 4581.0 / 4
    with pytest.raises(ValueError):
        maths.scaling(0.0, 2, 1.0)


def _gen(tp, tok_s, tpot, **kw):
    row = {"workload": "generate", "model": "m", "precision": "bf16", "mode": "static-cache", "batch_size": 8}
    row["prompt_len"] = 128
    return {**row, "new_tokens": 64, "status": "ok", "decode_tokens_per_s": tok_s, "tpot_p50_ms": tpot, **kw} | (
        {"tp_degree": tp} if tp else {}
    )


def test_tp_efficiency_and_tpot_speedup_against_the_smallest_degree():
    """Decode tokens/s per GPU at TP n over the smallest degree's, TPOT p50 of the smallest over n's; exact numbers."""
    rows = [
        _gen(4, 1200.0, 5.0),  # 300/GPU, before its baseline in the list
        _gen(None, 400.0, 20.0),  # no tp_degree: one GPU
        _gen(2, 640.0, 12.5),  # 320/GPU
        _gen(2, 10.0, 1.0, status="oom"),  # does not count
        _gen(2, 640.0, None, prompt_len=256),  # its own group, one degree: no figure
        _gen(1, 400.0, 20.0, device_name="H200"),  # another device: another group, one degree
    ]
    got = maths.tp_scaling(rows)
    assert [g.tp_efficiency if g else None for g in got] == [0.75, 1.0, 0.8, None, None, None]
    assert [g.tpot_speedup if g else None for g in got] == [4.0, 1.0, 1.6, None, None, None]
    assert {g.base_tp_degree for g in got if g} == {1}
    two_four = maths.tp_scaling([_gen(4, 1200.0, None), _gen(2, 800.0, 8.0)])  # baseline TP 2; no TPOT at TP 4
    assert [(g.base_tp_degree, g.tp_efficiency, g.tpot_speedup) for g in two_four] == [(2, 0.75, None), (2, 1.0, 1.0)]
    assert maths.tp_scaling([]) == []


def test_bus_bandwidth_factors_are_nccl_tests_definitions():
    assert maths.bus_factor("all_reduce", 4) == 1.5  # 2(n-1)/n
    assert maths.bus_factor("all_gather", 4) == 0.75  # (n-1)/n
    assert maths.bus_factor("broadcast", 4) == 1.0
    assert maths.bus_factor("all_reduce", 1) == 0.0
    assert maths.bandwidths("all_reduce", 2**30, 0.5, 4) == (2.0 * 2**30, 3.0 * 2**30)
    assert maths.bandwidths("all_gather", 1000, 2.0, 2) == (500.0, 250.0)
    with pytest.raises(ValueError):
        maths.bus_factor("gossip", 2)


def test_window_straggler_comm_overlap():
    assert maths.common_window([10.0, 10.5], [12.0, 14.0]) == (10.0, 14.0, 4.0)
    assert maths.straggler([1.0, 2.0, 1.5]) == (1, 0.5)
    assert maths.comm_exposed_share(100.0, 75.0) == 0.25
    assert maths.overlap_fraction([(0.0, 10.0), (5.0, 15.0)]) == 5.0 / 15.0
    assert maths.overlap_fraction([(0.0, 1.0), (2.0, 3.0)]) == 0.0


def test_combined_telemetry_sums_energy_maxes_memory_means_the_rest():
    from accelbench.core.columns import combine

    recs = [
        {"energy_j": 10.0, "power_mean_w": 300.0, "device_mem_used_bytes": 5, "gpu_util_mean_pct": 90.0},
        {"energy_j": 12.0, "power_mean_w": 200.0, "device_mem_used_bytes": 7, "gpu_util_mean_pct": 80.0},
    ]
    assert combine(recs) == {
        "energy_j": 22.0,
        "power_mean_w": 500.0,
        "device_mem_used_bytes": 7,
        "gpu_util_mean_pct": 85.0,
    }


def _rank(rank, start, end, samples, host="h", **kw):
    return {
        "rank": rank,
        "host": host,
        "window_start_epoch_s": start,
        "window_end_epoch_s": end,
        "samples_timed": samples,
        "workload": "inference-dp",
        "model": "m",
        "batch_size": 32,
        **kw,
    }


def test_aggregate_row_uses_the_common_window_not_a_sum_of_rates():
    recs = [
        _rank(
            1,
            100.5,
            104.0,
            64,
            top1_correct=7,
            top5_correct=8,
            accuracy_samples=8,
            step_time_mean_ms=20.0,
            step_time_nosync_mean_ms=15.0,
            gpu_util_mean_pct=50.0,
        ),
        _rank(
            0,
            100.0,
            102.0,
            64,
            top1_correct=5,
            top5_correct=8,
            accuracy_samples=8,
            step_time_mean_ms=20.0,
            step_time_nosync_mean_ms=17.0,
            gpu_util_mean_pct=70.0,
        ),
    ]
    agg = results.aggregate(recs, barrier_window_s=4.2)
    assert agg["window_s"] == 4.0  # 104.0 - 100.0 (same host: the epoch clocks agree)
    assert agg["throughput_samples_per_s"] == 32.0  # 128 samples / 4 s; the per-rank rates would sum to 50.3
    assert agg["throughput_per_gpu_samples_per_s"] == 16.0
    assert (agg["straggler_rank"], agg["straggler_gap_share"]) == (1, (3.5 - 2.0) / 3.5)
    assert (agg["top1"], agg["top5"], agg["accuracy_samples"]) == (0.75, 1.0, 16)
    assert agg["comm_exposed_share"] == (20.0 - 16.0) / 20.0
    assert agg["gpu_util_mean_pct"] == 60.0
    assert agg["rank"] is None and agg["aggregate"] is True and agg["world_size"] == 2 and agg["model"] == "m"
    # on two hosts the clocks may disagree: rank 0's barrier-to-barrier window is used instead
    recs[0]["host"] = "other"
    assert results.aggregate(recs, barrier_window_s=4.2)["throughput_samples_per_s"] == 128 / 4.2


def test_with_scaling_against_baseline_row():
    agg = {"status": "ok", "throughput_samples_per_s": 36.0, "world_size": 4}
    out = results.with_scaling(agg, {"throughput_samples_per_s": 10.0, "world_size": 1, "case_id": 7})
    assert (out["speedup"], out["scaling_efficiency"], out["baseline_case_id"]) == (3.6, 0.9, 7)
    assert results.with_scaling(agg, None)["scaling_efficiency"] is None


def test_keys_and_error_row():
    assert results.aggregate_key("m|bs=4", 2) == "m|bs=4|gpus=2|all"
    assert results.rank_key("m|bs=4", 2, 1) == "m|bs=4|gpus=2|rank=1"
    from accelbench.core.spec import Case
    from accelbench.launchers.torchrun import Torchrun

    case = Case(scenario="train_step", model="m", batch_size=4, precision="fp32", mode="eager")
    assert Torchrun(DistOptions(gpus=4)).key(case) == "m|bs=4|fp32|eager|cl=auto|gpus=4|all"  # failure rows too


def test_rank_detection_from_torchrun_and_slurm_env():
    tr = rank_info({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "1"})
    assert (tr.rank, tr.world_size, tr.local_rank, tr.local_world_size, tr.node_rank, tr.launcher) == (
        3,
        8,
        1,
        2,
        1,
        "torchrun",
    )
    slurm = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "2"}
    assert rank_info(slurm) is None  # no MASTER_ADDR/PORT: cannot join a group
    s = rank_info({**slurm, "MASTER_ADDR": "n0", "MASTER_PORT": "29500"})
    assert (s.rank, s.world_size, s.local_rank, s.node_rank, s.launcher) == (5, 8, 1, 2, "slurm")
    assert rank_info({}) is None


def test_child_env_always_disables_nvls_and_drops_enclosing_ranks():
    env = child_env({"RANK": "0", "WORLD_SIZE": "2", "PATH": "/bin", "NCCL_NVLS_ENABLE": "1"}, visible_devices="2,3")
    assert {k: env[k] for k in SAFE_ENV} == SAFE_ENV
    assert "RANK" not in env and "WORLD_SIZE" not in env and env["PATH"] == "/bin"
    assert env["CUDA_VISIBLE_DEVICES"] == "2,3"


def test_torchrun_command_lines():
    single = torchrun_argv(DistOptions(gpus=4), "/j.json", python="py")
    assert single == [
        "py",
        "-m",
        "torch.distributed.run",
        "--nproc-per-node=4",
        "--standalone",
        "--max-restarts=0",
        "--log-dir=/torchelastic",
        "-m",
        "accelbench.launchers.torchrun.worker",
        "/j.json",
    ]
    multi = torchrun_argv(DistOptions(gpus=8, nnodes=2, node_rank=1, rdzv_endpoint="n0:29400"), "/j.json", python="py")
    assert "--nnodes=2" in multi and "--rdzv-endpoint=n0:29400" in multi and "--rdzv-backend=c10d" in multi
    assert "--standalone" not in multi
    with pytest.raises(ConfigError, match="rdzv_endpoint"):
        DistOptions(gpus=1, nnodes=2)
    with pytest.raises(ConfigError, match="gpus"):
        DistOptions(gpus=0)


def test_failure_reason_names_the_first_failing_rank():
    errs = [
        {"rank": 1, "error": "RuntimeError: boom", "oom": False, "t": 1.0},
        {"rank": 0, "error": "RuntimeError: Connection closed by peer", "oom": False, "t": 2.0},
    ]
    assert failure(LaunchResult(returncode=1, errors=errs)) == ("error", "rank 1 failed: RuntimeError: boom")
    oom = [{"rank": 2, "error": "OutOfMemoryError: CUDA out of memory", "oom": True, "t": 1.0}]
    assert failure(LaunchResult(returncode=1, errors=oom))[0] == "oom"
    status, why = failure(LaunchResult(returncode=-9, timed_out=True, current="m|bs=4", timeout_s=30.0))
    assert status == "error" and why.startswith("timeout: case 'm|bs=4' ran past 30 s")
    held = Where(case="m|bs=4", since=0.0, stage="warming up", stage_since=5.0)
    _, why = failure(LaunchResult(returncode=-9, timed_out=True, current="m|bs=4", timeout_s=30.0, where=held))
    assert why == "timeout: case 'm|bs=4' ran past 30 s, last in warming up; all ranks were stopped"


def test_a_start_up_stage_leaves_the_start_up_deadline_as_it_was():
    """The launcher's deadlines read the cases' events only: a stage noted in the start-up (the ceilings), older than
    ``timeout_s``, neither counts as a case past its deadline nor ends the ``startup_timeout_s`` counted from the
    launch."""
    import json
    import shutil
    import time
    from pathlib import Path

    from accelbench.launchers.torchrun.job import PROGRESS, Job, read_progress
    from accelbench.launchers.torchrun.launch import Torchrun

    opts = DistOptions(gpus=2, timeout_s=1.0, startup_timeout_s=60.0)
    run = Torchrun(Job(scenario="inference", spec={}, cases=[]), opts)
    try:
        stage_30_s_ago = {
            "event": "stage",
            "key": None,
            "t": time.time() - 30,
            "what": "measuring the device's ceilings",
        }
        (Path(run.workdir) / PROGRESS).write_text(json.dumps(stage_30_s_ago) + "\n")
        events = read_progress(run.workdir)
        run._t0 = time.monotonic()  # launched just now
        assert not run._deadline_passed(events)
        run._t0 = time.monotonic() - 61  # launched 61 s ago, no case started: past the start-up's deadline
        assert run._deadline_passed(events)
    finally:
        shutil.rmtree(run.workdir, ignore_errors=True)


def test_ranks_that_outlive_the_jobs_last_case_are_given_the_exit_grace_not_a_case_timeout():
    """Once every case of the job has its done event, only the ranks' exit is left: they are stopped
    ``EXIT_GRACE_S`` after the last case (every row is stored), not ``timeout_s`` after it, or ``timeout_s`` after it
    where that is shorter; a job with a case still to start keeps ``timeout_s``."""
    import json
    import shutil
    import time
    from pathlib import Path

    from accelbench.launchers.torchrun.job import PROGRESS, Job, read_progress
    from accelbench.launchers.torchrun.launch import EXIT_GRACE_S, Torchrun

    opts = DistOptions(gpus=2, timeout_s=10 * EXIT_GRACE_S)
    run = Torchrun(Job(scenario="inference", spec={}, cases=[{"key": "a"}, {"key": "b"}]), opts)

    def ended(*keys, ago_s):
        t = time.time() - ago_s
        lines = [json.dumps({"event": e, "key": k, "t": t}) for k in keys for e in ("start", "done")]
        (Path(run.workdir) / PROGRESS).write_text("\n".join(lines) + "\n")
        return read_progress(run.workdir)

    try:
        assert not run._deadline_passed(ended("a", "b", ago_s=EXIT_GRACE_S - 30))
        assert run._deadline_passed(ended("a", "b", ago_s=EXIT_GRACE_S + 30))
        assert not run._deadline_passed(ended("a", ago_s=EXIT_GRACE_S + 30))  # b has yet to start
    finally:
        shutil.rmtree(run.workdir, ignore_errors=True)
    run = Torchrun(Job(scenario="inference", spec={}, cases=[{"key": "a"}]), DistOptions(gpus=2, timeout_s=15.0))
    try:
        assert not run._deadline_passed(ended("a", ago_s=10))
        assert run._deadline_passed(ended("a", ago_s=20))
    finally:
        shutil.rmtree(run.workdir, ignore_errors=True)


def test_where_a_job_was_from_its_progress_events():
    """The launcher's reading of its ranks' events: the running case and its last stage, the start-up's stage
    before any case, nothing once every started case is done; and the line a stopped run prints."""
    ev = [
        {"event": "stage", "key": None, "t": 1.0, "what": "measuring the device's ceilings"},
        {"event": "start", "key": "a", "t": 10.0},
        {"event": "stage", "key": "a", "t": 11.0, "what": "loading the model"},
        {"event": "stage", "key": "a", "t": 40.0, "what": "the timed window"},
        {"event": "done", "key": "a", "t": 50.0},
        {"event": "start", "key": "b", "t": 51.0},
        {"event": "stage", "key": "b", "t": 52.0, "what": "loading the model"},
        {"event": "stage", "key": "b", "t": 70.0, "what": "the warm-up generation"},
    ]
    assert from_events(ev[:1]) == Where(case=None, since=1.0, stage="measuring the device's ceilings", stage_since=1.0)
    assert (
        from_events(ev[:1]).line(now=13.4)
        == "start-up, before any case; stage: measuring the device's ceilings, for 12 s"
    )
    assert from_events(ev[:5]) is None
    assert from_events(ev[:6]) == Where(case="b", since=51.0)
    assert from_events(ev[:6]).line(now=53.0) == "case b after 2 s"
    where = from_events(ev)
    assert where == Where(case="b", since=51.0, stage="the warm-up generation", stage_since=70.0)
    assert where.line(now=301.0) == "case b after 250 s; stage: the warm-up generation, for 231 s"
    assert from_events([]) is None


def test_a_process_stage_is_its_case_and_what_it_last_entered():
    """The one-process state the sweep loop and the steps set: a case's start clears the stage, :func:`enter`
    names it and tells the listeners, the case's end clears it."""
    heard = []
    stage.start_case("k")
    with stage.listening(heard.append):
        stage.enter("building the model")
    stage.enter("warming up")  # no listener any more
    where = stage.current()
    assert (where.case, where.stage) == ("k", "warming up")
    assert [(w.case, w.stage) for w in heard] == [("k", "building the model")]
    assert where.stage_since >= where.since
    stage.end_case()
    assert stage.current() is None


def test_a_launcher_follows_its_ranks_stages_and_tells_each_new_one_once():
    """:func:`stage.follow`, what the torchrun launcher calls on every poll: it takes the ranks' case and stage, and
    its listeners hear a stage once, however many polls read it; the progress bar shows the case's label and stage."""
    from accelbench.cli.outcome import stage_label

    heard = []
    compiling = Where(case="m|bs=4", since=10.0, stage="the warm-up generation", stage_since=12.0)
    with stage.listening(heard.append):
        stage.follow(Where(case="m|bs=4", since=10.0))  # started, no stage yet: nothing to tell
        stage.follow(compiling)
        stage.follow(compiling)  # the next poll, nothing new
        stage.follow(None)  # the case is done
        stage.follow(Where(case=None, since=1.0, stage="measuring the device's ceilings", stage_since=1.0))
    assert stage.current().stage == "measuring the device's ceilings"
    stage.adopt(None)
    assert [w.stage for w in heard] == ["the warm-up generation", "measuring the device's ceilings"]
    assert stage_label(compiling, {"m|bs=4": "m b4 fp32 eager"}) == "m b4 fp32 eager: the warm-up generation"
    assert stage_label(compiling, {}) == "m|bs=4: the warm-up generation"
    assert stage_label(heard[1], {}) == "start-up: measuring the device's ceilings"


def test_a_command_stopped_before_its_run_names_its_start_up_stage():
    """The line of Ctrl-C before a run exists: plain while no stage began, else where the start-up was."""
    from accelbench.cli.common import nothing_stored

    stage.adopt(None)
    assert nothing_stored() == "interrupted: nothing was stored"
    stage.enter("measuring the device's ceilings")
    try:
        assert re.fullmatch(
            r"interrupted: nothing was stored \(stopped in start-up, before any case; stage: measuring the device's "
            r"ceilings, for \d+ s\)",
            nothing_stored(),
        ), nothing_stored()
    finally:
        stage.adopt(None)


def test_sizes_gpu_sets_links_and_work():
    assert parse_bytes("1K") == 1024 and parse_bytes("256M") == 256 * 2**20 and parse_bytes("1G") == 2**30
    with pytest.raises(ConfigError):
        parse_bytes("lots")
    sizes = sizes_between(1024, 2**30)
    assert len(sizes) == 21 and sizes[0] == 1024 and sizes[-1] == 2**30
    assert gpu_sets([2, 2]) == ["0,1", "2,3"] and gpu_sets([1, 3]) == ["0", "1,2,3"]
    assert link_label(0, True, 18, 50) == "NV18"  # through NVSwitch: every active link reaches every peer
    assert link_label(4, True, 12, 50) == "NV4"  # direct links
    assert link_label(0, False, 0, 10) == "PIX" and link_label(0, False, 0, 50) == "SYS"
    assert link_label(0, False, 0, None) == "?"
    rows = [
        {"status": "ok", "images": 100, "throughput_samples_per_s": 50.0},
        {"status": "ok", "images": 30, "throughput_samples_per_s": 10.0},
    ]
    assert job_work_s(rows) == 5.0
    assert job_work_s(rows + [{"status": "error"}]) is None


def test_baseline_lookup_prefers_same_run_then_one_gpu(tmp_path):
    from accelbench.launchers.torchrun.results import find_baseline
    from accelbench.store import Store

    st = Store(tmp_path / "b.db")
    old = st.begin_run("scale", {}, "h", {})
    new = st.begin_run("scale", {}, "h", {})
    base = {"workload": "train-ddp", "status": "ok", "aggregate": True, "device_name": "H200"}
    st.add_case(old, {**base, "case_key": "m|bs=4|gpus=1|all", "world_size": 1, "throughput_samples_per_s": 10.0})
    assert find_baseline(st, new, "train-ddp", "m|bs=4", "H200")["throughput_samples_per_s"] == 10.0
    assert find_baseline(st, new, "train-ddp", "m|bs=4", "A100") is None  # other hardware is no baseline
    st.add_case(new, {**base, "case_key": "m|bs=4|gpus=2|all", "world_size": 2, "throughput_samples_per_s": 19.0})
    assert find_baseline(st, new, "train-ddp", "m|bs=4", "H200")["world_size"] == 2  # the study's smallest count
    assert find_baseline(st, new, "inference-dp", "m|bs=4", "H200") is None
