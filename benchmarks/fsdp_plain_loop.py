"""A plain FSDP2 training loop, to check ``accelbench train --gpus N --parallel fsdp -m hf:...``'s row against.

Run under torchrun, one process a GPU: ``torchrun --nproc-per-node 2 benchmarks/fsdp_plain_loop.py --model
hf:llama-3.2-1b --batch 4 --seq-len 2048``. The loop is the one a user writes from PyTorch's FSDP2 tutorial and
torchtitan's ``parallelize_llama``: the model built from the same ``transformers`` config with random weights in
float32 (:func:`accelbench.models.lm_load.load_lm`), ``fully_shard`` on each decoder layer then on the model with
``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)``, fused AdamW (lr 3e-4, weight decay 0.1, as
accelbench's), random token ids (``batch`` sequences of ``seq_len`` a rank, seeded per rank). The switches add what
accelbench's step does on top, one at a time:

- ``--autocast``: forward and loss under ``torch.autocast(bfloat16)`` as well (accelbench's ``amp-bf16`` step with
  ``--fsdp-autocast``);
- ``--loss ce``: ``cross_entropy(logits.float(), labels)`` of the flattened logits, accelbench's loss; ``own`` (the
  default): the model's own ``labels=`` loss (``transformers``' ``ForCausalLMLoss``, which also upcasts the logits).

After ``--warmup`` steps, ``--steps`` steps are timed between two device synchronisations (every rank's); tokens/s a
GPU = batch x seq_len x steps / that wall time. Rank 0 prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=4, help="sequences a rank")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--autocast", action="store_true")
    ap.add_argument("--loss", choices=("own", "ce"), default="own")
    ap.add_argument("--out", default=None, help="a file rank 0 appends its JSON line to")
    args = ap.parse_args()

    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from accelbench.models.lm_load import load_lm

    local = int(os.environ.get("LOCAL_RANK", 0))
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    lm = load_lm(args.model, device, torch.float32, seed=0).module.train()
    lm.config.use_cache = False
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    layers = next(m for m in lm.modules() if isinstance(m, torch.nn.ModuleList))
    for layer in layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(lm, mp_policy=policy)
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-4, weight_decay=0.1, fused=cuda)
    gen = torch.Generator().manual_seed(rank)
    windows = torch.randint(0, lm.config.vocab_size, (2, args.batch, args.seq_len + 1), generator=gen).to(device)
    batches = [(w[:, :-1].contiguous(), w[:, 1:].contiguous()) for w in windows]

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        amp = torch.autocast(device.type, dtype=torch.bfloat16) if args.autocast else contextlib.nullcontext()
        with amp:
            if args.loss == "own":
                # the model shifts its labels itself: give it the window's first seq_len tokens as both
                loss = lm(input_ids=x, labels=x, use_cache=False).loss
            else:
                logits = lm(input_ids=x, use_cache=False).logits.flatten(0, 1)
                loss = F.cross_entropy(logits.float(), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    def synced():
        if cuda:
            torch.cuda.synchronize(device)
        dist.barrier()

    for i in range(1 + args.warmup):
        step(*batches[i % 2])
    synced()
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(*batches[i % 2])
    synced()
    wall = time.perf_counter() - t0
    tokens_per_s = args.batch * args.seq_len * args.steps / wall
    if rank == 0:
        line = json.dumps(
            {
                **vars(args),
                "world": world,
                "device": torch.cuda.get_device_name(device) if cuda else "cpu",
                "torch": torch.__version__,
                "loss_last": loss.item(),
                "step_ms": wall / args.steps * 1e3,
                "tokens_per_s_per_gpu": tokens_per_s,
                "peak_mem_bytes": torch.cuda.max_memory_allocated(device) if cuda else None,
            }
        )
        print(line, flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(line + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
