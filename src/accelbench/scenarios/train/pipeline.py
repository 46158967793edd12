"""Input-pipeline measurements, separate from the model: DataLoader throughput and storage reads.

- :func:`loader_throughput`: images/s a ``torch.utils.data.DataLoader`` delivers (decode + resize +
  crop/flip + collate) with N worker processes and pinned memory, in steady state (the first batch
  of every worker, which carries its start-up, is left out of the window).
- :func:`resident_throughput`: the same augmentation on a device-resident uint8 set (no decode).
- :func:`storage_read`: sequential read throughput of the dataset files, cold (the files' pages evicted
  with ``posix_fadvise(POSIX_FADV_DONTNEED)``; the whole page cache dropped through
  ``/proc/sys/vm/drop_caches`` only when asked, as it slows every other job on the host) and warm, in MB/s
  (1 MB = 1e6 bytes); the page-cache residency measured with ``mincore(2)`` before each read shows whether
  the eviction worked.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import statistics
import time
from pathlib import Path

from accelbench.scenarios.train.augment import epoch_plan, scaled_pad
from accelbench.scenarios.train.datasets import DecodeDataset, Encoded, make_loader

# Ways to make a read cold, by every accepted spelling -> the method recorded as ``cold_method``.
EVICT_METHODS = {"fadvise": "fadvise", "drop-caches": "drop_caches", "drop_caches": "drop_caches", "auto": "fadvise"}
# Spellings kept so old commands run, with what to say about them.
DEPRECATED_EVICT = {
    "auto": "it now means fadvise (evict only the files read); use --evict drop-caches to drop the whole page cache"
}


def evict_method(name: str) -> str:
    """The eviction method of ``name`` (``fadvise`` or ``drop_caches``).

    Raises:
        ValueError: ``name`` is not a key of :data:`EVICT_METHODS`.
    """
    try:
        return EVICT_METHODS[name]
    except KeyError:
        raise ValueError(f"unknown eviction method {name!r}: use {', '.join(EVICT_METHODS)}") from None


# The side images of different sizes are resized to when no --image-size is given: the input side of
# torchvision's and timm's ImageNet models (what `run` and `train` would resize the same photos to for resnet50).
MIXED_SIZES_SIDE = 224


def loader_side(enc: Encoded, image_size: int | None) -> tuple[int | None, str]:
    """The side the loader resizes every image to, and the row's ``transform``: ``image_size`` when given; else
    None (as stored) when every image has the same size, else :data:`MIXED_SIZES_SIDE` (a batch stacks images
    of one size). Reads the images' headers only."""
    import io

    from PIL import Image

    if image_size is not None:
        return image_size, f"resize to {image_size}x{image_size}"
    sizes = {Image.open(io.BytesIO(b)).size for b in enc.blobs}
    if len(sizes) <= 1:
        return None, "as stored"
    return MIXED_SIZES_SIDE, (
        f"resize to {MIXED_SIZES_SIDE}x{MIXED_SIZES_SIDE} ({len(sizes)} image sizes in the data; --image-size sets it)"
    )


def loader_throughput(
    enc: Encoded,
    image_size: int | None,
    batch_size: int,
    workers: int,
    pin: bool,
    augment: bool = True,
    min_batches: int = 10,
    seed: int = 0,
    pad: int = 4,
) -> dict:
    """Steady-state batches/s of a DataLoader over ``enc``.

    The first ``max(1, workers)`` batches are untimed: each worker's first batch carries its start-up
    and the workers produce them concurrently, so timing from the first arrival would count work done
    before the window (with 16 workers and 11 batches, a 10x overestimate). Then
    ``max(min_batches, 3 * workers)`` batches are timed, so every worker delivers several.

    Returns:
        ``loader_samples_per_s`` (timed batches' samples / window), ``loader_startup_s`` (iterator
        creation to the first batch), ``loader_batches_timed``, ``loader_workers``, ``loader_pin_memory``.
    """
    import torch

    n = len(enc.blobs)
    plan = epoch_plan(n, seed, 0, scaled_pad(pad, image_size or 32), augment)
    skip, timed = max(1, workers), max(min_batches, 3 * workers)
    total = (skip + timed) * batch_size
    order = plan.order.repeat(math.ceil(total / n))[:total]
    pin = pin and torch.cuda.is_available()
    loader = make_loader(DecodeDataset(enc, image_size, plan), order, batch_size, workers, pin)
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    startup = time.perf_counter() - t0
    for _ in range(skip - 1):
        next(it)
    t1 = time.perf_counter()
    count = sum(x.shape[0] for x, _ in it)
    t2 = time.perf_counter()
    return {
        "loader_samples_per_s": count / (t2 - t1),
        "loader_startup_s": startup,
        "loader_batches_timed": timed,
        "loader_workers": workers,
        "loader_pin_memory": pin,
    }


