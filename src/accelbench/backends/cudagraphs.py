"""The ``cudagraphs`` backend: the eager module captured once into a CUDA graph and replayed.

Inference: warm-up runs on a side stream before capture, as the CUDA graphs section of the PyTorch CUDA
semantics notes requires. Each batch is copied into the static input buffer inside the timed region, as a
server would copy a request in.

Training: the whole step (forward, loss, backward, GradScaler, fused optimizer step) is captured into one
graph ("whole-network capture" in the same notes; MLPerf Training's ResNet-50 submissions do the same) by
:class:`accelbench.training.step.TrainStep`: the module itself stays eager here (``step_graph``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager

from accelbench.backends.base import INFERENCE, TRAIN, Backend, register

# Warm-up calls before a capture: cuDNN/cuBLAS handles, lazy module state, cuDNN benchmark's algorithm search and
# (compiled modules) compilation happen outside the graph (PyTorch CUDA semantics, "CUDA Graphs": "warmup").
WARMUP_CALLS = 3


@contextmanager
def side_stream(device):
    """Run the block on a fresh side stream that waits for the current one, which then waits for it: where warm-up
    before a capture runs (PyTorch CUDA semantics, "CUDA Graphs": warm-up on a side stream)."""
    import torch

    current = torch.cuda.current_stream(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(current)
    with torch.cuda.stream(side):
        yield
    current.wait_stream(side)


def capture_forward(fn: Callable, example, device) -> Callable:
    """``fn`` (a module or compiled module) captured on ``example`` ``(B, ...)`` into a CUDA graph, after
    :data:`WARMUP_CALLS` calls on a side stream.

    Returns:
        ``forward(x) -> out``: copies ``x`` (same shape as ``example``) into the static input and replays; ``out``
        is the graph's static output, overwritten by the next call.
    """
    import torch

    static_in = example.clone()
    with side_stream(device):
        for _ in range(WARMUP_CALLS):
            fn(static_in)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fn(static_in)

    def forward(x):
        static_in.copy_(x, non_blocking=True)
        graph.replay()
        return static_out

    forward.graph = graph  # keep the graph alive with the callable
    return forward


class CudaGraphs(Backend):
    name = "cudagraphs"
    about = (
        "the eager module captured once into a torch.cuda.CUDAGraph and replayed (training: the whole step); "
        'PyTorch CUDA semantics, "CUDA Graphs"'
    )
    workloads = (INFERENCE, TRAIN)
    needs_cuda = True
    static_shapes = True
    graph_capture = True
    step_graph = True
    tune = ("cuda latency", "cuda train")

    def _build(self, module, example, device):
        return capture_forward(module, example, device)

    def wrap_training(self, model):
        return model  # eager; TrainStep captures the whole step


register(CudaGraphs())
