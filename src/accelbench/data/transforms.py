"""The evaluation transform: how raw images become a model's square input (resize, then center crop).

Evaluation transforms in the field resize the shorter side to ``floor(size / crop_pct)`` and center-crop
``size`` (timm ``transforms_factory.transforms_imagenet_eval``; torchvision's ``ImageClassification`` preset,
e.g. ResNet-50 V1 weights: resize 256, crop 224, crop_pct 0.875). Without a crop fraction (CIFAR-native
models, a user model given none) images are resized straight to ``size x size`` as before.

Pure code at import; :func:`apply` imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from accelbench.core.errors import ConfigError

INTERPOLATIONS = ("bilinear", "bicubic", "nearest")


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalTransform:
    """One evaluation transform.

    Attributes:
        size: output side S in pixels (the model's input).
        resize: shorter-side target in pixels before the crop; None: resize straight to ``S x S`` (no crop).
        interpolation: ``bilinear``, ``bicubic`` or ``nearest`` (antialiased when shrinking, except nearest).
    """

    size: int
    resize: int | None = None
    interpolation: str = "bilinear"

    def describe(self) -> str:
        """One line for the row's ``transform`` column, e.g. ``resize 256 bilinear, center-crop 224``."""
        if self.resize is None:
            return f"resize {self.size}x{self.size} {self.interpolation}, no crop"
        return f"resize {self.resize} {self.interpolation}, center-crop {self.size}"


def resolve(
    size: int,
    *,
    resize: int | None = None,
    crop_pct: float | None = None,
    model_crop_pct: float | None = None,
    interpolation: str | None = None,
) -> EvalTransform:
    """The transform of a case: the user's ``resize``/``crop_pct`` first, else the model's crop fraction.

    Args:
        size: the model's input side S (pixels).
        resize: ``--resize``: shorter side before the crop (pixels, >= S).
        crop_pct: ``--crop-pct``: S / shorter side, in (0, 1]; the resize is ``floor(S / crop_pct)`` (timm).
        model_crop_pct: the model's own crop fraction (timm ``pretrained_cfg``, torchvision weights), or None.
        interpolation: the model's interpolation (default bilinear).
    Raises:
        ConfigError: a resize smaller than S, or an unknown interpolation.
    """
    interp = interpolation or "bilinear"
    if interp not in INTERPOLATIONS:
        raise ConfigError("interpolation", interp, ", ".join(INTERPOLATIONS))
    pct = crop_pct if crop_pct is not None else model_crop_pct
    if resize is None and pct is not None:
        resize = int(math.floor(size / pct + 1e-6))  # + eps: 224 / (224/256) must give 256, not 255
    if resize is not None and resize < size:
        raise ConfigError("resize", resize, f"an integer >= the input size {size}")
    return EvalTransform(size=size, resize=resize, interpolation=interp)


def apply(x, t: EvalTransform):
    """Apply ``t`` to a batch.

    Args:
        x: float tensor ``(N, 3, H, W)`` on the 0..1 scale.
    Returns:
        float tensor ``(N, 3, S, S)``.
    """
    from torchvision.transforms import InterpolationMode
    from torchvision.transforms.v2.functional import center_crop, resize

    mode = InterpolationMode(t.interpolation)
    anti = t.interpolation != "nearest"
    if t.resize is None:
        if tuple(x.shape[-2:]) == (t.size, t.size):
            return x
        return resize(x, [t.size, t.size], interpolation=mode, antialias=anti)
    if min(x.shape[-2:]) != t.resize:
        x = resize(x, t.resize, interpolation=mode, antialias=anti)  # an int: the shorter side
    return center_crop(x, [t.size, t.size])
