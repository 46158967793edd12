"""Generation backends (the ``generate`` scenario's ``--modes``): which loop runs a prefill and the decode steps.

| name | loop | what | source |
| --- | --- | --- | --- |
| hf-generate | ``model.generate`` | what users get: Hugging Face's default (dynamic) KV cache, greedy | transformers docs, "Generation" |
| static-cache | static-cache loop | a pre-allocated ``StaticCache``, the prefill and one eager decode step a token | transformers docs, "KV cache strategies" |
| static-compile | static-cache loop | the decode step ``torch.compile``-d; on CUDA ``mode="reduce-overhead"``: one CUDA graph a step | gpt-fast; PyTorch blog "Accelerating Generative AI with PyTorch II: GPT, Fast" |
| static-compile-fused | static-cache loop | the same with q/k/v and gate/up fused into one matmul each (Llama-like models) | gpt-fast ``wqkv``/``w1w3``; vLLM's merged projections |

The loops themselves are accelbench's (:mod:`accelbench.scenarios.generate.decode`): timing, warm-up and
synchronisation are the same for every backend.
"""

from __future__ import annotations

from accelbench.backends.base import Backend, register


class Generation(Backend):
    """A generation backend: ``loop`` (``generate`` or ``static``), ``compiles`` the decode step, ``fused``
    projections; ``host_bound`` unless it compiles. Serves the ``generate`` workload only."""

    workloads = ("generate",)
    loop = "static"
    fused = False
    tune = ()  # tune searches image models' inference and training: never a generation backend

    def __init__(self, name: str, loop: str, about: str, compiles: bool = False, fused: bool = False):
        self.name, self.loop, self.about, self.compiles, self.fused = name, loop, about, compiles, fused
        self.graph_capture = compiles  # on CUDA: torch.compile's reduce-overhead, one CUDA graph a decode step
        # an uncompiled loop dispatches every operator of every token from Python (batch 1: the host is the
        # bottleneck); a compiled step replays one CUDA graph a token
        self.host_bound = not compiles

    def options(self) -> dict:
        return {
            "compile_mode": ("reduce-overhead on CUDA, default on CPU" if self.compiles else None),
            "freezing": False,
            "fused_projections": self.fused,
        }


for backend in (
    Generation("hf-generate", "generate", "language models: Hugging Face generate with its default (dynamic) KV cache"),
    Generation(
        "static-cache", "static", "language models: a pre-allocated static KV cache, one eager decode step a token"
    ),
    Generation(
        "static-compile",
        "static",
        "language models: the static-cache decode step torch.compile-d (CUDA: one CUDA graph a step, as gpt-fast)",
        compiles=True,
    ),
    Generation(
        "static-compile-fused",
        "static",
        "language models: static-compile with q/k/v and gate/up fused into one matmul each",
        compiles=True,
        fused=True,
    ),
):
    register(backend)
