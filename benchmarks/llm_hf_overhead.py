"""Why does accelbench's ``hf-generate`` TPOT differ from a hand ``model.generate`` loop? (the +-2 % agreement check)

Hugging Face ``generate`` at batch 1 is bound by the host (its Python work per token exceeds the GPU's), so anything
that takes the host's time or the GIL changes it. Interleaved over ``--reps`` rounds, on one model, the TPOT of:

- ``hand``: wall time of an N-token call minus a 1-token call, over N - 1 (benchmarks/llm_handloop.py's method);
- ``hand+processor``: the same calls with accelbench's per-token logits processor (a CUDA event a token);
- ``accelbench``: accelbench's ``hf-generate`` engine timed by its loop (the events' mean inter-token latency);
- ``accelbench+monitor``: the same inside accelbench's telemetry monitor (NVML sampler and energy-counter thread),
  as ``accelbench generate --telemetry-isolation thread`` times it;
- ``accelbench+monitor(process)``: the same monitor with its sources read in the sampler process
  (``--telemetry-isolation process``, what ``auto`` picks for ``hf-generate``): it should agree with
  ``accelbench`` (and ``hand``) within +-2 %.

Run: ``PYTHONPATH=src python3 benchmarks/llm_hf_overhead.py --arch llama-3.1-8b --out hf-overhead.json``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="llama-3.1-8b")
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    from transformers import LogitsProcessorList

    from accelbench.backends.lm_loop import hf_generate
    from accelbench.models.lm_load import load_lm
    from accelbench.scenarios.generate.decode import time_generation
    from accelbench.telemetry import monitor

    dev = torch.device("cuda")
    model = load_lm(f"hf:{args.arch}", dev, torch.bfloat16).module
    prompts = torch.randint(0, 1000, (1, args.prompt), device=dev, generator=torch.Generator(dev).manual_seed(0))
    kw = dict(
        attention_mask=torch.ones_like(prompts),
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=0,
    )
    events: list = []

    def processor(input_ids, scores):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        events.append(e)
        return scores

    def wall(n: int, lp) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.inference_mode():
            model.generate(
                prompts, max_new_tokens=n, min_new_tokens=n, **kw, **({"logits_processor": lp} if lp else {})
            )
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def hand(lp) -> float:
        return (wall(args.new, lp) - wall(1, lp)) / (args.new - 1) * 1e3

    def ours() -> float:
        g = time_generation(lambda p, on_token: hf_generate(model, p, args.new, on_token), prompts, dev)
        return statistics.mean(g.itl_s) * 1e3

    def ours_monitored(isolation: str) -> float:
        with monitor(dev, 0.1, [os.getpid()], isolation):
            return ours()

    variants = {
        "hand": lambda: hand(None),
        "hand+processor": lambda: hand(LogitsProcessorList([processor])),
        "accelbench": ours,
        "accelbench+monitor": lambda: ours_monitored("thread"),
        "accelbench+monitor(process)": lambda: ours_monitored("process"),
    }
    for fn in variants.values():
        fn()  # warm-up
    got = {k: [] for k in variants}
    for _ in range(args.reps):
        for k, fn in variants.items():
            got[k].append(fn())
    out = {
        "arch": args.arch,
        "prompt": args.prompt,
        "new": args.new,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "tpot_ms": {k: statistics.median(v) for k, v in got.items()},
        "samples": got,
    }
    print(json.dumps(out["tpot_ms"]))
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
