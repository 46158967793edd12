"""A latency distribution as text: ``accelbench results --hist CASE`` (the stored per-batch latencies of a case, or a
generate case's inter-token latencies), as ``pytest-benchmark --benchmark-histogram`` and ``pyperf hist`` show one.

Bins are numpy's (:func:`numpy.histogram`, ``bins="auto"``: the larger of the Sturges and Freedman-Diaconis
estimates), capped at ``max_bins``; bars are scaled to the fullest bin.
"""

from __future__ import annotations

from collections.abc import Sequence


def bins(values: Sequence[float], max_bins: int = 20) -> tuple[list[float], list[int]]:
    """``(edges, counts)`` of ``values``: ``len(edges) == len(counts) + 1``.

    Raises:
        ValueError: no values.
    """
    import numpy as np

    v = np.asarray(values, dtype=float)
    if v.size == 0:
        raise ValueError("no values to bin")
    edges = np.histogram_bin_edges(v, bins="auto")
    if len(edges) - 1 > max_bins:
        edges = np.histogram_bin_edges(v, bins=max_bins)
    counts, edges = np.histogram(v, bins=edges)
    return [float(e) for e in edges], [int(c) for c in counts]


def lines(values: Sequence[float], unit: str = "ms", width: int = 40, max_bins: int = 20) -> list[str]:
    """The histogram as text lines: ``  1.21 .. 1.25 ms |########            37``, then the sample count, median
    and p99 (numpy's linear-interpolation percentiles)."""
    import numpy as np

    from accelbench.report.units import number

    edges, counts = bins(values, max_bins)
    top = max(counts) or 1
    labels = [f"{number(lo)} .. {number(hi)} {unit}" for lo, hi in zip(edges, edges[1:])]
    pad = max(len(x) for x in labels)
    out = [f"{lab:>{pad}} |{'#' * round(width * c / top):<{width}} {c:,}" for lab, c in zip(labels, counts)]
    v = np.asarray(values, dtype=float)
    return out + [
        f"{v.size:,} samples, p50 {number(float(np.percentile(v, 50)))} {unit}, "
        f"p99 {number(float(np.percentile(v, 99)))} {unit}"
    ]
