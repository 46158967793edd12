"""Markdown tables of the first language-model study on both GPUs (docs/results.md, language models): each GPU's
runs and the H200/H100 comparison with bootstrap CIs, from the exports in benchmarks/results/language-models
(imported into temporary stores).

Run: ``PYTHONPATH=src python3 benchmarks/llm_summary.py`` (prints markdown).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from accelbench.core.compare import compare_runs
from accelbench.core.rundata import load_run
from accelbench.store import Store
from accelbench.store.imports import import_run

RESULTS = Path(__file__).resolve().parent / "results" / "language-models"
RUNS = ("8b-headline", "8b-int8-weight-only-int8pack", "8b-hf-generate", "1b-batch-sweep", "8b-batch-sweep")
_TMP = Path(tempfile.mkdtemp(prefix="llm-summary-"))


def _store(gpu: str) -> Path:
    """The GPU's runs of the study in a fresh store, in RUNS order: the ids 1 to 4 (each GPU has one of the int8 and
    hf-generate runs)."""
    db = _TMP / f"{gpu}.db"
    store = Store(db)
    for name in RUNS:
        for ext in (".json", ".parquet"):
            if (f := RESULTS / f"{gpu}-{name}{ext}").is_file():
                import_run(store, f)
    return db


H100, H200 = _store("h100"), _store("h200")
# (what, H100 run, H200 run)
PAIRS = (
    ("8B headline: batch 1, prompt 128, 256 new tokens", 1, 1),
    ("1B batch sweep: prompt 128, 32 new tokens", 3, 3),
    ("8B study: prompt 128, 32 new tokens", 4, 4),
)


def row_table(db: Path, run_id: int) -> list[str]:
    out = []
    for r in Store(db).records(run_id):
        if r.get("status") != "ok":
            continue
        out.append(
            f"| {r['model'][3:]} | {r['batch_size']} | {r['prompt_len']}+{r['new_tokens']} | {r['precision']} | "
            f"{r['mode']} | {r['ttft_p50_ms']:.1f} | {r['tpot_p50_ms']:.2f} | {r['tpot_p99_ms']:.2f} | "
            f"{r['decode_tokens_per_s']:,.0f} | {100 * r['mbu']:.1f} % | {100 * r['mfu']:.1f} % | "
            f"{r['kv_cache_bytes'] / 1e6:,.0f} | {r['peak_mem_bytes'] / 1e9:.1f} | "
            f"{1e3 * r['energy_per_sample_j']:,.0f} ({r['energy_uncertainty_pct']:.0f} %) | "
            f"{1e3 * r['cost_per_1000_samples_usd']:.2f} | {r['validity']} |"
        )
    return out


def main() -> None:
    head = (
        "| model | batch | prompt+new | precision | backend | TTFT p50 ms | TPOT p50 ms | TPOT p99 ms | decode tok/s | "
        "MBU | MFU | KV MB | peak GB | mJ/token (±) | $/1M tok | validity |"
    )
    for name, db in (("H100", H100), ("H200", H200)):
        print(f"\n{name}:\n\n{head}\n" + "|---" * 16 + "|")
        for run_id in sorted(r["run_id"] for r in Store(db).runs()):
            print("\n".join(row_table(db, run_id)))
    print("\nH200 / H100 (compare: B = H200, A = H100; 95 % bootstrap CIs over the generations):\n")
    print("| study | case | decode tok/s B/A | TPOT p50 B/A | TTFT p50 B/A | energy/token B/A | $/token B/A |")
    print("|---|---|---|---|---|---|---|")
    for name, a, b in PAIRS:
        cmp = compare_runs(load_run(Store(H100), a, "H100"), load_run(Store(H200), b, "H200"))
        for c in cmp.cases:
            m = c.metrics
            cell = lambda k: f"{m[k].ratio:.3f} ({m[k].ci_low:.3f}..{m[k].ci_high:.3f})" if m[k].ci_low else "-"  # noqa: B023, E731
            print(
                f"| {name} | {c.label.replace('hf:', '').replace(' generate', '')} | {cell('throughput')} | "
                f"{cell('latency_p50')} | {cell('ttft_p50')} | {cell('energy_per_sample')} | {cell('cost_per_1000')} |"
            )


if __name__ == "__main__":
    main()
