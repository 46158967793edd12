"""Learning-rate schedules as pure functions of the step number (so a resumed run needs no scheduler state).

- Linear warm-up from ``peak / warmup_steps`` to ``peak`` over the first ``warmup_steps`` steps
  ("gradual warmup", Goyal et al. 2017, s. 2.2).
- ``cosine``: ``peak * 0.5 * (1 + cos(pi * t))`` with ``t`` the fraction of post-warm-up steps done
  (SGDR without restarts, Loshchilov & Hutter 2017, eq. 5 with eta_min = 0).
- ``step``: ``peak`` divided by 10 at 50 % and again at 75 % of all steps (He et al. 2016, s. 4.2:
  lr 0.1, /10 at 32k and 48k of 64k iterations).
"""

from __future__ import annotations

import math


def lr_at(step: int, total_steps: int, peak_lr: float, warmup_steps: int = 0, kind: str = "cosine") -> float:
    """Learning rate for 0-based ``step`` of ``total_steps``.

    Raises:
        ValueError: unknown ``kind`` or ``total_steps`` < 1.
    """
    if total_steps < 1:
        raise ValueError("total_steps must be >= 1")
    if step < warmup_steps:
        return peak_lr * (step + 1) / warmup_steps
    if kind == "cosine":
        span = max(total_steps - warmup_steps, 1)
        return peak_lr * 0.5 * (1 + math.cos(math.pi * min(step - warmup_steps, span) / span))
    if kind == "step":
        return peak_lr * (0.1 ** sum(step >= m for m in (total_steps // 2, (3 * total_steps) // 4)))
    raise ValueError(f"unknown schedule {kind!r}: use cosine or step")
