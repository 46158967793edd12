"""Hand loops that `accelbench generate`'s rows must agree with (within +-2 %), timed another way.

- ``generate``: Hugging Face ``model.generate`` called as a user would, timed by the host clock around whole calls
  after a synchronisation: TTFT = the median wall time of a 1-token call, TPOT = (median wall time of an N-token
  call - that) / (N - 1). accelbench times the same calls per token with CUDA events.
- ``gptfast``: the gpt-fast recipe written out by hand: a StaticCache, the prefill in one forward pass, the decode
  step ``torch.compile(mode="reduce-overhead", fullgraph=True)`` (``cudagraph_mark_step_begin`` before each call,
  the output cloned), timed by the host clock around all N - 1 decode steps after a synchronisation: TPOT = wall /
  (N - 1). accelbench's ``static-compile`` backend runs the same recipe through its own loop and per-token events.

The model is built as accelbench builds ``hf:<arch>`` (the same config values, random weights under the same seed).
Run: ``PYTHONPATH=src python3 benchmarks/llm_handloop.py --arch llama-3.1-8b --out hand.json``
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def build(arch: str, dtype, seed: int):
    from transformers import AutoModelForCausalLM

    from accelbench.models.hf import architecture_config

    torch.manual_seed(seed)
    with torch.device("cuda"):
        return AutoModelForCausalLM.from_config(architecture_config(arch), dtype=dtype).eval()


def wall(fn) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def generate_loop(model, prompts, new: int, reps: int) -> dict:
    kw = dict(
        attention_mask=torch.ones_like(prompts),
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        pad_token_id=0,
    )
    one = lambda: model.generate(prompts, max_new_tokens=1, min_new_tokens=1, **kw)  # noqa: E731
    full = lambda: model.generate(prompts, max_new_tokens=new, min_new_tokens=new, **kw)  # noqa: E731
    with torch.inference_mode():
        one(), full()  # warm-up
        t1, tn = [], []
        for _ in range(reps):  # interleaved: drift hits both alike
            t1.append(wall(one))
            tn.append(wall(full))
    m1, mn = statistics.median(t1), statistics.median(tn)
    return {"ttft_ms": m1 * 1e3, "tpot_ms": (mn - m1) / (new - 1) * 1e3, "one_token_s": t1, "full_s": tn}


def gptfast_loop(model, prompts, new: int, reps: int) -> dict:
    from transformers import StaticCache

    b, p = prompts.shape
    cache = StaticCache(config=model.config, max_cache_len=p + new)
    pos = torch.arange(p + new, device="cuda")

    def decode(tok, cp):
        return (
            model(tok, cache_position=cp, position_ids=cp[None], past_key_values=cache, use_cache=True)
            .logits[:, -1]
            .argmax(-1, keepdim=True)
        )

    step = torch.compile(decode, mode="reduce-overhead", fullgraph=True)
    prefill_s, decode_s = [], []

    def once():
        cache.reset()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        tok = (
            model(
                prompts,
                cache_position=pos[:p],
                position_ids=pos[None, :p],
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            .logits[:, -1]
            .argmax(-1, keepdim=True)
        )
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        for i in range(new - 1):
            torch.compiler.cudagraph_mark_step_begin()
            tok = step(tok, pos[p + i : p + i + 1]).clone()
        torch.cuda.synchronize()
        return t1 - t0, time.perf_counter() - t1

    with torch.no_grad():
        t = time.perf_counter()
        once()
        first_s = time.perf_counter() - t
        once()
        for _ in range(reps):
            a, d = once()
            prefill_s.append(a)
            decode_s.append(d)
    return {
        "ttft_ms": statistics.median(prefill_s) * 1e3,
        "tpot_ms": statistics.median(decode_s) / (new - 1) * 1e3,
        "first_call_s": first_s,
        "prefill_s": prefill_s,
        "decode_s": decode_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="llama-3.1-8b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--loops", default="generate,gptfast")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    model = build(args.arch, torch.bfloat16, args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt), generator=gen).cuda()
    out = {"args": vars(args), "device": torch.cuda.get_device_name(), "torch": torch.__version__}
    for loop in args.loops.split(","):
        out[loop] = (generate_loop if loop == "generate" else gptfast_loop)(model, prompts, args.new, args.reps)
        torch._dynamo.reset()
        print(loop, {k: v for k, v in out[loop].items() if k.endswith("_ms")}, flush=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
