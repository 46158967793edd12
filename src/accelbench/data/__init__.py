"""Input data: real CIFAR-10 test images (bundled), an ImageFolder path or archive, or random tensors.

``load_images`` decodes raw uint8 images (and labels) on the host; ``to_model_input`` resizes and
normalises them for a model on the chosen device. Both run before any timing.
"""

from __future__ import annotations

import functools
import io
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from accelbench.core.errors import DataError
from accelbench.data.labels import CIFAR10_CLASSES

ASSETS = Path(__file__).resolve().parent.parent / "assets"
BUNDLED = {
    "cifar10-test": ASSETS / "cifar10" / "test.tar.gz",
    "cifar10-train-5k": ASSETS / "cifar10" / "train-5k.tar.gz",
}
# What Pillow decodes (an animated GIF or a multi-page TIFF: its first frame)
_IMAGE_EXT = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".gif", ".tif", ".tiff")
# How a damaged archive fails while it is read: tarfile's own errors, a gzip stream cut short (EOFError,
# zlib.error), the file system's
_ARCHIVE_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


@dataclass(frozen=True, slots=True)
class RawImages:
    """Decoded images before resizing.

    Attributes:
        images: uint8 tensor ``(N, 3, H, W)``, or a list of uint8 ``(3, H_i, W_i)`` when sizes differ
            (:func:`to_model_input` transforms each image on its own).
        labels: int64 tensor ``(N,)`` or None (synthetic data).
        name: the data source as the user named it.
        description: one line naming what was loaded (shown in the output, stored with the run).
        label_space: ``cifar10`` for the bundled sets, ``folder`` for a user path, None for synthetic.
        classes: class names by label index.
        bad_images: files that did not decode and were skipped (``skip_bad=True``), by name.
    """

    images: object
    labels: object
    name: str
    description: str
    label_space: str | None
    classes: tuple[str, ...]
    bad_images: tuple[str, ...] = ()


def source_path(data: str) -> Path | None:
    """The file or folder behind ``data`` (None for ``synthetic``).

    Raises:
        DataError: the path does not exist.
    """
    if data == "synthetic":
        return None
    path = BUNDLED.get(data, Path(data).expanduser())
    if not path.exists():
        raise DataError(
            f"data {data!r} not found: use {', '.join(BUNDLED)}, synthetic, or an ImageFolder "
            "directory / .tar / .tar.gz"
        )
    return path


def list_images(path: Path) -> list[tuple[str, str]]:
    """``(class, file)`` of every image under a folder or in an archive, sorted.

    Raises:
        DataError: an unreadable archive, or no images (the layout expected is ``<class>/<image>``).
    """
    files = _list_archive(path) if path.is_file() else _list_dir(path)
    if not files:
        raise DataError(f"no images in {path} (expected <class>/<image>.png layout)")
    return files


def check_data(data: str, skip_bad: bool = False, probe: int = 8) -> None:
    """Check, before a run starts, that ``data`` exists and holds images that decode.

    Lists the images and decodes the first ``probe`` of them (all must decode unless ``skip_bad``, then
    at least one); the full set is decoded when a case loads it.

    Raises:
        DataError: a missing path, no images, or an image that does not decode (named).
    """
    path = source_path(data)
    if path is None or data in BUNDLED:
        return
    files = list_images(path)
    names = [f for _, f in files[:probe]]
    blobs = _read_archive(path, names) if path.is_file() else [Path(f).read_bytes() for f in names]
    good = 0
    for blob, name in zip(blobs, names):
        try:
            decode_rgb(blob, _display(path, name))
            good += 1
        except DataError:
            if not skip_bad:
                raise
    if not good:
        raise DataError(f"none of the first {len(names)} images in {path} decodes")


def _display(path: Path, name: str) -> str:
    """How a file is named in messages: its path, or ``archive:member`` inside an archive."""
    return f"{path}:{name}" if path.is_file() else name


