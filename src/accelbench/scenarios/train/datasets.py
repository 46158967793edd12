"""Training data: encoded images for a DataLoader (decoded in its workers) and a device-resident set.

Both produce uint8 ``(B, 3, S, S)`` batches already augmented with an :class:`EpochPlan`;
:func:`normalize` turns them into float model inputs on the device (a quarter of the bytes cross
PCIe as uint8, as DALI and FFCV also do).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from accelbench.core.errors import DataError
from accelbench.scenarios.train.augment import EpochPlan, crop_flip


@dataclass(frozen=True, slots=True)
class Encoded:
    """Encoded (PNG/JPEG) images held in memory.

    Attributes:
        blobs: list of encoded files (bytes), ``labels``: int64 ``(N,)``, ``classes``: names by label,
        description: one line naming the source, label_space: ``cifar10`` for bundled sets else ``folder``.
    """

    blobs: list
    labels: object
    classes: tuple[str, ...]
    description: str
    label_space: str
    names: tuple[str, ...] = ()
    bad_images: tuple[str, ...] = ()


def _identifies(blob: bytes) -> bool:
    """Pillow recognises the file's header (reads the header only: cheap for a whole dataset)."""
    import io

    from PIL import Image

    try:
        Image.open(io.BytesIO(blob))
    except Exception:  # any failure to identify: not an image we can decode
        return False
    return True


def load_encoded(data: str, n: int | None = None, skip_bad: bool = False) -> Encoded:
    """Read ``n`` (None: all) encoded images of a bundled set or ImageFolder, class-balanced as
    :func:`accelbench.data.load_images` picks them. Nothing is decoded, but every file's header must be
    one Pillow recognises (a file that is not an image fails here, before training, with its name).

    Args:
        skip_bad: drop files whose header is not an image (named in ``bad_images``) instead of raising.
    Raises:
        DataError: synthetic data (nothing to decode), a missing path, no images, or a file that is not
            an image (named).
    """
    import torch

    from accelbench import data as d

    if data == "synthetic":
        raise DataError("synthetic data has no files to decode: use cifar10-train-5k or an ImageFolder path")
    path = d.source_path(data)
    files = d.list_images(path)
    classes = tuple(sorted({c for c, _ in files}))
    chosen = d._balanced(files, classes, n or len(files))
    names = [f for _, f in chosen]
    blobs = d._read_archive(path, names) if path.is_file() else [Path(f).read_bytes() for f in names]
    shown = [d._display(path, f) for f in names]
    bad = [i for i, b in enumerate(blobs) if data not in d.BUNDLED and not _identifies(b)]
    if bad and not skip_bad:
        d.decode_rgb(blobs[bad[0]], shown[bad[0]])  # raises the one-line DataError naming the file
    keep = [i for i in range(len(blobs)) if i not in set(bad)]
    if not keep:
        raise DataError(f"none of the {len(blobs)} images chosen from {path} is an image file")
    labels = torch.tensor([classes.index(chosen[i][0]) for i in keep], dtype=torch.int64)
    space = "cifar10" if data in d.BUNDLED and classes == d.CIFAR10_CLASSES else "folder"
    desc = f"{data}: {len(keep)} of {len(files)} real images, {len(classes)} classes ({path.name})"
    if bad:
        desc += f", {len(bad)} undecodable skipped"
    return Encoded(
        [blobs[i] for i in keep],
        labels,
        classes,
        desc,
        space,
        tuple(shown[i] for i in keep),
        tuple(shown[i] for i in bad),
    )


def decode(blob: bytes, image_size: int | None = None, name: str = "an image"):
    """Decode one image with Pillow to uint8 ``(3, H, W)`` RGB, resized to ``image_size`` (antialiased
    bilinear) if given: the same decoder and resize as :func:`accelbench.data.load_images` uses.

    Raises:
        DataError: the bytes are not a decodable image (the message names ``name``).
    """
    import torch
    from torchvision.transforms.v2.functional import resize

    from accelbench.data import decode_rgb

    pil = decode_rgb(blob, name)
    img = torch.frombuffer(bytearray(pil.tobytes()), dtype=torch.uint8).view(pil.height, pil.width, 3).permute(2, 0, 1)
    if image_size is not None and tuple(img.shape[-2:]) != (image_size, image_size):
        img = resize(img, [image_size, image_size], antialias=True)
    return img.contiguous()


