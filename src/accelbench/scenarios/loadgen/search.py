"""The highest Server QPS that is VALID, by bisection.

MLPerf asks for the largest target QPS at which the Server scenario's latency bound holds (LoadGen's
FindPeakPerformance mode searches for it with full-length runs). Here each probe is one short Server test
at a target QPS, and the interval ``[lo, hi]`` (``lo`` VALID or 0, ``hi`` INVALID or the capacity bound)
is halved ``steps`` times, starting from the capacity bound's midpoint: the answer is within
``upper / 2**(steps + 1)`` of the boundary, 0.8 % of the capacity bound with the default 6 steps. The
capacity bound is the batch's own rate, ``max_batch / forward time``: a server cannot answer faster than its
largest batch runs back to back (and Poisson arrivals at that rate queue without bound, so it is not probed).

Pure: ``probe(qps) -> (valid, result)`` does the measuring.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Search:
    """A finished search.

    Attributes:
        best_qps / best: the highest VALID target and its result (None when no probe was VALID).
        lowest_invalid_qps: the lowest INVALID target (None when every probe was VALID).
        probes: ``(qps, valid)`` in the order run.
    """

    best_qps: float | None = None
    best: Any = None
    lowest_invalid_qps: float | None = None
    probes: list[tuple[float, bool]] = field(default_factory=list)
    results: list[Any] = field(default_factory=list)
    floor_reached: bool = False  # the next probe would have been below ``lowest_qps``: the search stopped there


def find_peak_qps(
    probe: Callable[[float], tuple[bool, Any]], upper_qps: float, steps: int = 6, lowest_qps: float = 0.0
) -> Search:
    """Bisect ``(0, upper_qps)`` for the highest target QPS ``probe`` calls VALID: each probe at the
    midpoint of the current ``[lo, hi]``, ``steps`` times, none below ``lowest_qps`` (a test at a lower rate
    would run past its time bound: :func:`accelbench.scenarios.loadgen.settings.slowest_server_qps`; the search stops).

    Args:
        probe: runs one Server test at a target QPS; returns ``(valid, result)``.
        upper_qps: the capacity bound (> 0).
        steps: probes to run (>= 1).
        lowest_qps: the lowest rate worth a probe.
    Raises:
        ValueError: ``upper_qps <= 0`` or ``steps < 1``.
    """
    if not upper_qps > 0 or steps < 1:
        raise ValueError(f"need upper_qps > 0 and steps >= 1, got {upper_qps}, {steps}")
    out = Search()
    lo, hi = 0.0, upper_qps
    for _ in range(steps):
        qps = (lo + hi) / 2
        if qps < lowest_qps:
            out.floor_reached = True
            break
        valid, result = probe(qps)
        out.probes.append((qps, valid))
        out.results.append(result)
        if valid:
            lo, out.best_qps, out.best = qps, qps, result
        else:
            hi = out.lowest_invalid_qps = qps
    return out
