"""Standard CIFAR augmentation as data: a per-epoch plan, then crop + flip applied anywhere.

Augmentation: zero-pad by ``pad`` pixels, take a random ``S x S`` crop, flip horizontally with
probability 1/2 (He et al. 2016, s. 4.2, after Lee et al. 2015; torchvision ``RandomCrop(S,
padding=4)`` + ``RandomHorizontalFlip``). The random numbers for a whole epoch (sample order, crop
offsets, flips) are drawn up front from a generator seeded by ``(seed, epoch)``, so the DataLoader
workers, the GPU-resident path and a resumed run all see the same augmented batches.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class EpochPlan:
    """Random choices for one epoch over ``n`` samples.

    Attributes:
        order: int64 ``(n,)`` permutation: the sample order.
        offsets: int64 ``(n, 2)``: crop top-left (row, col) in the padded image, each in ``0..2*pad``,
            indexed by sample (not by position in ``order``).
        flips: bool ``(n,)``: horizontal flip per sample.
        pad: padding in pixels.
    """

    order: object
    offsets: object
    flips: object
    pad: int


def epoch_plan(n: int, seed: int, epoch: int, pad: int, augment: bool = True) -> EpochPlan:
    """Draw the plan for ``epoch`` (0-based) over ``n`` samples; ``augment=False`` gives centre crops, no flips."""
    import torch

    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(n, generator=g)
    if not augment:
        return EpochPlan(order, torch.full((n, 2), pad, dtype=torch.int64), torch.zeros(n, dtype=torch.bool), pad)
    offsets = torch.randint(0, 2 * pad + 1, (n, 2), generator=g)
    flips = torch.rand(n, generator=g) < 0.5
    return EpochPlan(order, offsets, flips, pad)


def crop_flip(images, offsets, flips, pad: int):
    """Apply padded crops and flips to a batch.

    Args:
        images: ``(B, C, H, W)`` tensor (any dtype, any device).
        offsets: int64 ``(B, 2)`` crop top-left in the padded image; flips: bool ``(B,)``.
        pad: zero padding on each side, pixels.
    Returns:
        ``(B, C, H, W)`` tensor on the images' device.
    """
    import torch
    import torch.nn.functional as F

    if pad == 0 and not bool(flips.any()):
        return images
    b, _, h, w = images.shape
    dev = images.device
    padded = F.pad(images, (pad, pad, pad, pad)) if pad else images
    offsets, flips = offsets.to(dev), flips.to(dev)
    rows = offsets[:, 0:1] + torch.arange(h, device=dev)  # (B, H)
    cols = offsets[:, 1:2] + torch.arange(w, device=dev)  # (B, W)
    cols = torch.where(flips[:, None], cols.flip(1), cols)
    bi = torch.arange(b, device=dev)[:, None, None]
    out = padded.permute(0, 2, 3, 1)[bi, rows[:, :, None], cols[:, None, :]]  # (B, H, W, C)
    return out.permute(0, 3, 1, 2).contiguous()


def scaled_pad(pad: int, image_size: int) -> int:
    """Padding for ``image_size`` given ``pad`` at 32x32 (4 px at 32 -> 28 px at 224)."""
    return round(pad * image_size / 32)
