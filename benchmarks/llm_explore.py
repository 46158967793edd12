"""Exploration on one GPU before the generate scenario existed: where does decode time go?

Stages (each writes $OUT/explore.json as it finishes, so a stopped call keeps what ran):
  bw      device copy bandwidth (a 2 GiB tensor copied; read + write bytes over CUDA-event time)
  gemv    one decode step's projections at batch 1 (Llama-3.1-8B shapes, bf16): cuBLAS, cuBLASLt, Inductor
          default and max-autotune-no-cudagraphs; achieved bytes/s of the weight read
  hf      a Llama-3.1-8B-shaped LlamaForCausalLM, random bf16 weights, batch 1, prompt 128, 256 new tokens:
          generate (dynamic cache), generate (static cache), a hand static-cache loop with the decode step
          compiled mode="reduce-overhead", the same with q/k/v and gate/up fused; time per output token from
          CUDA events
  int8    the fused model with torchao int8 weight-only, compiled
Run: OUT=/tmp/x python3 benchmarks/llm_explore.py [stage ...]
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

import torch
from lib.cuda_timing import seconds_per_call

OUT = os.environ.get("OUT", ".")
RES: dict = {"torch": torch.__version__}
T0 = time.time()
BUDGET = float(os.environ.get("BUDGET_S", 540))


def save():
    with open(os.path.join(OUT, "explore.json"), "w") as f:
        json.dump(RES, f, indent=1, default=str)


def left():
    return BUDGET - (time.time() - T0)


def stage_bw():
    x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    t = seconds_per_call(lambda: y.copy_(x), 20)
    RES["copy_bw_bytes_per_s"] = 2 * x.numel() / t
    RES["device"] = torch.cuda.get_device_name()


def stage_gemv():
    shapes = {
        "qkv": (4096, 6144),
        "o": (4096, 4096),
        "gate_up": (4096, 28672),
        "down": (14336, 4096),
        "lm_head": (4096, 128256),
    }
    out = {}
    for name, (k, n) in shapes.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(1, k, device="cuda", dtype=torch.bfloat16)
        row = {}
        f = lambda: torch.nn.functional.linear(x, w)  # noqa: B023, E731
        row["cublas"] = w.numel() * 2 / seconds_per_call(f, 50)
        try:
            torch.backends.cuda.preferred_blas_library("cublaslt")
            row["cublaslt"] = w.numel() * 2 / seconds_per_call(f, 50)
        finally:
            torch.backends.cuda.preferred_blas_library("cublas")
        for mode in ("default", "max-autotune-no-cudagraphs"):
            if left() < 200:
                break
            torch._dynamo.reset()
            g = torch.compile(lambda a, b: torch.nn.functional.linear(a, b), mode=mode)
            try:
                row[mode] = w.numel() * 2 / seconds_per_call(lambda: g(x, w), 50)  # noqa: B023
            except Exception as exc:  # noqa: BLE001
                row[mode] = repr(exc)[:200]
        out[name] = row
        RES["gemv_bytes_per_s"] = out
        save()


def llama8b_config():
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=128256,
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    )


class StepEvents:
    """A logits processor that records a CUDA event per generated token (no host sync)."""

    def __init__(self):
        self.events = []

    def __call__(self, input_ids, scores):
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        self.events.append(e)
        return scores


def gen_times(model, ids, new, **kw):
    from transformers import LogitsProcessorList

    rec = StepEvents()
    start = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    model.generate(
        ids,
        attention_mask=torch.ones_like(ids),
        max_new_tokens=new,
        min_new_tokens=new,
        do_sample=False,
        logits_processor=LogitsProcessorList([rec]),
        pad_token_id=0,
        **kw,
    )
    torch.cuda.synchronize()
    ttft = start.elapsed_time(rec.events[0]) / 1e3
    gaps = [a.elapsed_time(b) / 1e3 for a, b in zip(rec.events, rec.events[1:])]
    gaps.sort()
    return {
        "ttft_s": ttft,
        "tpot_p50_s": gaps[len(gaps) // 2],
        "tpot_mean_s": sum(gaps) / len(gaps),
        "tokens": len(rec.events),
    }


def fuse(model):
    """q/k/v -> one qkv Linear and gate/up -> one Linear per layer (Llama family), forward patched."""
    import types

    from transformers.models.llama import modeling_llama as ml

    for layer in model.model.layers:
        at = layer.self_attn
        w = torch.cat([at.q_proj.weight, at.k_proj.weight, at.v_proj.weight])
        at.qkv = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
        at.qkv.weight.data.copy_(w)
        nq, nk = at.q_proj.weight.shape[0], at.k_proj.weight.shape[0]
        del at.q_proj, at.k_proj, at.v_proj

        def attn_forward(
            self,
            hidden_states,
            position_embeddings=None,
            attention_mask=None,
            past_key_values=None,
            _nq=nq,
            _nk=nk,
            **kwargs,
        ):
            input_shape = hidden_states.shape[:-1]
            hidden_shape = (*input_shape, -1, self.head_dim)
            q, k, v = self.qkv(hidden_states).split([_nq, _nk, _nk], dim=-1)
            q = q.view(hidden_shape).transpose(1, 2)
            k = k.view(hidden_shape).transpose(1, 2)
            v = v.view(hidden_shape).transpose(1, 2)
            cos, sin = position_embeddings
            q, k = ml.apply_rotary_pos_emb(q, k, cos, sin)
            if past_key_values is not None:
                k, v = past_key_values.update(k, v, self.layer_idx)
            fn = ml.ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, ml.eager_attention_forward)
            o, wts = fn(self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling, **kwargs)
            return self.o_proj(o.reshape(*input_shape, -1).contiguous()), wts

        at.forward = types.MethodType(attn_forward, at)
        mlp = layer.mlp
        w = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])
        mlp.gate_up = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, device=w.device, dtype=w.dtype)
        mlp.gate_up.weight.data.copy_(w)
        ni = mlp.gate_proj.weight.shape[0]
        del mlp.gate_proj, mlp.up_proj

        def mlp_forward(self, x, _ni=ni):
            g, u = self.gate_up(x).split([_ni, _ni], dim=-1)
            return self.down_proj(self.act_fn(g) * u)

        mlp.forward = types.MethodType(mlp_forward, mlp)
    return model


def hand_loop(model, ids, new, compile_mode="reduce-overhead"):
    """Static-cache loop: eager prefill, compiled decode step (one CUDA graph per step)."""
    from transformers import StaticCache

    b, p = ids.shape
    cache = StaticCache(config=model.config, max_cache_len=p + new)

    def step(tok, pos, cache_position):
        return (
            model(tok, position_ids=pos, cache_position=cache_position, past_key_values=cache, use_cache=True)
            .logits[:, -1]
            .argmax(-1, keepdim=True)
        )

    dec = torch.compile(step, mode=compile_mode, fullgraph=True) if compile_mode else step

    def once():
        cache.reset()
        evs = []
        e0 = torch.cuda.Event(enable_timing=True)
        e0.record()
        cp = torch.arange(p, device="cuda")
        logits = model(ids, position_ids=cp[None], cache_position=cp, past_key_values=cache, use_cache=True).logits
        tok = logits[:, -1].argmax(-1, keepdim=True)
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        evs.append(e)
        toks = [tok]
        for i in range(new - 1):
            cp1 = torch.tensor([p + i], device="cuda")
            if compile_mode == "reduce-overhead":
                torch.compiler.cudagraph_mark_step_begin()
            tok = dec(tok, cp1[None], cp1).clone()
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            evs.append(e)
            toks.append(tok)
        torch.cuda.synchronize()
        gaps = sorted(a.elapsed_time(b_) / 1e3 for a, b_ in zip(evs, evs[1:]))
        return {
            "ttft_s": e0.elapsed_time(evs[0]) / 1e3,
            "tpot_p50_s": gaps[len(gaps) // 2],
            "tpot_mean_s": sum(gaps) / len(gaps),
        }, torch.cat(toks, 1)

    t = time.time()
    once()
    compile_s = time.time() - t
    r, toks = once()
    r["first_call_s"] = compile_s
    return r, toks


def stage_hf():
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = llama8b_config()
    t = time.time()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    RES["hf_build_s"] = time.time() - t
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    RES["weight_bytes"] = nbytes
    ids = torch.randint(0, cfg.vocab_size, (1, 128), device="cuda")
    hf = RES.setdefault("hf", {})
    with torch.inference_mode():
        gen_times(model, ids, 8)
        hf["generate_dynamic"] = gen_times(model, ids, 256)
        save()
        gen_times(model, ids, 8, cache_implementation="static")
        hf["generate_static"] = gen_times(model, ids, 256, cache_implementation="static")
        save()
    with torch.no_grad():
        hf["static_eager"], _ = hand_loop(model, ids, 32, compile_mode=None)
        save()
        hf["static_compiled"], toks_plain = hand_loop(model, ids, 256)
        save()
        torch._dynamo.reset()
        ref = model(ids).logits.float()
        fuse(model)
        got = model(ids).logits.float()
        hf["fused_max_abs_logit_diff"] = (ref - got).abs().max().item()
        hf["fused_argmax_agree"] = (ref.argmax(-1) == got.argmax(-1)).float().mean().item()
        hf["fused_compiled"], toks_fused = hand_loop(model, ids, 256)
        hf["fused_tokens_agree"] = (toks_plain == toks_fused).float().mean().item()
        save()
    return model, ids


def stage_int8(model, ids):
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    torch._dynamo.reset()
    quantize_(model, Int8WeightOnlyConfig())
    with torch.no_grad():
        RES["hf"]["fused_int8_compiled"], _ = hand_loop(model, ids, 256)
    save()


class DecodeLinear(torch.nn.Module):
    """A Linear whose weight may be int8 / fp8 with per-row scales; at one token a row it is written as a
    multiply-and-sum, which Inductor turns into one reduction kernel (dequantization fused into the load)."""

    def __init__(self, lin, quant=None):
        super().__init__()
        w = lin.weight.data
        self.bias = lin.bias
        if quant is None:
            self.register_buffer("weight", w)
            self.scale = None
        else:
            amax = w.float().abs().amax(1, keepdim=True).clamp(min=1e-12)
            qmax = 127.0 if quant == "int8" else 448.0
            scale = amax / qmax
            q = w.float() / scale
            q = q.round().clamp(-127, 127).to(torch.int8) if quant == "int8" else q.to(torch.float8_e4m3fn)
            self.register_buffer("weight", q)
            self.register_buffer("scale", scale.squeeze(1).to(w.dtype))

    def forward(self, x):
        m = x.shape[:-1].numel()
        if m == 1:
            y = (x.unsqueeze(-2).float() * self.weight.float()).sum(-1)
            if self.scale is not None:
                y = y * self.scale.float()
            y = y.to(x.dtype)
        else:
            w = self.weight.to(x.dtype)
            y = torch.nn.functional.linear(x, w)
            if self.scale is not None:
                y = y * self.scale
        return y if self.bias is None else y + self.bias


def swap_linears(model, quant=None):
    for _name, mod in list(model.named_modules()):
        for cname, child in list(mod.named_children()):
            if isinstance(child, torch.nn.Linear):
                setattr(mod, cname, DecodeLinear(child, quant))
    return model


def stage_gemv2():
    import torch._inductor.config as ic

    ic.coordinate_descent_tuning = True
    shapes = {
        "qkv": (4096, 6144),
        "o": (4096, 4096),
        "gate_up": (4096, 28672),
        "down": (14336, 4096),
        "lm_head": (4096, 128256),
    }
    out = RES.setdefault("gemv2_bytes_per_s", {})
    for name, (k, n) in shapes.items():
        if left() < 240:
            break
        lin = torch.nn.Linear(k, n, bias=False, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(1, 1, k, device="cuda", dtype=torch.bfloat16)
        row = {}
        for q in (None, "int8"):
            torch._dynamo.reset()
            dl = DecodeLinear(lin, q)
            g = torch.compile(dl)
            nb = dl.weight.numel() * dl.weight.element_size()
            row[str(q)] = nb / seconds_per_call(lambda: g(x), 50)  # noqa: B023
            ref = torch.nn.functional.linear(x.float(), lin.weight.float())
            row[f"{q}_max_rel_err"] = ((g(x).float() - ref).abs().max() / ref.abs().max()).item()
        out[name] = row
        save()


def profile_decode(model, ids, tag):
    """Kernel time per decode step by kernel name (torch.profiler, 10 compiled steps)."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import StaticCache

    p = ids.shape[1]
    cache = StaticCache(config=model.config, max_cache_len=p + 64)

    def step(tok, pos, cache_position):
        return (
            model(tok, position_ids=pos, cache_position=cache_position, past_key_values=cache, use_cache=True)
            .logits[:, -1]
            .argmax(-1, keepdim=True)
        )

    dec = torch.compile(step, mode="reduce-overhead", fullgraph=True)
    cp = torch.arange(p, device="cuda")
    tok = (
        model(ids, position_ids=cp[None], cache_position=cp, past_key_values=cache, use_cache=True)
        .logits[:, -1]
        .argmax(-1, keepdim=True)
    )
    for i in range(5):
        c1 = torch.tensor([p + i], device="cuda")
        torch.compiler.cudagraph_mark_step_begin()
        tok = dec(tok, c1[None], c1).clone()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(5, 15):
            c1 = torch.tensor([p + i], device="cuda")
            torch.compiler.cudagraph_mark_step_begin()
            tok = dec(tok, c1[None], c1).clone()
        torch.cuda.synchronize()
    rows = []
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" or getattr(e, "device_time_total", 0):
            rows.append((e.key[:90], e.count, getattr(e, "device_time_total", 0) / 10))
    rows.sort(key=lambda r: -r[2])
    RES.setdefault("profile", {})[tag] = {
        "per_step_us_by_kernel": rows[:40],
        "total_us_per_step": sum(r[2] for r in rows),
        "kernels_per_step": sum(r[1] for r in rows) / 10,
    }
    save()


