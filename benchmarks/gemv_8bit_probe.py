"""Which kernel reads 8-bit weights faster than bf16 at decode's one-token shape, and up to how many rows? (the
target: int8 decode >= 1.4x bf16)

Decode at batch 1 is a chain of matrix-vector products: every weight byte is read once a token, so a kernel that
reads int8 or fp8 weights (half the bytes) can be up to 2x a bf16 one. This probe times, for the Llama-3.1-8B or
(``--model 70b``) Llama-3.1-70B projection shapes (the fused q/k/v and gate/up of ``static-compile-fused``, o, down and
the LM head), one ``(rows, K) x (K, N)`` product through each kernel path accelbench has or could have:

- ``bf16``: ``F.linear`` (cuBLAS), the baseline;
- ``int8-dequant`` / ``fp8-dequant``: the weight converted to bf16, then ``F.linear`` and the row scales (what a
  weight-only linear runs past ``accelbench.quant.gemv.MAX_ROWS`` rows); ``-compiled``: the same compiled by
  Inductor, as the compiled engines run it;
- ``int8-reduce`` / ``fp8-reduce``: the weight-only multiply-and-sum compiled by Inductor with coordinate-descent
  tuning (``accelbench.quant.weight_only``'s one-token path, as ``static-compile-fused`` runs it);
- ``int8-pack``: ``aten._weight_int8pack_mm`` (CUDA);
- ``fp8-scaled-mm``: ``torch._scaled_mm`` with the activation quantized to fp8 per row (W8A8, cuBLAS FP8 tensor
  cores; the activation row padded to 16, the kernel's minimum);
- ``int8-gemv-auto`` / ``fp8-gemv``: accelbench's Triton 8-bit kernel (``accelbench.quant.gemv``, what the
  weight-only precisions run at up to ``MAX_ROWS`` rows on a GPU), at any ``--rows`` (past ``MAX_ROWS`` too);
  ``int8-gemv-instruction`` / ``int8-gemv-bits``: the same kernel with its int8-to-float32 conversion forced (the
  conversion instruction, or by bits; ``auto`` lets the autotuner choose, see ``accelbench.quant.gemv``);
  ``int8-gemv-unsplit``: the kernel with ``K`` whole, beside ``auto``'s split timed fastest for the shape.

Each is timed as the median over ``--reps`` CUDA-event-timed replays of a CUDA graph holding ``--iters`` calls (as a
decode step's graph runs them: no host launch cost; ``--eager`` times back-to-back eager calls instead, which adds
~50-70 us of launch and guard cost a call to the small shapes). A cold L2 is not
forced: a 4096x4096 int8 weight (16 MiB) fits a 50 MiB L2, so the small shapes read partly from L2 after the first
call; the large ones (gate/up 117 MB bf16, LM head 1.05 GB) cannot). Achieved bandwidth = weight bytes / time;
achieved TFLOP/s = 2 x rows x N x K / time. Results are written after each shape, so a call's time limit keeps what
was timed.

Run: ``PYTHONPATH=src python3 benchmarks/gemv_8bit_probe.py --out gemv.json``
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.nn.functional as F
from lib.cuda_timing import seconds_per_call, seconds_per_call_graphed

SHAPES = {
    "8b": {
        "qkv (fused)": (6144, 4096),
        "o": (4096, 4096),
        "gate/up (fused)": (28672, 4096),
        "down": (4096, 14336),
        "lm_head": (128256, 4096),
    },
    "70b": {  # Llama-3.1-70B: hidden 8192, 64 query and 8 KV heads of 128, intermediate 28,672
        "qkv (fused)": (10240, 8192),
        "o": (8192, 8192),
        "gate/up (fused)": (57344, 8192),
        "down": (8192, 28672),
        "lm_head": (128256, 8192),
    },
}


def paths(n: int, k: int, rows: int = 1, keep: frozenset[str] = frozenset()):
    from accelbench.quant import gemv
    from accelbench.quant.weight_only import quantize_weight

    torch.manual_seed(0)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    ref = F.linear(x, w).float()
    q8, s8 = quantize_weight(w, "int8")
    f8, sf = quantize_weight(w, "fp8")
    s8, sf = s8.to(torch.bfloat16), sf.to(torch.bfloat16)

    def reduce(q, s):
        return lambda x: ((x[:, None, :].float() * q.float()).sum(-1) * s.float()).to(x.dtype)

    import torch._dynamo.config as dc
    import torch._inductor.config as ic

    ic.coordinate_descent_tuning = True
    dc.recompile_limit = 1024  # a compiled path is one compile a shape and row count, of the same code
    yield "bf16", w.numel() * 2, lambda: F.linear(x, w), ref
    for name, q, s in (("int8-dequant", q8, s8), ("fp8-dequant", f8, sf)):  # past MAX_ROWS: what a linear runs
        yield name, q.numel(), lambda q=q, s=s: F.linear(x, q.to(x.dtype)) * s, ref
        if keep and f"{name}-compiled" not in keep:  # compiled only when timed (a compile a shape and row count)
            continue
        fn = torch.compile(lambda x, q=q, s=s: F.linear(x, q.to(x.dtype)) * s, fullgraph=True, dynamic=False)
        yield f"{name}-compiled", q.numel(), lambda fn=fn: fn(x), ref  # as the compiled engines run it

    def kernel(q, s, **options):  # any number of rows (gemv_8bit itself takes at most MAX_ROWS)
        out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
        gemv.launch(x, q, s, out, **options)
        return out

    yield "int8-gemv-auto", q8.numel(), lambda: kernel(q8, s8), ref

    if not keep or "int8-gemv-unsplit" in keep:  # the kernel with K whole, whatever split was timed fastest
        yield "int8-gemv-unsplit", q8.numel(), lambda: kernel(q8, s8, split_k=1), ref

    for conversion in gemv.INT8_CONVERSIONS:  # each int8 conversion forced (accelbench.quant.gemv's docstring)
        if keep and f"int8-gemv-{conversion}" not in keep:
            continue

        yield f"int8-gemv-{conversion}", q8.numel(), lambda c=conversion: kernel(q8, s8, int8_conversion=c), ref
    yield "fp8-gemv", f8.numel(), lambda: kernel(f8, sf), ref
    if rows > 1:
        return
    for name, q, s in (("int8-reduce", q8, s8), ("fp8-reduce", f8, sf)):
        fn = torch.compile(reduce(q, s), fullgraph=True)
        yield name, q.numel(), lambda fn=fn: fn(x), ref
    yield "int8-pack", q8.numel(), lambda: torch._weight_int8pack_mm(x, q8, s8), ref
    wt = f8.t()  # (K, N) column-major, as _scaled_mm wants its second operand
    scale_b = sf.float()[None, :]

    def scaled():
        xp = F.pad(x, (0, 0, 0, 15))  # 16 rows: cuBLAS FP8's minimum
        sa = xp.abs().amax(dim=1, keepdim=True).float().clamp(min=1e-12) / 448.0
        xq = (xp / sa).to(torch.float8_e4m3fn)
        return torch._scaled_mm(xq, wt, scale_a=sa, scale_b=scale_b, out_dtype=torch.bfloat16)[:1]

    fn = torch.compile(scaled, fullgraph=True)
    yield "fp8-scaled-mm", f8.numel(), fn, ref


def probe(label: str, n: int, k: int, rows: int, timer, keep: frozenset[str] = frozenset()) -> dict:
    """Every path's (or ``keep``'s, when given) time, bandwidth, error against bf16's float32 product and speed-up
    over bf16 at one shape."""
    row = {"n": n, "k": k, "rows": rows}
    for name, nbytes, fn, ref in paths(n, k, rows, keep):
        if keep and name not in keep:
            continue
        try:
            err = ((fn().float() - ref).norm() / ref.norm()).item()  # the first call tunes, outside the graph
            t = timer(fn)
            flops = 2 * rows * n * k
            row[name] = {"us": t * 1e6, "weight_bytes": nbytes, "tb_per_s": nbytes / t / 1e12, "rel_err": err}
            row[name]["tflop_per_s"] = flops / t / 1e12
        except Exception as exc:  # a path that does not run here is a finding, not the end of the probe
            row[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
        print(label, rows, name, row[name], flush=True)
    base = row["bf16"]["us"]
    for r in row.values():
        if isinstance(r, dict) and "us" in r:
            r["speedup_vs_bf16"] = base / r["us"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rows", default="1,2,4", help="rows of x (batch x tokens); past 1 no reduce, pack or scaled-mm")
    ap.add_argument("--model", default="8b", choices=sorted(SHAPES), help="whose projection shapes")
    ap.add_argument("--eager", action="store_true", help="time eager back-to-back calls, not a CUDA graph")
    ap.add_argument("--paths", default="", help="comma-separated path names to time (default: all; bf16 always)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    timer = seconds_per_call if args.eager else seconds_per_call_graphed
    from accelbench.quant import gemv

    res = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "timing": "eager" if args.eager else "CUDA graph",
        "model": args.model,
        "max_rows": gemv.MAX_ROWS,
        "shapes": {},
    }
    keep = frozenset(filter(None, args.paths.split(","))) | ({"bf16"} if args.paths else set())
    for rows in map(int, args.rows.split(",")):
        for label, (n, k) in SHAPES[args.model].items():
            res["shapes"][f"{label} x{rows}"] = probe(
                label, n, k, rows, lambda fn: timer(fn, args.iters, args.reps), keep
            )
            with open(args.out, "w") as f:  # written as it goes: a call's time limit keeps what was timed
                json.dump(res, f, indent=1)
    res["split_chosen"] = {f"{n}x{k}": split for (n, k), split in gemv.splits().items()}
    res["int8_conversion_chosen"] = {f"{n}x{k}": c for (n, k), c in gemv.int8_conversions().items()}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
