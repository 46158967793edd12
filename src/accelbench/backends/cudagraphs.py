"""The ``cudagraphs`` backend: the eager module captured once into a CUDA graph and replayed.

Warm-up runs on a side stream before capture, as the CUDA graphs section of the PyTorch CUDA semantics
notes requires. Each batch is copied into the static input buffer inside the timed region, as a server
would copy a request in.
"""

from __future__ import annotations

from accelbench.backends.base import Backend, register


class CudaGraphs(Backend):
    name = "cudagraphs"
    needs_cuda = True
    static_shapes = True

    def _build(self, module, example, device):
        import torch

        static_in = example.clone()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(3):
                module(static_in)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = module(static_in)

        def forward(x):
            static_in.copy_(x, non_blocking=True)
            graph.replay()
            return static_out

        forward.graph = graph  # keep the graph alive with the callable
        return forward


register(CudaGraphs())
