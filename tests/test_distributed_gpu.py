"""Multi-GPU tests (NCCL): run on a machine with 2 or more GPUs with ``python -m pytest -m multigpu``."""

import pytest
from conftest import cli_env as env
from conftest import run_cli
from test_distributed import check_aggregate, rows  # noqa: F401  (same helpers as the CPU tests)

from accelbench.store import Store

pytestmark = pytest.mark.multigpu


def test_nccl_ddp_on_2_gpus_with_per_rank_telemetry(tmp_path):
    db = tmp_path / "g.db"
    run_cli(
        "scale",
        "--gpus",
        "2",
        "--workload",
        "train",
        "--model",
        "cifar-resnet20",
        "-b",
        "128",
        "-n",
        "1024",
        "-p",
        "amp-bf16",
        "--modes",
        "eager",
        "--min-time-s",
        "0.5",
        "--db",
        str(db),
        check=True,
    )
    got = rows(db)
    aggs = {r["world_size"]: r for r in got if r["aggregate"] == 1}
    assert aggs[2]["status"] == "ok" and aggs[2]["comm_exposed_share"] is not None
    ranks = sorted((r for r in got if r["aggregate"] == 0 and r["world_size"] == 2), key=lambda r: r["rank"])
    assert [r["device"] for r in ranks] == ["cuda:0", "cuda:1"] and {r["backend"] for r in ranks} == {"nccl"}
    assert len({r["gpu_uuid"] for r in ranks}) == 2  # two physical GPUs
    for r in ranks:  # telemetry of every rank's own GPU
        assert r["device_mem_used_bytes"] > 0 and r["peak_mem_bytes"] > 0 and r["gpu_util_mean_pct"] >= 0
        # only the rank itself on its GPU: the launcher's parent (idle power, cleanup) holds no CUDA context
        assert r["gpu_processes"] == 1 and r["other_gpu_processes"] == 0
    check_aggregate(aggs[2], ranks)
    assert aggs[2]["device_mem_used_bytes"] == max(r["device_mem_used_bytes"] for r in ranks)


def test_nccl_interconnect_and_gpu_pair_copies(tmp_path):
    import os

    from accelbench import api
    from accelbench.launchers.torchrun.job import DistOptions

    os.environ["PYTHONPATH"] = env()["PYTHONPATH"]
    spec = api.spec(
        "interconnect",
        {"sizes": (2**20, 2**26), "warmup": 2, "iters": 5, "p2p_bytes": 2**26, "p2p_iters": 3, "idle_s": 0},
        cuda=True,
    )
    run_id = api.interconnect(spec, Store(tmp_path / "i.db"), DistOptions(gpus=2)).run_id
    got = Store(tmp_path / "i.db").cases(run_id).to_dict("records")
    coll = [r for r in got if r["workload"] == "collective"]
    assert len(coll) == 6 and all(r["backend"] == "nccl" and r["status"] == "ok" for r in coll)
    for r in coll:
        assert r["busbw_bytes_per_s"] == r["algbw_bytes_per_s"] * (0.5 if r["op"] == "all_gather" else 1.0)
    p2p = {(r["src_device"], r["dst_device"]): r for r in got if r["workload"] == "p2p"}
    assert set(p2p) == {(0, 1), (1, 0)}
    for r in p2p.values():
        assert r["bandwidth_bytes_per_s"] > 1e9 and r["link"] != "?"
