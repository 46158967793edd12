"""Accuracy of a reduced precision beside the fp32 reference of the same model on the same images."""

from __future__ import annotations

# MLPerf Inference's closed-division accuracy target for image classification (ResNet-50): at least 99 % of
# the FP32 reference top-1 (MLPerf Inference rules, "Benchmarks" table; Reddi et al. 2020, table I).
TARGET_RATIO = 0.99


def accuracy_columns(top1: float | None, top1_ref: float | None, ratio: float = TARGET_RATIO) -> dict:
    """``top1_fp32_ref``, ``top1_delta_pts`` (percentage points, negative: worse) and ``accuracy_target_met``
    (``top1 >= ratio * top1_ref``); empty without both accuracies (fractions in 0..1)."""
    if top1 is None or top1_ref is None:
        return {}
    return {"top1_fp32_ref": top1_ref, "top1_delta_pts": (top1 - top1_ref) * 100.0,
            "accuracy_target_met": bool(top1 >= ratio * top1_ref)}
