"""The options of ``accelbench run`` (the ``inference`` scenario's own settings), declared once
(:mod:`accelbench.core.options`); its accuracy inputs are :mod:`accelbench.core.options.evaluation`'s."""

from __future__ import annotations

from accelbench.core.options import Option, declare

INFERENCE = declare(
    Option(
        name="include_transfer",
        type=bool,
        default=False,
        panel="how",
        help="Time the host-to-device copy too (pinned host memory)",
    ),
    Option(
        name="calibration_images",
        type=int,
        low=1,
        default=512,
        help="Images that calibrate int8, disjoint from the measured ones",
    ),
)
