"""A from-scratch gpt-fast decoder, the reference accelbench's compiled generation engines are held to.

The decoder is written out here in about 150 lines, as gpt-fast writes it (pytorch-labs/gpt-fast ``model.py``): one
fused ``wqkv`` matmul, separate ``w1``/``w3``/``w2``, RMSNorm in float32, rotary from a table precomputed for every
position, a static KV cache written with ``index_copy_``, SDPA over the whole cache with a boolean causal mask row,
and the decode step ``torch.compile(mode="reduce-overhead", fullgraph=True)``. Its weights are the Hugging Face
model's (the same random ``hf:<arch>`` weights accelbench builds, the same seed), so its outputs are checked against
the plain model: the logits of the prefill and of every decode step of a generation, and the greedy tokens.

Two ways of attending over grouped KV heads (Llama-3's 8 KV heads for 32 query heads) are timed:

- ``gqa``: ``scaled_dot_product_attention(..., enable_gqa=True)`` with the mask (gpt-fast today);
- ``pack``: the one query token of each of a KV head's query heads packed as that head's queries
  (``(B, H, 1, D) -> (B, KVH, H / KVH, D)``), so SDPA runs on the KV heads as they are stored, with no copy of the
  cache and any SDPA kernel (transformers' ``pack_gqa``, which it applies only outside ``torch.compile``).

Beside them, the same recipe through the ``transformers`` model, as accelbench's static-cache engines run it (a
``StaticCache``, the prefill with ``logits_to_keep=1``, the compiled decode step): ``hf`` (as built), and q/k/v and
gate/up fused with each decode attention of :mod:`accelbench.backends.lm_fuse`: ``hf-fused-transformers``
(the model family's function: under ``torch.compile`` it copies the KV cache once per query head group),
``hf-fused-pack`` and ``hf-fused-gqa`` (the ``static-compile-fused`` engine's default).

Each generation is timed as accelbench times one: the device synchronised, a CUDA event before the prefill, after
it and after every decode step; TTFT is the first gap (the prefill and its greedy token), TPOT the mean of the others
(the decode steps), over ``--reps`` generations after two warm-up ones.

The prefill (``--prefill``) runs eager, or compiled as gpt-fast compiles its ``prefill`` (``fullgraph``): ``dynamic``
(``dynamic=True``, gpt-fast's: one graph for every prompt length), ``static`` (a graph a prompt length) and, for each,
``-graphs`` (``mode="reduce-overhead"``: a CUDA graph a prompt length). Several prompt lengths (``--prompt
128,512,2048``) run on one compile of each step: a decoder (its KV cache) a length, the compiled steps shared.

Run: ``PYTHONPATH=src python3 benchmarks/llm_gptfast.py --arch llama-3.1-8b --out scratch.json`` (one JSON object:
per variant, prefill and prompt length the TTFT and TPOT mean/p50 in ms, per generation, and the output check; a
failed case is its ``error``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x, weight, eps: float):
    """transformers' ``LlamaRMSNorm``: the mean square in float32, the weight applied in the input dtype."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def rotate(x, cos, sin):
    """Rotary embedding in Llama's ``rotate_half`` layout (Su et al. 2021): ``x * cos + rotate_half(x) * sin``."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Block(nn.Module):
    """One decoder layer (attention and gated MLP), its weights taken from a ``transformers`` Llama layer."""

    def __init__(self, layer, cfg, attend: str):
        super().__init__()
        at, mlp = layer.self_attn, layer.mlp
        self.wqkv = nn.Parameter(torch.cat([at.q_proj.weight, at.k_proj.weight, at.v_proj.weight]), False)
        self.wo, self.w1, self.w3, self.w2 = (
            at.o_proj.weight,
            mlp.gate_proj.weight,
            mlp.up_proj.weight,
            mlp.down_proj.weight,
        )
        self.norm1, self.norm2 = layer.input_layernorm.weight, layer.post_attention_layernorm.weight
        self.eps = cfg.rms_norm_eps
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.attend = attend
        self.k_cache = self.v_cache = None

    def forward(self, x, cos, sin, mask, pos):
        b, t, _ = x.shape
        d, h, kvh = self.head_dim, self.heads, self.kv_heads
        q, k, v = F.linear(rms_norm(x, self.norm1, self.eps), self.wqkv).split([h * d, kvh * d, kvh * d], dim=-1)
        q, k, v = q.view(b, t, h, d).transpose(1, 2), k.view(b, t, kvh, d).transpose(1, 2), v.view(b, t, kvh, d)
        q, k, v = rotate(q, cos, sin), rotate(k, cos, sin), v.transpose(1, 2)
        self.k_cache.index_copy_(2, pos, k)
        self.v_cache.index_copy_(2, pos, v)
        if self.attend == "pack" and t == 1:
            y = F.scaled_dot_product_attention(q.view(b, kvh, h // kvh, d), self.k_cache, self.v_cache, attn_mask=mask)
        else:
            y = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, attn_mask=mask, enable_gqa=True)
        x = x + F.linear(y.reshape(b, h, t, d).transpose(1, 2).reshape(b, t, h * d), self.wo)
        n = rms_norm(x, self.norm2, self.eps)
        return x + F.linear(F.silu(F.linear(n, self.w1)) * F.linear(n, self.w3), self.w2)


class Decoder(nn.Module):
    """The whole decoder over a static cache of ``max_len`` positions (see the module docstring)."""

    def __init__(self, hf_model, batch: int, max_len: int, attend: str):
        super().__init__()
        cfg, inner = hf_model.config, hf_model.model
        self.embed, self.norm, self.head = inner.embed_tokens.weight, inner.norm.weight, hf_model.lm_head.weight
        self.eps = cfg.rms_norm_eps
        self.blocks = nn.ModuleList(Block(layer, cfg, attend) for layer in inner.layers)
        dev, dtype = self.embed.device, self.embed.dtype
        for blk in self.blocks:
            shape = (batch, blk.kv_heads, max_len, blk.head_dim)
            blk.k_cache = torch.zeros(shape, device=dev, dtype=dtype)
            blk.v_cache = torch.zeros(shape, device=dev, dtype=dtype)
        rot = inner.rotary_emb  # its inv_freq carries the model's rope scaling (Llama-3.1's "llama3")
        freqs = torch.outer(torch.arange(max_len, device=dev, dtype=torch.float32), rot.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        scale = getattr(rot, "attention_scaling", 1.0)
        self.cos, self.sin = (emb.cos() * scale).to(dtype), (emb.sin() * scale).to(dtype)
        self.causal = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool, device=dev))

    def forward(self, tokens, pos):
        x = F.embedding(tokens, self.embed)
        cos, sin, mask = self.cos[pos][None, None], self.sin[pos][None, None], self.causal[pos][None, None]
        for blk in self.blocks:
            x = blk(x, cos, sin, mask, pos)
        return F.linear(rms_norm(x[:, -1:], self.norm, self.eps), self.head)


class HFStatic(nn.Module):
    """A ``transformers`` causal LM over a ``StaticCache``, called as :class:`Decoder` is: ``(tokens, pos) ->
    logits`` of the last position."""

    def __init__(self, hf_model, max_len: int):
        super().__init__()
        import inspect

        from transformers import StaticCache

        self.model = hf_model
        self.cache = StaticCache(config=hf_model.config, max_cache_len=max_len)
        sig = inspect.signature(type(hf_model).forward).parameters
        self.cache_arg = "cache" if "cache" in sig else "past_key_values"

    def reset(self):
        self.cache.reset()

    def forward(self, tokens, pos):
        kw = {self.cache_arg: self.cache}
        out = self.model(tokens, cache_position=pos, position_ids=pos[None], use_cache=True, logits_to_keep=1, **kw)
        return out.logits


def decode_one(model, token, pos):
    logits = model(token, pos)
    return logits[:, -1].argmax(-1, keepdim=True), logits[:, -1]


def prefill_one(model, tokens, pos):
    """The prefill, gpt-fast's ``prefill``: the same call as :func:`decode_one` on the whole prompt (its own function,
    so its compile is its own)."""
    logits = model(tokens, pos)
    return logits[:, -1].argmax(-1, keepdim=True), logits[:, -1]


PREFILLS = ("eager", "dynamic", "static", "dynamic-graphs", "static-graphs")
CHECK_TOKENS = 16  # the generations whose logits are checked against the plain model


def compiled_prefill(kind: str):
    """``(prefill, graphs)`` for a ``--prefill`` kind (module docstring)."""
    if kind == "eager":
        return prefill_one, False
    graphs = kind.endswith("-graphs")
    mode = "reduce-overhead" if graphs else "default"
    return torch.compile(prefill_one, mode=mode, fullgraph=True, dynamic=kind.startswith("dynamic")), graphs


def generate(model, step, prompts, new: int, graphs: bool, keep_logits: bool = False, prefill=(decode_one, False)):
    """One timed generation: ``(gaps_ms list, tokens (B, new), logits per step or None)``; ``gaps_ms[0]`` is the
    TTFT, the others the decode steps."""
    p = prompts.shape[1]
    positions = torch.arange(p + new, device=prompts.device)
    events = [torch.cuda.Event(enable_timing=True) for _ in range(new + 1)]
    logits = []
    if hasattr(model, "reset"):
        model.reset()
    with torch.no_grad():
        torch.cuda.synchronize()
        events[0].record()
        if prefill[1]:
            torch.compiler.cudagraph_mark_step_begin()
        token, lg = prefill[0](model, prompts, positions[:p])
        token = token.clone()
        events[1].record()
        out = [token]
        if keep_logits:
            logits.append(lg.float().clone())
        for i in range(new - 1):
            if graphs:
                torch.compiler.cudagraph_mark_step_begin()
            token, lg = step(model, token, positions[p + i : p + i + 1])
            token = token.clone()
            events[i + 2].record()
            out.append(token)
            if keep_logits:
                logits.append(lg.float().clone())
        torch.cuda.synchronize()
    gaps = [a.elapsed_time(b) for a, b in zip(events, events[1:])]
    return gaps, torch.cat(out, 1), (logits if keep_logits else None)


def check(hf_model, prompts, tokens, logits) -> dict:
    """The plain model's logits at the same positions (one forward over prompt and generated tokens, no cache):
    the largest difference relative to the logits' range, and the share of greedy tokens that agree."""
    with torch.no_grad():
        ref = hf_model(torch.cat([prompts, tokens[:, :-1]], 1)).logits[:, prompts.shape[1] - 1 :].float()
    mine = torch.stack(logits, 1)
    rel = ((mine - ref).abs().amax() / ref.abs().amax()).item()
    agree = (ref.argmax(-1) == tokens).float().mean().item()
    return {"max_rel_logit_diff": rel, "greedy_token_agreement": agree}