class DecodeDataset:
    """Map-style dataset: ``ds[i] -> (uint8 (3, S, S), label)`` decoded, resized and augmented.

    Call :meth:`set_plan` before each epoch (the DataLoader workers, created per epoch, copy it).
    """

    def __init__(self, enc: Encoded, image_size: int | None, plan: EpochPlan | None = None):
        self.enc, self.image_size, self.plan = enc, image_size, plan

    def set_plan(self, plan: EpochPlan) -> None:
        self.plan = plan

    def __len__(self) -> int:
        return len(self.enc.blobs)

    def __getitem__(self, i: int):
        name = self.enc.names[i] if self.enc.names else f"image {i}"
        img = decode(self.enc.blobs[i], self.image_size, name)
        if self.plan is not None:
            img = crop_flip(img[None], self.plan.offsets[i : i + 1], self.plan.flips[i : i + 1], self.plan.pad)[0]
        return img, self.enc.labels[i]


def make_loader(ds: DecodeDataset, order, batch_size: int, workers: int, pin: bool, drop_last: bool = True):
    """A ``torch.utils.data.DataLoader`` over ``ds`` in the sample ``order`` (a list or 1-d tensor)."""
    import torch

    return torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        sampler=[int(i) for i in order],
        num_workers=workers,
        pin_memory=pin,
        drop_last=drop_last,
        persistent_workers=False,
    )


@dataclass
class Resident:
    """A decoded, resized uint8 set ``images (N, 3, S, S)`` with ``labels (N,)`` on one device."""

    images: object
    labels: object

    def batches(self, plan: EpochPlan, batch_size: int, drop_last: bool = True):
        """Yield augmented ``(uint8 images, labels)`` batches on the device in the plan's order."""
        n = self.images.shape[0]
        stop = n - n % batch_size if drop_last else n
        order = plan.order.to(self.images.device)
        for s in range(0, stop, batch_size):
            idx = order[s : s + batch_size]
            yield (
                crop_flip(self.images[idx], plan.offsets[idx.cpu()], plan.flips[idx.cpu()], plan.pad),
                self.labels[idx],
            )


def resident_from_encoded(enc: Encoded, image_size: int | None, device) -> Resident:
    """Decode every image once (on the host) and keep the set on ``device``."""
    import torch

    imgs = torch.stack([decode(b, image_size) for b in enc.blobs])
    return Resident(imgs.to(device), enc.labels.to(device))


def normalize(images, mean, std, dtype=None, channels_last: bool = False):
    """uint8 ``(B, 3, S, S)`` -> float ``(B, 3, S, S)``: ``(x / 255 - mean) / std``, in ``dtype`` (default fp32)."""
    import torch

    m = torch.tensor(mean, device=images.device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=images.device).view(1, 3, 1, 1)
    x = (images.float().div_(255) - m).div_(s)
    x = x.to(dtype) if dtype is not None else x
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def num_outputs(module) -> int | None:
    """Out features of the module's last ``nn.Linear`` (the classifier), or None."""
    import torch

    linears = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return linears[-1].out_features if linears else None


def set_num_classes(module, n: int):
    """Replace the classifier head (``fc``, ``head``, ``heads.head``, ``classifier[-1]``) with a fresh
    ``Linear(in, n)`` when it has a different size; returns the module.

    Raises:
        DataError: no recognisable head and the output size differs from ``n``.
    """
    import torch

    if num_outputs(module) == n:
        return module
    if hasattr(module, "reset_classifier"):  # timm
        module.reset_classifier(n)
        return module
    for owner_path, attr in (("", "fc"), ("", "head"), ("heads", "head"), ("", "classifier")):
        owner = getattr(module, owner_path, None) if owner_path else module
        head = getattr(owner, attr, None)
        if isinstance(head, torch.nn.Sequential) and isinstance(head[-1], torch.nn.Linear):
            head[-1] = torch.nn.Linear(head[-1].in_features, n)
            return module
        if isinstance(head, torch.nn.Linear):
            setattr(owner, attr, torch.nn.Linear(head.in_features, n))
            return module
    raise DataError(f"cannot resize the classifier of {type(module).__name__} to {n} classes")
