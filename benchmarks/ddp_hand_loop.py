"""A hand-written DDP training loop: the yardstick for accelbench's own DDP path.

ResNet-50, bf16 autocast, channels-last, SGD with momentum, random inputs resident on the GPU, per-GPU
batch fixed. Run under torchrun, one process per GPU:

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
        python -m torch.distributed.run --standalone --nproc-per-node 4 benchmarks/ddp_hand_loop.py --batch 256

Prints one JSON line (rank 0): world size, img/s over the timed window (all GPUs), per GPU.
"""

import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    args = ap.parse_args()
    local = int(os.environ["LOCAL_RANK"])
    cuda = torch.cuda.is_available()  # CPU + gloo only to dry-run this script without GPUs
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(local)
    dist.init_process_group("nccl" if cuda else "gloo")
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.get_model(args.model).to(dev).to(memory_format=torch.channels_last)
    model = DDP(model, device_ids=[local] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    s = args.image_size
    x = torch.randn(args.batch, 3, s, s, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (args.batch,), device=dev)

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step():
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(args.warmup):
        step()
    sync()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    dist.barrier()
    dt = time.perf_counter() - t0
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        ips = world * args.batch * args.steps / dt
        print(
            json.dumps(
                {
                    "bench": "ddp_hand_loop",
                    "model": args.model,
                    "world_size": world,
                    "batch_per_gpu": args.batch,
                    "steps": args.steps,
                    "throughput_samples_per_s": ips,
                    "per_gpu": ips / world,
                    "image_size": s,
                    "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                    "torch": torch.__version__,
                }
            ),
            flush=True,
        )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
