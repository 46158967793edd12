"""The eager backend: the module called directly."""

from __future__ import annotations

from accelbench.backends.base import INFERENCE, TRAIN, Backend, register


class Eager(Backend):
    name = "eager"
    about = "the module called directly"
    workloads = (INFERENCE, TRAIN)
    compiles = False
    tune = ("cpu", "cuda train")

    def build(self, module, example, device):
        return module, None

    def wrap_training(self, model):
        return model


register(Eager())
