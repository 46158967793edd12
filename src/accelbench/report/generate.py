"""The table of a generate run: a row per case with the two phases apart (prefill: time to first token, prefill
tokens/s, MFU; decode: time per output token, decode tokens/s, MBU), memory, energy and cost per token."""

from __future__ import annotations

from typing import Any, Iterable

from accelbench.report.table import _int, is_detail, results_table
from accelbench.report.units import number, rate, si, usd


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


COMPACT_COLUMNS: list[tuple[str, str, Any]] = [
    ("Batch", "batch_size", _int),
    ("Prompt", "prompt_len", _int),
    ("Prec.", "precision", str),
    ("Mode", "mode", str),
    ("TTFT ms", "ttft_p50_ms", number),
    ("TPOT ms", "tpot_p50_ms", number),
    ("Decode tok/s", "decode_tokens_per_s", rate),
    ("MBU", "mbu", _pct),
    ("Status", "status", str),
]
COLUMNS: list[tuple[str, str, Any]] = [
    ("Model", "model", str),
    ("Batch", "batch_size", _int),
    ("Prompt", "prompt_len", _int),
    ("New", "new_tokens", _int),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("TTFT p50 ms", "ttft_p50_ms", number),
    ("TTFT p99 ms", "ttft_p99_ms", number),
    ("TPOT p50 ms", "tpot_p50_ms", number),
    ("TPOT p99 ms", "tpot_p99_ms", number),
    ("E2E p50 ms", "e2e_latency_p50_ms", number),
    ("Prefill tok/s", "prefill_tokens_per_s", rate),
    ("Decode tok/s", "decode_tokens_per_s", rate),
    ("Output tok/s", "output_tokens_per_s", rate),
    ("MBU", "mbu", _pct),
    ("MBU (datasheet)", "mbu_datasheet", _pct),
    ("MFU", "mfu", _pct),
    ("KV cache", "kv_cache_bytes", lambda v: si(v, "B")),
    ("Peak mem", "peak_mem_bytes", lambda v: si(v, "B")),
    ("Compile s", "compile_s", number),
    ("J/token", "energy_per_sample_j", number),
    ("$/1M tokens", "cost_per_1000_samples_usd", lambda v: usd(1000 * v)),
    ("Perplexity", "perplexity", number),
    ("Validity", "validity", str),
    ("Status", "status", str),
]


def generate_table(records: Iterable[dict], compact: bool = False, title: str | None = None):
    """The case rows of a generate run as a rich table; compact fits 80 columns."""
    rows = [r for r in records if not is_detail(r)]
    return results_table(rows, title=title, columns=COMPACT_COLUMNS if compact else COLUMNS, compact=compact)