def build(variant: str, hf_model, batch: int, max_len: int):
    """The model a variant runs; the ``hf-fused`` variants fuse ``hf_model`` in place (run them last)."""
    if variant in ("gqa", "pack"):
        return Decoder(hf_model, batch, max_len, variant)
    if variant.startswith("hf-fused"):
        from accelbench.backends.lm_fuse import fuse_projections

        if hasattr(hf_model.model.layers[0].self_attn, "q_proj"):
            fuse_projections(hf_model)
        for layer in hf_model.model.layers:
            layer.self_attn.decode_attention = variant[len("hf-fused-") :]
    return HFStatic(hf_model, max_len)


def measure(variant: str, hf_model, prompts, args, step, prefill) -> dict:
    """One variant at one prompt length (``prompts`` ``(batch, P)``): its eager outputs checked, two warm-up
    generations, ``reps`` timed ones, the compiled outputs checked. ``step``: the compiled decode step; ``prefill``:
    ``(prefill, graphs)`` (:func:`compiled_prefill`)."""
    model = build(variant, hf_model, args.batch, prompts.shape[1] + max(args.new, CHECK_TOKENS))
    _, tokens, logits = generate(model, decode_one, prompts, CHECK_TOKENS, False, keep_logits=True)
    out = {"check_eager": check(hf_model, prompts, tokens, logits)}  # a fused model computes the same function
    t0 = time.perf_counter()
    first = generate(model, step, prompts, args.new, True, prefill=prefill)[0]
    out.update(first_generation_s=time.perf_counter() - t0, first_ttft_ms=first[0], first_tpot_ms=first[1])
    generate(model, step, prompts, args.new, True, prefill=prefill)
    runs = [generate(model, step, prompts, args.new, True, prefill=prefill)[0] for _ in range(args.reps)]
    gaps, ttfts = [g for r in runs for g in r[1:]], [r[0] for r in runs]
    _, ctokens, clogits = generate(model, step, prompts, CHECK_TOKENS, True, keep_logits=True, prefill=prefill)
    out.update(
        ttft_mean_ms=statistics.fmean(ttfts),
        ttft_p50_ms=statistics.median(ttfts),
        tpot_mean_ms=statistics.fmean(gaps),
        tpot_p50_ms=statistics.median(gaps),
        tpot_mean_ms_per_generation=[statistics.fmean(r[1:]) for r in runs],
        check_compiled=check(hf_model, prompts, ctokens, clogits),
        eager_vs_compiled_tokens=(tokens == ctokens).float().mean().item(),
    )
    return out


