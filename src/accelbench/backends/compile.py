"""``torch.compile`` backends: one per Inductor compile mode, each with and without Inductor freezing.

| name | ``mode=`` | freezing |
| --- | --- | --- |
| compile / compile-freeze | default | off / on |
| reduce-overhead / reduce-overhead-freeze | ``reduce-overhead`` (CUDA graphs) | off / on |
| max-autotune / max-autotune-freeze | ``max-autotune`` (Triton autotuning, CUDA graphs) | off / on |
| max-autotune-no-cudagraphs | ``max-autotune-no-cudagraphs`` | off |
| compile-cudagraphs | default, then captured by hand into one ``torch.cuda.CUDAGraph`` | off |

``compile-cudagraphs`` captures the compiled forward (inference) or the whole training step with the compiled
forward and backward, loss, GradScaler and fused optimizer step (training: ``step_graph``, see
:mod:`accelbench.training.step`) into one CUDA graph, without ``reduce-overhead``'s CUDA graph trees, which graph
the compiled forward and backward only and leave the optimizer step eager.

Freezing (``torch._inductor.config.freezing``) constant-folds the weights into the graph and folds batch norm
into the convolutions: inference only (the module must not train; torch.compile docs, "Inductor freezing"),
so the ``-freeze`` backends do not train. Every row records ``compile_mode`` and ``freezing``
(:meth:`accelbench.backends.base.Backend.options`).

Each case starts from a fresh compile cache (``torch._dynamo.reset()``): no recompile limit is hit and
no case reuses another's artifacts, so ``compile_s`` is the case's own compilation time.
"""

from __future__ import annotations

import time

from accelbench.backends.base import INFERENCE, TRAIN, Backend, register

# Inductor's modes that replay CUDA graphs on a CUDA device (torch.compile docs); only reduce-overhead needs one
GRAPH_MODES = ("reduce-overhead", "max-autotune")


class Compile(Backend):
    """``torch.compile(module, mode=compile_mode, dynamic=False)``."""

    static_shapes = True

    def __init__(
        self,
        name: str,
        compile_mode: str | None,
        *,
        trainable: bool = True,
        freezing: bool = False,
        about: str = "",
        tune: tuple[str, ...] = (),
    ):
        self.name, self.compile_mode, self.freezing, self.tune = name, compile_mode, freezing, tune
        self.workloads = (INFERENCE, TRAIN) if trainable else (INFERENCE,)
        self.graph_capture = compile_mode in GRAPH_MODES
        self.needs_cuda = compile_mode == "reduce-overhead"  # CUDA graphs; max-autotune also runs on CPU
        mode = f'mode="{compile_mode}"' if compile_mode else "default mode"
        self.about = about or f"torch.compile, {mode}" + (", Inductor freezing" if freezing else "")

    quant_kernels = "int8: Inductor with freezing (oneDNN int8 kernels, packed weights)"

    def _compiled(self, model):
        import torch

        torch._dynamo.reset()
        return torch.compile(model, mode=self.compile_mode, dynamic=False)

    def _freezing(self, module):
        """Inductor freezing while the module compiles: for a ``-freeze`` backend, and for a PT2E-quantized
        module (the int8 weight packing needs it: PyTorch tutorial "PyTorch 2 Export Quantization with X86
        Backend through Inductor")."""
        import torch._inductor.config as inductor_config

        from accelbench.quant.pt2e import FREEZE_ATTR

        return inductor_config.patch(freezing=self.freezing or bool(getattr(module, FREEZE_ATTR, False)))

    def options(self) -> dict:
        return {"compile_mode": self.compile_mode or "default", "freezing": self.freezing}

    def _build(self, module, example, device):
        fn = self._compiled(module)
        with self._freezing(module):
            fn(example)
        return fn

    def build_sizes(self, module, examples, device):
        """One compiled module specialised to each example's shape (Dynamo recompiles per shape; its
        recompile limit is raised to the number of shapes for this module)."""
        import torch._dynamo.config as dynamo_config

        from accelbench.core.timing import sync

        t0 = time.perf_counter()
        fn = self._compiled(module)
        name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"
        setattr(dynamo_config, name, max(getattr(dynamo_config, name), len(examples) + 1))
        with self._freezing(module):
            for x in examples:
                fn(x)
        sync(device)
        return {int(x.shape[0]): fn for x in examples}, time.perf_counter() - t0

    def wrap_training(self, model):
        return self._compiled(model)


class CompileCudaGraphs(Compile):
    """The default-mode compiled module captured into one CUDA graph (whole training steps: ``step_graph``)."""

    step_graph = True

    def __init__(self):
        super().__init__(
            "compile-cudagraphs",
            None,
            tune=("cuda train",),
            about="the default-mode compiled module captured into one CUDA graph by hand (training: the "
            "whole step with the fused optimizer)",
        )
        self.needs_cuda = self.graph_capture = True  # compile_mode "default" in the row; the mode name says the graph

    build_sizes = Backend.build_sizes  # one capture per batch size

    def _build(self, module, example, device):
        from accelbench.backends.cudagraphs import capture_forward

        fn = self._compiled(module)
        with self._freezing(module):
            return capture_forward(fn, example, device)


# tune: the compiled default everywhere; freezing and CUDA graphs for inference on CUDA, reduce-overhead's graphs of
# forward and backward for training (freezing does not train); max-autotune's minutes of autotuning only when asked
register(Compile("compile", None, tune=("cpu", "cuda throughput", "cuda train")))
register(Compile("compile-freeze", None, trainable=False, freezing=True, tune=("cuda inference",)))
register(Compile("reduce-overhead", "reduce-overhead", tune=("cuda train",)))
register(Compile("reduce-overhead-freeze", "reduce-overhead", trainable=False, freezing=True, tune=("cuda inference",)))
# max-autotune trains in principle, but autotuning a backward pass costs many minutes per case: inference only
register(Compile("max-autotune", "max-autotune", trainable=False))
register(Compile("max-autotune-freeze", "max-autotune", trainable=False, freezing=True))
register(Compile("max-autotune-no-cudagraphs", "max-autotune-no-cudagraphs", trainable=False))
register(CompileCudaGraphs())
