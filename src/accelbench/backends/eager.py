"""The eager backend: the module called directly."""

from __future__ import annotations

from accelbench.backends.base import Backend, register


class Eager(Backend):
    name = "eager"
    trainable = True

    def build(self, module, example, device):
        return module, None

    def wrap_training(self, model):
        return model


register(Eager())
