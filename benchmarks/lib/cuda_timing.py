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


def seconds_per_call_graphed(fn, iters: int = 20, reps: int = 1, warm: int = 3) -> float:
    """As :func:`seconds_per_call`, with the ``iters`` calls captured in one CUDA graph and the graph replayed:
    no host launch cost, so a small kernel's own time (what a decode step's CUDA graph pays). ``fn`` must be
    capturable (no synchronisation, no host reads; a compiled function captured after its warm-up calls)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(iters):
            fn()
    return seconds_per_call(graph.replay, 1, reps, warm=1) / iters
