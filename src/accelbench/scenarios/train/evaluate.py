"""Evaluation of a classifier on a device-resident uint8 set: loss, top-1, top-5."""

from __future__ import annotations


def resident_images(raw_uint8, image_size: int, device, chunk: int = 512):
    """Resize uint8 ``(N, 3, H, W)`` images (or a list of ``(3, H_i, W_i)``) to ``(N, 3, S, S)`` (antialiased bilinear) on ``device``, kept uint8."""
    import torch
    from torchvision.transforms.v2.functional import resize

    if isinstance(raw_uint8, (list, tuple)):  # mixed sizes (accelbench.data.load_images): one at a time
        return torch.cat([resize(a[None].to(device), [image_size, image_size], antialias=True) for a in raw_uint8])
    if tuple(raw_uint8.shape[-2:]) == (image_size, image_size):
        return raw_uint8.to(device)
    out = torch.empty((raw_uint8.shape[0], 3, image_size, image_size), dtype=torch.uint8, device=device)
    for i in range(0, raw_uint8.shape[0], chunk):
        out[i : i + chunk] = resize(raw_uint8[i : i + chunk].to(device), [image_size, image_size], antialias=True)
    return out


def evaluate(module, images, labels, *, mean, std, precision: str, channels_last: bool, batch_size: int) -> dict:
    """Evaluate ``module`` (switched to eval mode and back to train mode) on ``images``.

    Args:
        images: uint8 ``(N, 3, S, S)`` on the module's device; labels: int64 ``(N,)`` there too.
    Returns:
        ``eval_loss`` (mean cross-entropy), ``eval_top1`` and ``eval_top5`` (fractions of N), ``eval_images``.
    """
    import torch
    import torch.nn.functional as F

    from accelbench import precisions
    from accelbench.core.stats import topk_correct
    from accelbench.scenarios.train.datasets import normalize

    dev = images.device
    dtype = precisions.input_dtype(precision)
    loss_sum = torch.zeros((), device=dev, dtype=torch.float64)
    hits = {1: 0, 5: 0}
    module.eval()
    try:
        with torch.no_grad(), precisions.context(precision, dev, inference=False):
            for s in range(0, images.shape[0], batch_size):
                x = normalize(images[s : s + batch_size], mean, std, dtype, channels_last)
                y = labels[s : s + batch_size]
                logits = module(x).float()
                loss_sum += F.cross_entropy(logits, y, reduction="sum").double()
                for k, v in topk_correct(logits, y).items():
                    hits[k] += v
    finally:
        module.train()
    n = images.shape[0]
    return {"eval_loss": loss_sum.item() / n, "eval_top1": hits[1] / n, "eval_top5": hits[5] / n, "eval_images": n}
