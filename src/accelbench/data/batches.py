"""Batches on the device, built before any timing: a per-sweep cache of decoded and normalised images, and
the cut into batches every scenario times."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Inputs:
    """Per-sweep cache of the decoded images and of the model inputs made from them (one size and
    normalisation at a time, to keep device memory for the model).

    Attributes:
        data, images, seed, skip_bad: as in the spec (``images`` None: all of the source).
        device: where the model inputs live.
    """

    data: str
    images: int | None
    seed: int
    device: Any
    skip_bad: bool = False
    raw: Any = None
    cache: dict = field(default_factory=dict)

    @classmethod
    def for_spec(cls, spec, device) -> Inputs:
        return cls(spec.data, spec.images, spec.seed, device, spec.skip_bad_images)

    def raw_images(self):
        """The decoded uint8 images and labels (:class:`accelbench.data.RawImages`), loaded once.

        Raises:
            DataError: the source cannot be read or an image does not decode (unless ``skip_bad``).
        """
        from accelbench.data import load_images

        if self.raw is None:
            self.raw = load_images(self.data, self.images or 10**9, seed=self.seed, skip_bad=self.skip_bad)
        return self.raw

    def get(self, size: int, mean, std, on_host: bool = False, transform=None):
        """float32 ``(N, 3, size, size)`` model inputs, normalised with ``mean``/``std``, on the device (or the host).

        ``transform``: an :class:`accelbench.data.transforms.EvalTransform` (None: resize to ``size x size``)."""
        from accelbench.data import load_images, to_model_input

        key = (size, tuple(mean), tuple(std), on_host, transform)
        if key not in self.cache:
            raw = self.raw_images()
            if raw.labels is None and raw.images.shape[-1] != size:  # synthetic: draw at the final size
                raw = load_images("synthetic", self.images or raw.images.shape[0], image_size=size, seed=self.seed)
            self.cache.clear()
            self.cache[key] = to_model_input(
                raw.images, size, mean, std, device="cpu" if on_host else self.device, transform=transform
            )
        return self.cache[key]


def make_batches(x_all, labels, batch_size: int, images: int, dtype, channels_last: bool, pin: bool = False):
    """Cut ``ceil(images / batch_size)`` full batches from ``x_all`` (cycling through it).

    Args:
        x_all: float ``(N, 3, S, S)`` inputs; labels: int64 ``(N,)`` or None.
    Returns:
        ``(batches, batch_labels, n_real)``: lists of tensors ``(B, 3, S, S)`` and ``(B,)`` (or None); ``n_real``
        is how many leading samples count for accuracy (the rest repeat earlier images).
    """
    import torch

    n_batches = math.ceil(images / batch_size)
    n_data = x_all.shape[0]
    idx = torch.arange(n_batches * batch_size) % n_data
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    batches, blabels = [], []
    for i in range(n_batches):
        sl = idx[i * batch_size : (i + 1) * batch_size].to(x_all.device)
        xb = x_all.index_select(0, sl).to(dtype).contiguous(memory_format=fmt)
        batches.append(xb.pin_memory() if pin else xb)
        blabels.append(labels[sl.cpu()] if labels is not None else None)
    return batches, blabels, min(images, n_data)
