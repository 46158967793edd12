"""Execution modes: how the forward pass is run.

| mode | what | source |
| --- | --- | --- |
| eager | the module called directly | |
| compile | ``torch.compile(module, dynamic=False)`` (Inductor, default mode) | torch.compile docs |
| max-autotune | ``torch.compile(..., mode="max-autotune")``: Triton GEMM/conv autotuning, CUDA graphs | torch.compile docs |
| cudagraphs | eager module captured once into a ``torch.cuda.CUDAGraph`` and replayed; each batch is copied into the static input buffer inside the timed region, as a server would | PyTorch CUDA semantics, "CUDA Graphs" |

``build(mode, module, example, device)`` returns ``(forward, compile_s)``: a callable ``forward(x) -> logits``
and the wall seconds the first call took (compilation or graph capture included; None for eager).
Call it inside the precision's forward context (autocast must be active during capture/tracing).
"""

from __future__ import annotations

import time
from typing import Callable

MODES = ("eager", "compile", "max-autotune", "cudagraphs")


def unsupported_reason(mode: str, device) -> str | None:
    """Why ``mode`` cannot run on ``device`` (torch.device), or None."""
    if mode == "cudagraphs" and device.type != "cuda":
        return "cudagraphs needs a CUDA GPU (CUDA graph replay)"
    return None


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(mode: str, module, example, device) -> tuple[Callable, float | None]:
    """Wrap ``module`` for ``mode`` and run it once on ``example`` (a batch on ``device``).

    Returns:
        ``(forward, compile_s)``; compile_s is the first call's wall time in seconds (for compiled
        modes: tracing + code generation + autotuning + one execution), None for eager.
    Raises:
        ValueError: unknown mode. Any compilation or capture error propagates.
    """
    import torch

    if mode == "eager":
        return module, None
    t0 = time.perf_counter()
    if mode in ("compile", "max-autotune"):
        torch._dynamo.reset()  # a fresh cache per case: no recompile limit hit, no cross-case reuse
        fn = torch.compile(module, mode="max-autotune" if mode == "max-autotune" else None, dynamic=False)
        fn(example)
        _sync(device)
        return fn, time.perf_counter() - t0
    if mode == "cudagraphs":
        fn = _capture_graph(module, example, device)
        return fn, time.perf_counter() - t0
    raise ValueError(f"unknown mode {mode!r}")


def _capture_graph(module, example, device) -> Callable:
    import torch

    static_in = example.clone()
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up on a side stream, as the CUDA graphs docs require
        for _ in range(3):
            module(static_in)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = module(static_in)
    _sync(device)

    def forward(x):
        static_in.copy_(x, non_blocking=True)
        graph.replay()
        return static_out

    forward.graph = graph  # keep the graph alive with the callable
    return forward
