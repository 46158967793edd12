"""A rank leaving its process group (:meth:`accelbench.launchers.torchrun.context.RankContext.leave`): on a real gloo
group of one process, the group is gone after it; and where the destroy does not return (NCCL's, while a CUDA graph
still holds its communicator, pytorch/pytorch#115388: a GPU-only state, stood in for here by a destroy that waits on an
event), the rank still leaves within its bounded wait and says why."""

import threading

import pytest
import torch.distributed as dist

from accelbench.launchers.server import free_port
from accelbench.launchers.torchrun.context import init
from accelbench.launchers.torchrun.job import DistOptions
from accelbench.launchers.torchrun.ranks import RankInfo

ONE = RankInfo(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, launcher="torchrun")


@pytest.fixture
def ctx(monkeypatch):
    for key, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "RANK": "0",
        "WORLD_SIZE": "1",
    }.items():
        monkeypatch.setenv(key, value)
    ctx = init(ONE, DistOptions(device="cpu"))
    yield ctx
    if dist.is_initialized():
        dist.destroy_process_group()


def test_a_rank_leaves_its_group(ctx, capsys):
    assert dist.is_initialized()
    assert ctx.leave() is True
    assert not dist.is_initialized()
    assert "still closing" not in capsys.readouterr().err


def test_a_destroy_that_never_returns_keeps_no_rank_past_its_wait(ctx, monkeypatch, capsys):
    gone = threading.Event()
    real = dist.destroy_process_group
    monkeypatch.setattr(dist, "destroy_process_group", lambda: gone.wait())
    assert ctx.leave(timeout_s=0.2) is False
    assert capsys.readouterr().err.strip() == (
        "note: rank 0: the process group was still closing after 0.2 s (a CUDA graph still holds a communicator); "
        "the rank ends without it"
    )
    gone.set()
    real()
