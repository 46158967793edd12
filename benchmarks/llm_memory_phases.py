"""Where a weight-only case's peak CUDA memory comes from: the allocator's live and peak bytes after each phase of
``accelbench.backends.generation.load_model`` (load, fuse, quantize) and after the first prefill and decode
steps, for one model and precision; then every live CUDA tensor over 64 MiB by dtype (what still holds memory).

Run: ``PYTHONPATH=src python3 benchmarks/llm_memory_phases.py --model hf:llama-3.1-8b --scheme int8 --out m.json``
"""

from __future__ import annotations

import argparse
import gc
import json

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="hf:llama-3.1-8b")
    ap.add_argument("--scheme", default="int8", choices=("int8", "fp8", "none"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from accelbench.backends.lm_fuse import fuse_projections
    from accelbench.models.lm_load import load_lm
    from accelbench.quant.weight_only import quantize_linears

    dev = torch.device("cuda")
    phases = []

    def mark(name):
        torch.cuda.synchronize()
        phases.append(
            {
                "phase": name,
                "allocated_bytes": torch.cuda.memory_allocated(dev),
                "peak_bytes": torch.cuda.max_memory_allocated(dev),
            }
        )
        print(phases[-1], flush=True)
        torch.cuda.reset_peak_memory_stats(dev)

    torch.cuda.reset_peak_memory_stats(dev)
    loaded = load_lm(args.model, dev, torch.bfloat16, 0)
    mark("load")
    fuse_projections(loaded.module)
    mark("fuse")
    if args.scheme != "none":
        quantize_linears(loaded.module, args.scheme)
        mark("quantize")
    gc.collect()
    mark("gc")
    with torch.no_grad():
        out = loaded.module(torch.randint(0, 1000, (1, 128), device=dev), use_cache=True)
        mark("prefill 128 eager")
        del out
        loaded.module(torch.randint(0, 1000, (1, 1), device=dev))
        mark("one token eager")
    live = {}
    for obj in gc.get_objects():
        try:
            if torch.is_tensor(obj) and obj.is_cuda and obj.numel() * obj.element_size() > 64 << 20:
                k = str(obj.dtype)
                live[k] = live.get(k, 0) + obj.numel() * obj.element_size()
        except Exception:  # noqa: BLE001 - objects gc hands back may not be inspectable
            continue
    print("live tensors over 64 MiB by dtype:", live, flush=True)
    with open(args.out, "w") as f:
        json.dump(
            {
                "device": torch.cuda.get_device_name(),
                "model": args.model,
                "scheme": args.scheme,
                "phases": phases,
                "live_over_64mib_bytes": live,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