def measure_variant(variant: str, hf_model, args, res: dict) -> None:
    """Every ``--prefill`` of ``variant`` at every ``--prompt`` length, the compiled decode step shared by all of them
    and each compiled prefill by the lengths; each result written to ``res[variant][prefill][prompt]`` (a failure:
    its ``error``) and saved."""
    torch._dynamo.reset()
    step = torch.compile(decode_one, mode="reduce-overhead", fullgraph=True)
    for kind in args.prefill.split(","):
        prefill = compiled_prefill(kind)
        for p in (int(x) for x in args.prompt.split(",")):
            prompts = torch.randint(0, hf_model.config.vocab_size, (args.batch, p), device=hf_model.device)
            try:
                got = measure(variant, hf_model, prompts, args, step, prefill)
            except Exception as exc:  # a failed case is a result; the others still run
                got = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]}
            res.setdefault(variant, {}).setdefault(kind, {})[str(p)] = got
            print(variant, kind, p, json.dumps({k: v for k, v in got.items() if "per_generation" not in k}), flush=True)
            with open(args.out, "w") as f:  # after every case: a stopped call keeps what ran
                json.dump(res, f, indent=1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="llama-3.1-8b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", default="128", help="prompt lengths, comma-separated")
    ap.add_argument("--prefill", default="eager", help=f"prefills, comma-separated: {', '.join(PREFILLS)}")
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--variants", default="gqa,pack,hf,hf-fused-transformers,hf-fused-pack,hf-fused-gqa")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="scratch.json")
    args = ap.parse_args()
    from llm_handloop import build as build_hf  # the model as accelbench builds hf:<arch> (this folder's hand loops)

    hf_model = build_hf(args.arch, torch.bfloat16, args.seed)
    res = {"arch": args.arch, "batch": args.batch, "prompt": args.prompt, "new": args.new, "torch": torch.__version__}
    res["device"] = torch.cuda.get_device_name()
    for variant in args.variants.split(","):
        measure_variant(variant, hf_model, args, res)


if __name__ == "__main__":
    main()
