"""The benchmark scripts' CUDA-event timer of a call (one copy: ``llm_explore.py`` and ``gemv_8bit_probe.py`` use it).

Import from a script in ``benchmarks/`` (its folder is ``sys.path[0]``): ``from lib.cuda_timing import seconds_per_call``.
"""

from __future__ import annotations

import statistics


def seconds_per_call(fn, iters: int = 20, reps: int = 1, warm: int = 3) -> float:
    """Median over ``reps`` runs of the mean seconds a call of ``fn`` takes in ``iters`` back-to-back calls, timed by
    two CUDA events around each run (after ``warm`` untimed calls and a synchronisation). Measures the GPU's time
    for the queued calls; the host's launch cost shows where it exceeds the kernels' (small shapes)."""
    import torch

    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(iters):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / 1e3 / iters)
    return statistics.median(out)