def stage_fast():
    """Fused projections + DecodeLinear (bf16, then int8, fp8) compiled with coordinate-descent tuning."""
    import torch._inductor.config as ic
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = llama8b_config()
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, 128), device="cuda")
    fast = RES.setdefault("fast", {})
    with torch.no_grad():
        fuse(model)
        fast["fused_cublas"], _ = hand_loop(model, ids, 256)
        save()
        profile_decode(model, ids, "fused_cublas")
        torch._dynamo.reset()
        ic.coordinate_descent_tuning = True
        base = {n: m.weight.data for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        swap_linears(model)
        fast["fused_reduction"], _ = hand_loop(model, ids, 256)
        save()
        profile_decode(model, ids, "fused_reduction")
        for q in ("int8", "fp8"):
            if left() < 150:
                break
            torch._dynamo.reset()
            for name, mod in list(model.named_modules()):
                for cname, child in list(mod.named_children()):
                    if isinstance(child, DecodeLinear):
                        lin = torch.nn.Linear(1, 1, bias=False)
                        full = f"{name}.{cname}" if name else cname
                        lin.weight = torch.nn.Parameter(base[full], requires_grad=False)
                        setattr(mod, cname, DecodeLinear(lin, q))
            fast[f"fused_reduction_{q}"], _ = hand_loop(model, ids, 256)
            save()


def main():
    stages = sys.argv[1:] or ["bw", "hf", "int8", "gemv"]
    RES["stages"] = stages
    model = ids = None
    for s in stages:
        if left() < 60:
            RES.setdefault("skipped", []).append(s)
            continue
        t = time.time()
        try:
            if s == "bw":
                stage_bw()
            elif s == "gemv":
                stage_gemv()
            elif s == "hf":
                model, ids = stage_hf()
            elif s == "int8" and model is not None:
                stage_int8(model, ids)
            elif s == "gemv2":
                stage_gemv2()
            elif s == "fast":
                stage_fast()
        except Exception:  # noqa: BLE001 - exploration: keep going, keep the reason
            RES.setdefault("errors", {})[s] = traceback.format_exc()[-3000:]
        RES.setdefault("stage_s", {})[s] = time.time() - t
        save()
        print(s, "done", round(time.time() - t, 1), "s", flush=True)


if __name__ == "__main__":
    main()
