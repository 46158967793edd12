"""Summary of tensor-parallel generation exports (``benchmarks/tp_generate_gpu.sh``): a line a case with TTFT, TPOT,
decode tokens/s in all and per GPU, MBU over every GPU's bandwidth, weights and KV cache per GPU, peak memory, the
cost per million output tokens and the all-reduce share of a decode step (``AR %``, ``allreduce_share``), under a
split row where its profiled decode step's device time went (``decode_kernel_families``, ``decode_top_kernels``);
then the TP efficiency of each shape and its TPOT speed-up, as the report shows them
(:func:`accelbench.core.parallel.tp_scaling`: decode tokens/s per GPU at TP n over the same at the smallest degree
measured for that case, TPOT p50 of the smallest degree over TP n's) -- 1.0 is linear scaling.

Run: ``python3 benchmarks/tp_summary.py OUT/*.json`` (compact exports, ``.json.gz``, are read too:
``python3 benchmarks/tp_summary.py benchmarks/results/tensor-parallel/*.json.gz``).
"""

from __future__ import annotations

import gzip
import json
import sys

from accelbench.core.parallel import tp_scaling


def _rows(paths: list[str]) -> list[dict]:
    out = []
    for p in paths:
        try:
            with gzip.open(p, "rt") if p.endswith(".gz") else open(p) as f:
                doc = json.load(f)
        except (OSError, ValueError):
            continue
        for r in doc.get("results", []) if isinstance(doc, dict) else []:
            if r.get("workload") == "generate":
                out.append(r)
    return out


def _f(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def main(paths: list[str]) -> int:
    rows = _rows(paths)
    print(
        f"{'model':18} {'prec':5} {'mode':15} {'tp':>2} {'bs':>3} {'prompt':>6} {'status':11} {'TTFT ms':>9} "
        f"{'TPOT ms':>8} {'tok/s':>8} {'tok/s/GPU':>9} {'MBU':>5} {'W/GPU GB':>8} {'KV/GPU GB':>9} {'peak GB':>7} "
        f"{'$/M tok':>8} {'AR %':>5}"
    )
    for r in rows:
        tp = r.get("tp_degree") or 1
        per_gpu = r.get("decode_tokens_per_s_per_gpu") or r.get("decode_tokens_per_s")
        w = r.get("weight_bytes_per_gpu") or r.get("weight_bytes")
        kv = r.get("kv_cache_bytes_per_gpu") or r.get("kv_cache_bytes")
        cost = r.get("cost_per_1000_samples_usd")
        print(
            f"{r.get('model', '')[:18]:18} {r.get('precision', ''):5} {r.get('mode', ''):15} {tp:>2} "
            f"{r.get('batch_size', 0):>3} {r.get('prompt_len') or 0:>6} {r.get('status', ''):11} "
            f"{_f(r.get('ttft_mean_ms'), '9.1f')} {_f(r.get('tpot_mean_ms'), '8.2f')} "
            f"{_f(r.get('decode_tokens_per_s'), '8.1f')} {_f(per_gpu, '9.1f')} {_f(r.get('mbu'), '5.2f')} "
            f"{_f(None if w is None else w / 1e9, '8.1f')} {_f(None if kv is None else kv / 1e9, '9.2f')} "
            f"{_f(None if r.get('peak_mem_bytes') is None else r['peak_mem_bytes'] / 1e9, '7.1f')} "
            f"{_f(None if cost is None else cost * 1000, '8.3f')} "
            f"{_f(None if r.get('allreduce_share') is None else 100 * r['allreduce_share'], '5.1f')}"
        )
        if r.get("status") != "ok":
            print(f"    {r.get('error') or ''}"[:200])
        if r.get("decode_kernel_families"):
            print(
                f"    a profiled step: {r['decode_kernel_ms']:.2f} ms of kernels in {r['decode_profiled_step_ms']:.2f} "
                f"ms: {r['decode_kernel_families']}\n    top kernels: {r.get('decode_top_kernels')}"
            )
    print("\nTP efficiency (decode tokens/s per GPU over the smallest degree's; TPOT p50 speed-up):")
    for r, s in zip(rows, tp_scaling(rows)):
        if s is not None and (r.get("tp_degree") or 1) != s.base_tp_degree:
            print(
                f"  {r.get('model')} {r.get('precision')} {r.get('mode')} bs={r.get('batch_size')} "
                f"prompt={r.get('prompt_len')} new={r.get('new_tokens')}: TP {r.get('tp_degree') or 1} vs TP "
                f"{s.base_tp_degree}: efficiency {s.tp_efficiency:.2f}, TPOT speed-up {_f(s.tpot_speedup, '.2f')}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
