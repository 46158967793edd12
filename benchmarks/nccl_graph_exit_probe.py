"""How long a rank takes to leave its NCCL process group after CUDA graphs captured its collectives.

NCCL's communicator destroy waits until every CUDA graph that captured one of its collectives is gone
(pytorch/pytorch#115388); a compiled tensor-parallel decode step has its all-reduces in CUDA graphs, so a rank
that destroys its group with them alive can hang after its last case. :meth:`RankContext.leave` hands the graphs
back first (garbage collection, Dynamo's reset) and bounds the destroy. This probe times the leave on one GPU, in a
process group of one rank (one process a case, each on its own port):

    python benchmarks/nccl_graph_exit_probe.py graph-alive     # a torch.cuda.CUDAGraph of an all-reduce, alive
    python benchmarks/nccl_graph_exit_probe.py graph-freed     # the same graph dropped before the destroy
    python benchmarks/nccl_graph_exit_probe.py compiled-raw    # torch.compile(mode="reduce-overhead") of an all-reduce
                                                               #   (Inductor's CUDA graph trees), destroyed as is
    python benchmarks/nccl_graph_exit_probe.py compiled-leave  # the same, through RankContext.leave

Each prints one line: ``<case>: the destroy returned after S s`` or ``<case>: still closing after S s``, and
exits without waiting for a destroy still running. Run from the repository root with ``PYTHONPATH=src``.
"""

from __future__ import annotations

import os
import sys
import threading
import time

WAIT_S = 60.0


def _destroy_within(wait_s: float) -> float | None:
    """Seconds the destroy took, or None when it was still running after ``wait_s``."""
    import torch.distributed as dist

    t0 = time.perf_counter()
    closing = threading.Thread(target=dist.destroy_process_group, daemon=True)
    closing.start()
    closing.join(wait_s)
    return None if closing.is_alive() else time.perf_counter() - t0


def main(case: str) -> None:
    from accelbench.launchers.server import free_port

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1")
    import torch
    import torch.distributed as dist

    from accelbench.launchers.torchrun.context import init
    from accelbench.launchers.torchrun.job import DistOptions
    from accelbench.launchers.torchrun.ranks import RankInfo

    one = RankInfo(rank=0, world_size=1, local_rank=0, local_world_size=1, node_rank=0, launcher="torchrun")
    ctx = init(one, DistOptions(device="cuda"))
    x = torch.ones(1 << 20, device=ctx.device)
    keep = []  # what the case holds until the destroy (the worst case: the caller still refers to it)
    if case.startswith("graph"):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            dist.all_reduce(x)
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        if case == "graph-alive":
            keep.append(graph)
        del graph
    elif case.startswith("compiled"):
        import torch.distributed._functional_collectives as funcol

        def step(t):
            return funcol.all_reduce(t * 2, "sum", dist.group.WORLD) + 1

        compiled = torch.compile(step, mode="reduce-overhead")
        for _ in range(5):
            out = compiled(x)
        torch.cuda.synchronize()
        assert torch.equal(out, x * 2 + 1), "the compiled all-reduce gave a wrong sum"
        keep.append(compiled)
        del out
    else:
        raise SystemExit(f"unknown case {case!r}: graph-alive, graph-freed, compiled-raw or compiled-leave")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if case == "compiled-leave":
        left = ctx.leave(timeout_s=WAIT_S)
        took = time.perf_counter() - t0 if left else None
    else:
        took = _destroy_within(WAIT_S)
    torch_v = torch.__version__
    nccl_v = ".".join(map(str, torch.cuda.nccl.version()))
    if took is None:
        print(f"{case}: still closing after {WAIT_S:g} s (torch {torch_v}, NCCL {nccl_v})", flush=True)
        os._exit(0)
    print(f"{case}: the destroy returned after {took:.2f} s (torch {torch_v}, NCCL {nccl_v})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
