"""Accuracy of a reduced precision beside the fp32 reference of the same model on the same images."""

from __future__ import annotations

from accelbench.core.errors import OK

# MLPerf Inference's closed-division accuracy target for image classification (ResNet-50): at least 99 % of
# the FP32 reference top-1 (MLPerf Inference rules, "Benchmarks" table; Reddi et al. 2020, table I).
TARGET_RATIO = 0.99


def accuracy_columns(top1: float | None, top1_ref: float | None, ratio: float = TARGET_RATIO) -> dict:
    """``top1_fp32_ref``, ``top1_delta_pts`` (percentage points, negative: worse) and ``accuracy_target_met``
    (``top1 >= ratio * top1_ref``); empty without both accuracies (fractions in 0..1)."""
    if top1 is None or top1_ref is None:
        return {}
    return {
        "top1_fp32_ref": top1_ref,
        "top1_delta_pts": (top1 - top1_ref) * 100.0,
        "accuracy_target_met": bool(top1 >= ratio * top1_ref),
    }


def fp32_reference(rows: list[dict]) -> float | None:
    """A model's fp32 top-1 among its rows: an fp32 case's top-1 (the one measured on the most images), else the
    reference a quantized case computed (``top1_fp32_ref``)."""
    from accelbench import precisions

    plain = [r for r in rows if r.get("top1") is not None and precisions.is_reference(str(r.get("precision")))]
    if plain:
        return max(plain, key=lambda r: r.get("accuracy_samples") or 0)["top1"]
    refs = [r["top1_fp32_ref"] for r in rows if r.get("top1_fp32_ref") is not None]
    return refs[0] if refs else None


def cheapest_meeting_target(records, ratio: float = TARGET_RATIO) -> list[dict]:
    """Per model: the cheapest measured case whose top-1 is at least ``ratio`` of the model's fp32 top-1 (the search
    is :func:`accelbench.core.targets.cheapest_meeting`, top-1 higher-is-better).

    Cheapest: the lowest ``cost_per_1000_samples_usd``, else (no price) the highest ``throughput_samples_per_s``.
    Candidates: ``ok`` rows with a top-1 and a speed figure whose numerics are not simulated (a simulated row has
    no speed; an eager int8 row times reference ops, not int8 kernels); a row's own ``accuracy_target_met`` is
    used where it has one, else the rule against :func:`fp32_reference`. A row whose outputs held NaN or inf
    (``outputs_finite`` false) is never a candidate nor a reference: its top-1 scores broken numerics.

    Returns:
        One dict per model with accuracy: ``model``, ``precision``, ``mode``, ``batch_size``, ``by`` (the column
        ranked), ``value``, ``top1``, ``top1_fp32_ref``, ``top1_delta_pts``, ``missed`` (precisions below target);
        ``precision`` None when no case meets the target (or no fp32 reference exists).
    """
    from accelbench.core.rundata import is_detail
    from accelbench.core.targets import Target, cheapest_meeting

    def reference(rows):
        ref = fp32_reference(rows)
        return None if ref is None else ("fp32", ref)

    target = Target(
        metric="top1",
        higher_is_better=True,
        ratio=ratio,
        reference=reference,
        speed="throughput_samples_per_s",
        verdict="accuracy_target_met",
        include=lambda r: not is_detail(r) and r.get("outputs_finite") != 0,
        candidate=lambda r: (
            r.get("status") == OK and not r.get("simulated") and r.get("throughput_samples_per_s") is not None
        ),
    )
    out = []
    for c in cheapest_meeting(records, target):
        row = {
            "model": c.model,
            "precision": None,
            "mode": None,
            "batch_size": None,
            "by": c.by,
            "value": c.value,
            "top1": None,
            "top1_fp32_ref": c.reference_value,
            "top1_delta_pts": None,
            "missed": c.missed,
        }
        if c.best is not None:
            row.update(
                precision=c.best.get("precision"),
                mode=c.best.get("mode"),
                batch_size=c.best.get("batch_size"),
                top1=c.best["top1"],
                top1_delta_pts=(c.best["top1"] - c.reference_value) * 100,
            )
        out.append(row)
    return out
