"""Quality of a language model's precisions: perplexity beside the reference precision, and the cheapest precision
that keeps it (the generate scenario's "cheapest precision meeting the target" line, as top-1 is for images).

Target: perplexity at most 1 % above the reference's (the widest-float precision measured: fp32, else bf16/fp16).
MLPerf Inference's Llama 2 70B target is 99 % of the FP32 reference on its accuracy metrics (MLPerf Inference rules,
"Benchmarks" table); for perplexity, which falls as quality rises, the same 1 % reads as ``ppl <= 1.01 x ref``.
"""

from __future__ import annotations

from accelbench.core.errors import OK
from accelbench.core.targets import Target, cheapest_meeting

TARGET_RATIO = 1.01
REFERENCE_ORDER = ("fp32", "bf16", "fp16")  # the reference: the first of these measured


def reference_perplexity(rows: list[dict]) -> tuple[str, float] | None:
    """The reference of a model's rows: the first precision of :data:`REFERENCE_ORDER` measured, and its lowest
    perplexity; None when none of them was measured."""
    refs = [p for p in REFERENCE_ORDER if any(r.get("precision") == p for r in rows)]
    if not refs:
        return None
    return refs[0], min(r["perplexity"] for r in rows if r.get("precision") == refs[0])


def cheapest_meeting_perplexity(records, ratio: float = TARGET_RATIO) -> list[dict]:
    """Per model with a perplexity (``records``: typed rows, :meth:`accelbench.store.Store.records`; missing is None):
    the cheapest ``ok`` case whose perplexity is at most ``ratio`` times the reference precision's (see the module
    docstring; the search is :func:`accelbench.core.targets.cheapest_meeting`, perplexity lower-is-better).

    Cheapest: the lowest ``cost_per_1000_samples_usd`` (per 1,000 output tokens), else the highest
    ``decode_tokens_per_s``.

    Returns:
        One dict per model: ``model``, ``reference`` (its precision), ``reference_perplexity``, ``precision``,
        ``mode``, ``batch_size``, ``perplexity``, ``by``, ``value``, ``missed`` (precisions above the target);
        ``precision`` None when none meets it.
    """
    target = Target(
        metric="perplexity",
        higher_is_better=False,
        ratio=ratio,
        reference=reference_perplexity,
        speed="decode_tokens_per_s",
        include=lambda r: r.get("status") == OK,
    )
    out = []
    for c in cheapest_meeting(records, target):
        row = {
            "model": c.model,
            "reference": c.reference,
            "reference_perplexity": c.reference_value,
            "precision": None,
            "mode": None,
            "batch_size": None,
            "perplexity": None,
            "by": c.by,
            "value": c.value,
            "missed": c.missed,
        }
        if c.best is not None:
            row.update(
                precision=c.best["precision"],
                mode=c.best.get("mode"),
                batch_size=c.best.get("batch_size"),
                perplexity=c.best["perplexity"],
            )
        out.append(row)
    return out


def quality_line(row: dict) -> str:
    """One line for the terminal and the report: ``model: cheapest precision within 1 % of bf16's perplexity ...``."""
    target = f"perplexity at most {100 * (TARGET_RATIO - 1):.0f} % above {row['reference']}'s {row['reference_perplexity']:.3f}"
    if row["precision"] is None:
        return f"{row['model']}: no precision meets the target ({target})"
    missed = f"; above it: {', '.join(row['missed'])}" if row["missed"] else ""
    return (
        f"{row['model']}: cheapest precision meeting the target ({target}): {row['precision']} ({row['mode']}, "
        f"batch {row['batch_size']}), perplexity {row['perplexity']:.3f}{missed}"
    )
