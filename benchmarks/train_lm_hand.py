"""A language model's training step by hand, in plain PyTorch, to check ``accelbench train -m hf:...``'s row.

The same step as accelbench's (:mod:`accelbench.training.lm_step`), written out: the model built from the same
``transformers`` config with random weights (``hf:<architecture>``) or loaded from a folder, each decoder layer
compiled with ``--compile`` (``nn.Module.compile``, as torchtitan compiles blocks), random token ids (windows of
``seq_len + 1``: inputs the first ``seq_len``, labels the last), forward under bf16 autocast, cross-entropy of the
float32 logits, backward, AdamW (fused on CUDA; lr 3e-4, weight decay 0.1). After ``--warmup`` steps, ``--steps``
steps are timed between two device synchronisations; tokens/s = batch x seq_len x steps / that wall time.

MFU uses the count written out here, independently of accelbench's (torchtitan's ``6 N + 12 L H Q T`` FLOPs a token,
``N`` the parameters without the input embedding, a tied LM head counted), against the bf16 dense-matmul throughput
measured here with accelbench's ceiling measurement (``accelbench.ceilings.measure.measure_matmul``) and against the
datasheet's peak. Prints one JSON line.

Run: ``PYTHONPATH=src python3 benchmarks/train_lm_hand.py --model hf:llama-3.2-1b --batch 4 --seq-len 2048 --steps 20
--compile`` and compare with ``accelbench train -m hf:llama-3.2-1b -b 4 --seq-len 2048 -p amp-bf16 --modes compile``.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F


def build(name: str, device):
    from accelbench.models.lm_load import load_lm

    lm = load_lm(name, device, torch.float32, seed=0).module.train()
    lm.config.use_cache = False
    return lm


def flops_per_token(lm, seq_len: int) -> int:
    cfg = lm.config
    embed = lm.get_input_embeddings().weight
    n = sum(p.numel() for p in lm.parameters()) - embed.numel()
    if lm.get_output_embeddings().weight is embed:
        n += embed.numel()  # the tied head is the output projection's matmul
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    return 6 * n + 12 * cfg.num_hidden_layers * heads * head_dim * seq_len


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:llama-3.2-1b")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    lm = build(args.model, device)
    fpt = flops_per_token(lm, args.seq_len)
    layers = next(m for m in lm.modules() if isinstance(m, torch.nn.ModuleList))
    if args.compile:
        for layer in layers:
            layer.compile(dynamic=False)
    opt = torch.optim.AdamW(lm.parameters(), lr=3e-4, weight_decay=0.1, fused=device.type == "cuda")
    gen = torch.Generator().manual_seed(0)
    windows = torch.randint(0, lm.config.vocab_size, (2, args.batch, args.seq_len + 1), generator=gen).to(device)
    batches = [(w[:, :-1].contiguous(), w[:, 1:].reshape(-1).contiguous()) for w in windows]

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = lm(input_ids=x, use_cache=False).logits.flatten(0, 1)
            loss = F.cross_entropy(logits.float(), y)
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    step(*batches[0])
    if device.type == "cuda":
        torch.cuda.synchronize()
    first_s = time.perf_counter() - t0
    for i in range(args.warmup):
        step(*batches[i % 2])
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for i in range(args.steps):
        loss = step(*batches[i % 2])
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    tokens_per_s = args.batch * args.seq_len * args.steps / wall
    print(
        json.dumps(
            {
                **vars(args),
                "device": str(device),
                "first_step_s": first_s,
                "loss": loss.item(),
                "flops_per_token": fpt,
                "tokens_per_s": tokens_per_s,
                "model_flops_per_s": tokens_per_s * fpt,
                **_mfu(tokens_per_s * fpt, device),
                "peak_mem_bytes": torch.cuda.max_memory_allocated() if device.type == "cuda" else None,
            }
        )
    )


def _mfu(achieved: float, device) -> dict:
    from accelbench.ceilings.measure import datasheet, measure_matmul

    if device.type != "cuda":
        return {"mfu": None, "mfu_datasheet": None}
    measured, _ = measure_matmul("bf16", 8192, device)
    peak = (datasheet(torch.cuda.get_device_name(device)) or {}).get("flops_per_s", {}).get("bf16")
    return {
        "bf16_matmul_flops_per_s": measured,
        "mfu": achieved / measured if measured else None,
        "mfu_datasheet": achieved / peak if peak else None,
    }


if __name__ == "__main__":
    main()
