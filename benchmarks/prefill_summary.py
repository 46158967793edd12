"""A markdown summary of ``benchmarks/prefill_compiled_gpu.sh``'s results: each generate case's TTFT against its
roofline floor, the compile time of each step, and its decode (TPOT, MBU); then the from-scratch gpt-fast loop's
TTFT and TPOT by prefill kind and prompt length, beside the engines' at the same length.

Run: ``PYTHONPATH=src python3 benchmarks/prefill_summary.py OUT`` (``OUT``: the script's folder, holding
``prefill.db`` and ``scratch.json``; prints markdown).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from accelbench.store import Store

COLUMNS = (
    ("precision", "precision", "{}"),
    ("mode", "mode", "{}"),
    ("prompt", "prompt_len", "{}"),
    ("status", "status", "{}"),
    ("TTFT p50 ms", "ttft_p50_ms", "{:.2f}"),
    ("floor ms", "ttft_floor_ms", "{:.2f}"),
    ("TTFT / floor", "ttft_over_floor", "{:.2f}"),
    ("MFU", "mfu", "{:.1%}"),
    ("TPOT p50 ms", "tpot_p50_ms", "{:.3f}"),
    ("MBU", "mbu", "{:.1%}"),
    ("compile prefill s", "compile_prefill_s", "{:.1f}"),
    ("compile decode s", "compile_decode_s", "{:.1f}"),
    ("compile s", "compile_s", "{:.1f}"),
)


def _cell(row: dict, key: str, fmt: str) -> str:
    v = row.get(key)
    return "" if v is None else fmt.format(v)


def engines_table(db: Path) -> list[str]:
    """One line a generate case of every run in ``db``, in run and case order (an error row: its error)."""
    store = Store(db)
    lines = ["| " + " | ".join(c[0] for c in COLUMNS) + " |", "|" + " --- |" * len(COLUMNS)]
    for run in store.runs():
        for r in store.records(run["run_id"], workload="generate"):
            cells = [_cell(r, key, fmt) for _, key, fmt in COLUMNS]
            if r.get("status") != "ok":
                cells[3] = f"{r.get('status')}: {str(r.get('error') or r.get('reason') or '')[:80]}"
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def scratch_table(path: Path) -> list[str]:
    """The from-scratch loop's cases: variant, prefill kind, prompt length, TTFT and TPOT, compile, output check."""
    res = json.loads(path.read_text())
    lines = [
        f"From-scratch gpt-fast loop ({res.get('arch')}, batch {res.get('batch')}, {res.get('new')} new tokens, "
        f"{res.get('device')}, torch {res.get('torch')}):",
        "",
        "| variant | prefill | prompt | TTFT p50 ms | TPOT p50 ms | first generation s | greedy agreement | error |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for variant, kinds in res.items():
        if not isinstance(kinds, dict):
            continue
        for kind, prompts in kinds.items():
            for p, got in prompts.items():
                check = (got.get("check_compiled") or {}).get("greedy_token_agreement")
                cells = [
                    variant,
                    kind,
                    p,
                    _cell(got, "ttft_p50_ms", "{:.2f}"),
                    _cell(got, "tpot_p50_ms", "{:.3f}"),
                    _cell(got, "first_generation_s", "{:.1f}"),
                    "" if check is None else f"{check:.3f}",
                    got.get("error", ""),
                ]
                lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    if (out / "prefill.db").is_file():
        print("\n".join(engines_table(out / "prefill.db")), end="\n\n")
    if (out / "scratch.json").is_file():
        print("\n".join(scratch_table(out / "scratch.json")))


if __name__ == "__main__":
    main()
