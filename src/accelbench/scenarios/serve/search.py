"""The highest load that meets a service-level objective, by bisection (``accelbench serve --slo-search``).

Serving systems are sized by the largest request rate (or number of requests in flight) at which a percentile of
TTFT and TPOT stays within a limit (MLPerf Inference's Server scenario for LLMs; DistServe's goodput, Zhong et al.
2024). Each probe runs one load level and asks :func:`accelbench.scenarios.serve.metrics.meets`; the interval
``[lo, hi]`` between the user's bounds is searched as MLPerf's LoadGen searches Server QPS
(:mod:`accelbench.scenarios.loadgen.search`): the upper bound first (meeting it ends the search: the answer is the
bound), then the lower (missing it ends the search: no load in the bounds meets the objective), then ``steps``
midpoints, each moving ``lo`` (met) or ``hi`` (missed). After ``k`` midpoints the boundary is within
``(hi - lo) / 2**k`` of the answer; a concurrency search stops when ``hi - lo`` is 1 (no integer lies between).

Pure: ``probe(load) -> (met, result)`` does the measuring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Search:
    """A finished search.

    Attributes:
        best / best_result: the highest load probed that met the objective and its result (None: none met).
        lowest_missed: the lowest load probed that missed it (None: every probe met it).
        probes: ``(load, met)`` in the order run.
    """

    best: float | None = None
    best_result: Any = None
    lowest_missed: float | None = None
    probes: list[tuple[float, bool]] = field(default_factory=list)


def bisect_load(
    probe: Callable[[float], tuple[bool, Any]], lo: float, hi: float, steps: int = 4, integer: bool = False
) -> Search:
    """Search ``[lo, hi]`` for the highest load ``probe`` says meets the objective (see the module docstring).

    Args:
        probe: runs one level at a load; returns ``(met, result)``.
        lo, hi: the bounds (``0 < lo <= hi``); with ``lo == hi`` one probe answers.
        steps: midpoints probed at most after the two bounds (>= 0).
        integer: loads are whole numbers (a concurrency): midpoints are rounded down, and the search stops
            when no integer lies between ``lo`` and ``hi``.
    Raises:
        ValueError: bounds out of order or not positive, or ``steps < 0``.
    """
    if not (0 < lo <= hi) or steps < 0:
        raise ValueError(f"need 0 < lo <= hi and steps >= 0, got lo={lo}, hi={hi}, steps={steps}")
    out = Search()

    def run(load: float) -> bool:
        met, result = probe(load)
        out.probes.append((load, met))
        if met and (out.best is None or load > out.best):
            out.best, out.best_result = load, result
        if not met and (out.lowest_missed is None or load < out.lowest_missed):
            out.lowest_missed = load
        return met

    if run(hi) or lo == hi or not run(lo):
        return out
    for _ in range(steps):
        mid = (lo + hi) // 2 if integer else (lo + hi) / 2
        if integer and mid <= lo:
            break
        if run(mid):
            lo = mid
        else:
            hi = mid
    return out
