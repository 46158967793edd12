"""Execution modes: how a model's forward pass (and a training step's model) is run, each a backend (:data:`BACKENDS`);
how a language model generates, each an engine (:data:`accelbench.backends.engine.ENGINES`, the table of
:mod:`accelbench.backends.generation`). ``--modes`` names either (:mod:`accelbench.backends.modes`).

| name | what | source |
| --- | --- | --- |
| eager | the module called directly | |
| compile | ``torch.compile(module, dynamic=False)`` (Inductor, default mode) | torch.compile docs |
| compile-freeze | the same with Inductor freezing (inference only) | torch.compile docs |
| reduce-overhead | ``mode="reduce-overhead"``: CUDA graph trees of the compiled forward (and backward) | torch.compile docs |
| reduce-overhead-freeze | the same with Inductor freezing (inference only) | torch.compile docs |
| max-autotune | ``mode="max-autotune"``: Triton GEMM/conv autotuning, CUDA graphs | torch.compile docs |
| max-autotune-freeze | the same with Inductor freezing | torch.compile docs |
| max-autotune-no-cudagraphs | ``mode="max-autotune-no-cudagraphs"`` | torch.compile docs |
| compile-cudagraphs | the default-mode compiled module captured into one CUDA graph by hand (training: the whole step, compiled forward and backward, fused optimizer) | PyTorch CUDA semantics, "CUDA Graphs" |
| cudagraphs | the eager module captured once into a ``torch.cuda.CUDAGraph`` and replayed; each batch is copied into the static input buffer inside the timed region, as a server would; training: the whole step in one graph | same |
| onnxruntime | ``torch.onnx`` export run by an onnxruntime ``InferenceSession`` on the best execution provider (``ort_provider``); int8 through onnxruntime's QDQ quantization | onnxruntime docs |

(``tests/test_registries.py`` checks this table, and the README's generated one, against :data:`BACKENDS`.)

A backend is one file here (see ``docs/extending.md``): the built-in files are imported below in the order help
lists them; any other module of this folder is imported after them (a drop-in file registers itself), then the
backends and engines of installed distributions (entry point group ``accelbench.backends``,
:mod:`accelbench.core.plugins`; :func:`accelbench.backends.modes.adopt` puts each in its registry).
Everything else asks the registry and the backends' attributes: the names a spec accepts, what can train, what
needs a GPU, what compiles, what ``tune`` tries.
"""

# The import order is the registration order: help lists the backends in it.
# isort: off
from accelbench.backends.base import BACKENDS, Backend, get, reference, register
from accelbench.backends.modes import adopt, mode, names
from accelbench.backends import eager, compile, cudagraphs, onnxruntime  # noqa: E402,F401  (built-ins, in help's order)
from accelbench.backends import generation  # noqa: E402,F401  (language models: accelbench generate)
from accelbench.core import plugins as _plugins  # noqa: E402

# isort: on

_plugins.import_drop_ins(__name__, __path__)
_plugins.load("accelbench.backends", adopt)

__all__ = ["BACKENDS", "Backend", "get", "mode", "names", "reference", "register"]
