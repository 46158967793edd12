"""A plain torch.distributed all-reduce loop: the yardstick for ``accelbench interconnect``.

Same definitions as nccl-tests (doc/PERFORMANCE.md): t = mean time of one all-reduce over ``--iters``
back-to-back calls after ``--warmup``; algbw = S / t; busbw = algbw * 2(n-1)/n. Run under torchrun:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python -m torch.distributed.run --standalone --nproc-per-node 4 benchmarks/allreduce_plain.py

Prints one JSON line per size (rank 0).
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default=str(2**28) + "," + str(2**30), help="bytes, comma-separated")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    cuda = torch.cuda.is_available()  # CPU + gloo only to dry-run this script without GPUs
    dev = torch.device("cuda", int(os.environ["LOCAL_RANK"])) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(dev)
    dist.init_process_group("nccl" if cuda else "gloo")
    n = dist.get_world_size()

    def sync():
        if cuda:
            torch.cuda.synchronize()

    for size in (int(s) for s in args.sizes.split(",")):
        t = torch.rand(size // 4, device=dev)
        for _ in range(args.warmup):
            dist.all_reduce(t)
        sync()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(t)
        sync()
        dt = (time.perf_counter() - t0) / args.iters
        worst = torch.tensor([dt], device=dev)
        dist.all_reduce(worst, op=dist.ReduceOp.MAX)
        dt = worst.item()
        if dist.get_rank() == 0:
            algbw = size / dt
            print(
                json.dumps(
                    {
                        "bench": "allreduce_plain",
                        "world_size": n,
                        "size_bytes": size,
                        "time_s": dt,
                        "algbw_bytes_per_s": algbw,
                        "busbw_bytes_per_s": algbw * 2 * (n - 1) / n,
                    }
                ),
                flush=True,
            )
        del t
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