def resident_throughput(images, batch_size: int, min_batches: int = 10, seed: int = 0, pad: int = 4) -> dict:
    """Crop/flip + normalisation throughput of a device-resident uint8 set ``(N, 3, S, S)``."""
    import torch

    from accelbench.scenarios.train.datasets import Resident, normalize

    n = images.shape[0]
    res = Resident(images, torch.zeros(n, dtype=torch.int64, device=images.device))
    dev = images.device
    done, t0, epoch = 0, None, 0
    while done < min_batches * batch_size:
        for xb, _ in res.batches(
            epoch_plan(n, seed, epoch, scaled_pad(pad, images.shape[-1])), batch_size, drop_last=False
        ):
            x = normalize(xb, (0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
            if t0 is None:  # first batch untimed (allocator, kernels' first launch)
                _sync(dev)
                t0 = time.perf_counter()
                continue
            done += x.shape[0]
        epoch += 1
    _sync(dev)
    return {"loader_samples_per_s": done / (time.perf_counter() - t0), "loader_workers": 0, "loader_pin_memory": False}


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def dataset_files(data: str) -> list[Path]:
    """The files behind a data source: the bundled archive, or every file under a directory / the file itself."""
    from accelbench import data as d
    from accelbench.core.errors import DataError

    path = d.BUNDLED.get(data, Path(data).expanduser())
    if not path.exists():
        raise DataError(f"data {data!r} not found")
    return [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())


def resident_fraction(paths: list[Path]) -> float | None:
    """Fraction of the files' pages in the page cache (``mincore(2)`` on a mapping), or None if unavailable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        page = mmap.PAGESIZE
        cached = total = 0
        for p in paths:
            size = p.stat().st_size
            if size == 0:
                continue
            with open(p, "rb") as fh, mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY) as mm:
                pages = (size + page - 1) // page
                vec = (ctypes.c_ubyte * pages)()
                buf = ctypes.c_char.from_buffer(mm)
                rc = libc.mincore(ctypes.c_void_p(ctypes.addressof(buf)), ctypes.c_size_t(size), vec)
                del buf
                if rc != 0:
                    return None
                cached += sum(v & 1 for v in vec)
                total += pages
        return cached / total if total else None
    except (OSError, AttributeError, ValueError, TypeError):
        return None


def drop_cache(paths: list[Path], method: str = "fadvise") -> str:
    """Evict ``paths`` from the page cache; returns the method used (``fadvise`` or ``drop_caches``).

    ``fadvise`` (default; ``auto``, deprecated, is the same): ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)``
    per file, which evicts its clean pages and nothing else, with no privilege (posix_fadvise(2)).
    ``drop_caches`` (or ``drop-caches``): ``sync`` then ``1`` into ``/proc/sys/vm/drop_caches``, which empties
    the page cache of the whole host (every other job then reads from storage again; proc(5)).

    Raises:
        OSError: ``drop_caches`` without permission to write ``/proc/sys/vm/drop_caches`` (root, writable /proc).
        ValueError: an unknown method.
    """
    if evict_method(method) == "drop_caches":
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("1\n")
        return "drop_caches"
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd) if os.access(p, os.W_OK) else None
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)
    return "fadvise"


def read_files(paths: list[Path], chunk_bytes: int = 1 << 20) -> tuple[int, float]:
    """Read every file sequentially into one reused buffer; returns ``(bytes_read, seconds)``."""
    buf = bytearray(chunk_bytes)
    view = memoryview(buf)
    n = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb", buffering=0) as fh:
            while (got := fh.readinto(view)) > 0:
                n += got
    return n, time.perf_counter() - t0


def _read_record(state: str, paths: list[Path], runs: list[tuple[int, float]], frac: float | None) -> dict:
    secs = statistics.median(s for _, s in runs)
    nbytes = runs[0][0]
    return {
        "cache_state": state,
        "files": len(paths),
        "read_bytes": nbytes,
        "read_s": secs,
        "read_mb_per_s": nbytes / 1e6 / secs,
        "passes": len(runs),
        "read_mb_per_s_samples": [b / 1e6 / s for b, s in runs],
        "page_cache_resident_fraction": frac,
    }


def storage_cold(paths: list[Path], repeats: int = 3, method: str = "fadvise") -> dict:
    """Cold read throughput of ``paths``: ``repeats`` times (evict with :func:`drop_cache` ``method``, read).

    Returns:
        ``cache_state`` ``cold``, ``files``, ``read_bytes`` (per pass), ``read_s`` (median pass),
        ``read_mb_per_s`` (bytes / 1e6 / read_s), ``passes``, ``read_mb_per_s_samples``,
        ``page_cache_resident_fraction`` (the largest seen before a read; None where mincore is unavailable),
        ``cold_method``.
    """
    runs, fractions, used = [], [], None
    for _ in range(repeats):
        used = drop_cache(paths, method)
        fractions.append(resident_fraction(paths))
        runs.append(read_files(paths))
    return {
        **_read_record("cold", paths, runs, max(fractions, key=lambda f: -1 if f is None else f)),
        "cold_method": used,
    }


def storage_warm(paths: list[Path], min_warm_s: float = 0.2) -> dict:
    """Warm read throughput of ``paths`` (run right after :func:`storage_cold`): reads repeated until
    ``min_warm_s``; the same columns, ``cache_state`` ``warm``."""
    runs, t_end = [], time.perf_counter() + min_warm_s
    frac = resident_fraction(paths)
    while not runs or (time.perf_counter() < t_end and len(runs) < 1000):
        runs.append(read_files(paths))
    return _read_record("warm", paths, runs, frac)
