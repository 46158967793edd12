"""Execution backends: how a model's forward pass (and a training step's model) is run.

| name | what | source |
| --- | --- | --- |
| eager | the module called directly | |
| compile | ``torch.compile(module, dynamic=False)`` (Inductor, default mode) | torch.compile docs |
| max-autotune | ``torch.compile(..., mode="max-autotune")``: Triton GEMM/conv autotuning, CUDA graphs | torch.compile docs |
| compile-freeze, reduce-overhead(-freeze), max-autotune-freeze, max-autotune-no-cudagraphs | the other compile modes, with or without Inductor freezing (``compile.py``) | torch.compile docs |
| onnxruntime | ``torch.onnx`` export run by an onnxruntime ``InferenceSession`` on the best execution provider (``ort_provider``); int8 through onnxruntime's QDQ quantization | onnxruntime docs |
| cudagraphs | the eager module captured once into a ``torch.cuda.CUDAGraph`` and replayed; each batch is copied into the static input buffer inside the timed region, as a server would; training: the whole step in one graph | PyTorch CUDA semantics, "CUDA Graphs" |
| compile-cudagraphs | the default-mode compiled module captured the same way (training: the whole step, compiled forward and backward, fused optimizer) | same |

A backend is one file here plus one line in :data:`BACKENDS` (see ``docs/extending.md``). Everything
else asks the registry: the names a spec accepts, what can train, what needs a GPU.
"""

from accelbench.backends.base import BACKENDS, Backend, get, names, register
from accelbench.backends import eager, compile, cudagraphs, onnxruntime, generation  # noqa: E402,F401  (each registers itself: one line each)

__all__ = ["BACKENDS", "Backend", "get", "names", "register"]
