"""Input-pipeline measurements, separate from the model: DataLoader throughput and storage reads.

- :func:`loader_throughput`: images/s a ``torch.utils.data.DataLoader`` delivers (decode + resize +
  crop/flip + collate) with N worker processes and pinned memory; the first batch (worker start-up)
  is timed separately.
- :func:`resident_throughput`: the same augmentation on a device-resident uint8 set (no decode).
- :func:`storage_read`: sequential read throughput of the dataset files, cold (page cache dropped via
  ``/proc/sys/vm/drop_caches`` where permitted, else ``posix_fadvise(POSIX_FADV_DONTNEED)``) and warm,
  in MB/s (1 MB = 1e6 bytes); the page-cache residency measured with ``mincore(2)`` before each read
  shows whether the drop worked.
"""

from __future__ import annotations

import ctypes
import math
import mmap
import os
import statistics
import time
from pathlib import Path

from accelbench.train.augment import epoch_plan, scaled_pad
from accelbench.train.datasets import DecodeDataset, Encoded, make_loader


def loader_throughput(enc: Encoded, image_size: int | None, batch_size: int, workers: int, pin: bool,
                      augment: bool = True, min_batches: int = 10, seed: int = 0, pad: int = 4) -> dict:
    """Time ``min_batches`` batches after the first from a DataLoader over ``enc``.

    Returns:
        ``loader_samples_per_s`` (steady state, first batch excluded), ``loader_startup_s`` (time to the
        first batch: worker start-up + one batch), ``loader_batches_timed``, ``loader_workers``,
        ``loader_pin_memory``.
    """
    import torch

    n = len(enc.blobs)
    size = image_size
    plan = epoch_plan(n, seed, 0, scaled_pad(pad, size or 32), augment)
    total = (min_batches + 1) * batch_size
    order = plan.order.repeat(math.ceil(total / n))[:total]
    pin = pin and torch.cuda.is_available()
    loader = make_loader(DecodeDataset(enc, size, plan), order, batch_size, workers, pin)
    t0 = time.perf_counter()
    it = iter(loader)
    next(it)
    t1 = time.perf_counter()
    count = sum(x.shape[0] for x, _ in it)
    t2 = time.perf_counter()
    return {"loader_samples_per_s": count / (t2 - t1), "loader_startup_s": t1 - t0,
            "loader_batches_timed": min_batches, "loader_workers": workers, "loader_pin_memory": pin}


def resident_throughput(images, batch_size: int, min_batches: int = 10, seed: int = 0, pad: int = 4) -> dict:
    """Crop/flip + normalisation throughput of a device-resident uint8 set ``(N, 3, S, S)``."""
    import torch

    from accelbench.train.datasets import Resident, normalize

    n = images.shape[0]
    res = Resident(images, torch.zeros(n, dtype=torch.int64, device=images.device))
    dev = images.device
    done, t0, epoch = 0, None, 0
    while done < min_batches * batch_size:
        for xb, _ in res.batches(epoch_plan(n, seed, epoch, scaled_pad(pad, images.shape[-1])), batch_size, drop_last=False):
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
    from accelbench.errors import DataError

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


def drop_cache(paths: list[Path], method: str = "auto") -> str:
    """Evict ``paths`` from the page cache; returns the method used (``drop_caches`` or ``fadvise``).

    ``auto`` tries ``/proc/sys/vm/drop_caches`` (root, writable /proc) and falls back to
    ``posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)`` per file (evicts clean pages, no privilege).
    """
    if method in ("auto", "drop_caches"):
        try:
            os.sync()
            with open("/proc/sys/vm/drop_caches", "w") as fh:
                fh.write("1\n")
            return "drop_caches"
        except OSError:
            if method == "drop_caches":
                raise
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


def storage_read(paths: list[Path], repeats: int = 3, method: str = "auto", min_warm_s: float = 0.2) -> list[dict]:
    """Cold and warm read throughput of ``paths``.

    Cold: ``repeats`` times (evict, read); warm: reads right after, repeated until ``min_warm_s``.
    Returns:
        Two records (``cache_state`` ``cold`` / ``warm``) with ``read_bytes`` (per pass), ``read_s``
        (median pass), ``read_mb_per_s`` (bytes / 1e6 / read_s), ``passes``, ``read_mb_per_s_samples``,
        ``page_cache_resident_fraction`` (before the read; None where mincore is unavailable),
        and ``cold_method`` on the cold row.
    """
    cold, fractions, used = [], [], None
    for _ in range(repeats):
        used = drop_cache(paths, method)
        fractions.append(resident_fraction(paths))
        cold.append(read_files(paths))
    warm, t_end = [], time.perf_counter() + min_warm_s
    warm_frac = resident_fraction(paths)
    while not warm or (time.perf_counter() < t_end and len(warm) < 1000):
        warm.append(read_files(paths))
    out = []
    for state, runs, frac in (("cold", cold, max(fractions, key=lambda f: -1 if f is None else f)), ("warm", warm, warm_frac)):
        secs = statistics.median(s for _, s in runs)
        nbytes = runs[0][0]
        out.append({"cache_state": state, "files": len(paths), "read_bytes": nbytes, "read_s": secs,
                    "read_mb_per_s": nbytes / 1e6 / secs, "passes": len(runs),
                    "read_mb_per_s_samples": [b / 1e6 / s for b, s in runs],
                    "page_cache_resident_fraction": frac, "cold_method": used if state == "cold" else None})
    return out
