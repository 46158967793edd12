"""``torch.compile`` backends: ``compile`` (Inductor's default mode) and ``max-autotune``.

Each case starts from a fresh compile cache (``torch._dynamo.reset()``): no recompile limit is hit and
no case reuses another's artifacts, so ``compile_s`` is the case's own compilation time.
"""

from __future__ import annotations

import time

from accelbench.backends.base import Backend, register


class Compile(Backend):
    """``torch.compile(module, mode=compile_mode, dynamic=False)``."""

    trainable = True
    static_shapes = True

    def __init__(self, name: str, compile_mode: str | None, trainable: bool = True):
        self.name, self.compile_mode, self.trainable = name, compile_mode, trainable

    quant_kernels = "int8: Inductor with freezing (oneDNN int8 kernels, packed weights)"

    def _compiled(self, model):
        import torch

        torch._dynamo.reset()
        return torch.compile(model, mode=self.compile_mode, dynamic=False)

    @staticmethod
    def _freezing(module):
        """Inductor freezing while a PT2E-quantized module compiles: the int8 weight packing needs it (PyTorch
        tutorial "PyTorch 2 Export Quantization with X86 Backend through Inductor"); float models compile as
        before."""
        import torch._inductor.config as inductor_config

        from accelbench.quant.pt2e import FREEZE_ATTR

        return inductor_config.patch(freezing=bool(getattr(module, FREEZE_ATTR, False)))

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


register(Compile("compile", None))
# max-autotune trains in principle, but autotuning a backward pass costs many minutes per case: inference only
register(Compile("max-autotune", "max-autotune", trainable=False))