def decode_rgb(blob: bytes, name: str):
    """Decode one image file's bytes with Pillow to an RGB ``PIL.Image``.

    Raises:
        DataError: not a decodable image; the message names the file and says what to do.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(io.BytesIO(blob))
        return img.convert("RGB")
    except UnidentifiedImageError:
        why = "not an image file Pillow recognises"
    except (OSError, ValueError, SyntaxError) as exc:  # truncated or corrupt data, bad header fields
        why = " ".join(str(exc).split()) or type(exc).__name__
    raise DataError(f"cannot decode image {name}: {why} (remove it, or pass --skip-bad-images)")


def load_images(data: str, n: int, image_size: int = 32, seed: int = 0, skip_bad: bool = False) -> RawImages:
    """Load ``n`` images (or all, when the source has fewer).

    For a labelled source with more than ``n`` images, a class-balanced subset is taken
    deterministically (image k of each class in turn), so accuracy on it is meaningful.

    Args:
        data: ``cifar10-test``, ``cifar10-train-5k``, ``synthetic``, or an ImageFolder directory / .tar /
            .tar.gz path (``<class>/<image>`` under one top folder or at the root).
        n: number of images wanted, >= 1.
        image_size: side of synthetic images (real images keep their size here).
        seed: seed for synthetic images.
        skip_bad: drop images that do not decode (named in ``bad_images``, counted in the description)
            instead of raising.
    Raises:
        DataError: the path is missing, holds no images, or an image cannot be decoded (named).
    """
    import torch

    path = source_path(data)
    if path is None:
        g = torch.Generator().manual_seed(seed)
        imgs = torch.randint(0, 256, (n, 3, image_size, image_size), dtype=torch.uint8, generator=g)
        return RawImages(imgs, None, data, f"synthetic: {n} random uint8 images", None, ())
    files = list_images(path)
    classes = tuple(sorted({c for c, _ in files}))
    chosen = _balanced(files, classes, n)
    blobs = _read_archive(path, [f for _, f in chosen]) if path.is_file() else [Path(f).read_bytes() for _, f in chosen]
    arrays, keep, bad = _decode_all(blobs, [_display(path, f) for _, f in chosen], skip_bad)
    if not keep:
        raise DataError(f"none of the {len(chosen)} images chosen from {path} decodes")
    chosen = [chosen[i] for i in keep]
    labels = torch.tensor([classes.index(c) for c, _ in chosen], dtype=torch.int64)
    space = "cifar10" if data in BUNDLED and classes == CIFAR10_CLASSES else "folder"
    desc = f"{data}: {len(chosen)} of {len(files)} real images, {len(classes)} classes ({path.name})"
    if bad:
        desc += f", {len(bad)} undecodable skipped"
    return RawImages(arrays, labels, data, desc, space, classes, tuple(bad))


def _list_dir(root: Path) -> list[tuple[str, str]]:
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and p.suffix.lower() in _IMAGE_EXT:
            out.append((p.parent.name, str(p)))
    return out


def _list_archive(path: Path) -> list[tuple[str, str]]:
    st = path.stat()
    return list(_list_archive_cached(str(path.resolve()), st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=8)
def _list_archive_cached(path_str: str, mtime_ns: int, size: int) -> tuple[tuple[str, str], ...]:
    # Listing a .tar.gz decompresses all of it: do it once per file version and process.
    path = Path(path_str)
    try:
        with tarfile.open(path) as tar:
            names = sorted(m.name for m in tar.getmembers() if m.isfile())
    except _ARCHIVE_ERRORS as exc:
        raise DataError(_archive_error(path, exc)) from None
    return tuple((Path(n).parent.name, n) for n in names if Path(n).suffix.lower() in _IMAGE_EXT)


def _archive_error(path: Path, exc: BaseException) -> str:
    why = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, EOFError):
        why = f"it ends too early (truncated or still being copied: {why})"
    return f"cannot read archive {path}: {why}"


def _read_archive(path: Path, members: list[str]) -> list[bytes]:
    """The bytes of ``members`` of a .tar / .tar.gz, in that order.

    Raises:
        DataError: the archive cannot be read to the end (truncated, corrupt), or a member is missing.
    """
    wanted = set(members)
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(path) as tar:
            for m in tar:
                if m.name in wanted:
                    found[m.name] = tar.extractfile(m).read()
    except _ARCHIVE_ERRORS as exc:
        raise DataError(_archive_error(path, exc)) from None
    missing = [m for m in members if m not in found]
    if missing:
        raise DataError(f"cannot read archive {path}: {missing[0]} is missing (the archive changed while it was read)")
    return [found[m] for m in members]


def _balanced(files: list[tuple[str, str]], classes: tuple[str, ...], n: int) -> list[tuple[str, str]]:
    by_class: dict[str, list[tuple[str, str]]] = {c: [] for c in classes}
    for item in files:
        by_class[item[0]].append(item)
    order = sorted(((k, ci), item) for ci, c in enumerate(classes) for k, item in enumerate(by_class[c]))
    return [item for _, item in order[:n]]


def _decode_all(blobs: list[bytes], names: list[str], skip_bad: bool = False):
    """``(images, indices decoded, names skipped)``; a bad image raises unless ``skip_bad``.

    Images: uint8 ``(N, 3, H, W)`` when all have one size, else a list of uint8 ``(3, H_i, W_i)`` (a folder of
    ImageNet-like JPEGs): squashing them to one size before the crop would distort each image's aspect ratio.
    """
    import torch

    arrays, keep, bad = [], [], []
    for i, (blob, name) in enumerate(zip(blobs, names)):
        try:
            img = decode_rgb(blob, name)
        except DataError:
            if not skip_bad:
                raise
            bad.append(name)
            continue
        keep.append(i)
        arrays.append(torch.frombuffer(bytearray(img.tobytes()), dtype=torch.uint8).view(img.height, img.width, 3))
    if not arrays:
        return None, keep, bad
    if len({a.shape for a in arrays}) > 1:  # mixed sizes: each keeps its own; the transform runs per image
        return [a.permute(2, 0, 1).contiguous() for a in arrays], keep, bad
    return torch.stack(arrays).permute(0, 3, 1, 2).contiguous(), keep, bad


def to_model_input(raw_images, image_size: int, mean, std, device="cpu", chunk: int = 256, transform=None):
    """Resize (bilinear, antialiased when shrinking) or apply ``transform``, and normalise uint8 images for a model.

    Args:
        raw_images: uint8 tensor ``(N, 3, H, W)``, or a list of uint8 ``(3, H_i, W_i)`` (each transformed alone).
        image_size: output side S.
        mean, std: per-channel normalisation on the 0..1 scale.
        device: where the result lives.
        transform: an :class:`accelbench.data.transforms.EvalTransform` (resize and center crop); None:
            resize straight to ``S x S``.
    Returns:
        float32 tensor ``(N, 3, S, S)`` on ``device``.
    """
    import torch

    from accelbench.data.transforms import EvalTransform, apply

    t = transform or EvalTransform(size=image_size)
    m = torch.tensor(mean, device=device).view(1, 3, 1, 1)
    s = torch.tensor(std, device=device).view(1, 3, 1, 1)
    out = torch.empty((len(raw_images), 3, image_size, image_size), device=device)
    if isinstance(raw_images, (list, tuple)):  # mixed sizes: resize (shorter side) and crop each image alone
        for i, img in enumerate(raw_images):
            out[i : i + 1] = (apply(img[None].to(device).float().div_(255), t) - m) / s
        return out
    for i in range(0, raw_images.shape[0], chunk):
        x = apply(raw_images[i : i + chunk].to(device).float().div_(255), t)
        out[i : i + chunk] = (x - m) / s
    return out
