"""The interconnect scenario (``accelbench interconnect``): collectives over message sizes and GPU pair copies,
on the ranks of a torchrun job (it runs nowhere else).

Collectives follow nccl-tests (doc/PERFORMANCE.md): per size, ``warmup`` untimed operations, then
``iters`` back-to-back operations between two synchronising barriers; the time of one operation is the
window over ``iters`` on each rank, and the op's time is the slowest rank's (a collective ends when its
last rank does). ``algbw = S / t``; ``busbw = algbw * f(op, n)`` (:mod:`accelbench.core.parallel`).
All-gather moves ``S / n`` bytes from each rank into an ``S``-byte result, as nccl-tests counts it.
Buffers are float32 with random contents.

Peer-to-peer copies (rank 0 only, every ordered pair of visible GPUs, the other ranks waiting on a host
barrier) time ``dst.copy_(src)`` of a ``p2p_bytes`` buffer between devices, host-timed between device
synchronisations; unidirectional. Link labels (``NV18``, ``PIX``, ``SYS``, ...) come from NVML.

Cases: one per collective (its row holds the best bus bandwidth over the sizes; a row per size is stored
beside it) and ``p2p`` (one row per GPU pair).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.config import check_int
from accelbench.core.errors import OK, ConfigError
from accelbench.core.parallel import bandwidths
from accelbench.core.spec import Case, Extras, Settings
from accelbench.scenarios.base import Scenario, register

OPS = ("all_reduce", "all_gather", "broadcast")
KIB = 1024


_UNITS = {
    "": 1,
    "B": 1,
    "K": KIB,
    "KB": KIB,
    "KIB": KIB,
    "M": KIB**2,
    "MB": KIB**2,
    "MIB": KIB**2,
    "G": KIB**3,
    "GB": KIB**3,
    "GIB": KIB**3,
}


def parse_bytes(text: str | int) -> int:
    """``"1K" -> 1024``, ``"256M" -> 268435456``, ``"1G" -> 1073741824`` (binary units, as nccl-tests' ``-b``/``-e``).

    Raises:
        ConfigError: not a number with an optional K/M/G suffix.
    """
    from accelbench.core.errors import ConfigError

    if isinstance(text, int):
        return text
    s = str(text).strip().upper().replace(" ", "")
    num = s.rstrip("KMGIB")
    try:
        value = float(num) * _UNITS[s[len(num) :]]
    except (ValueError, KeyError):
        raise ConfigError("size", text, "bytes with an optional K, M or G suffix, e.g. 1K, 256M, 1G") from None
    return int(value)


def sizes_between(min_bytes: int, max_bytes: int, factor: int = 2) -> list[int]:
    """Message sizes ``min_bytes, min_bytes * factor, ...`` up to ``max_bytes`` (nccl-tests ``-b -e -f``).

    Raises:
        ValueError: min > max, min < 4 or factor < 2.
    """
    if min_bytes < 4 or max_bytes < min_bytes or factor < 2:
        raise ValueError("need 4 <= min_bytes <= max_bytes and factor >= 2")
    out, s = [], min_bytes
    while s <= max_bytes:
        out.append(s)
        s *= factor
    return out


def _op(name: str, size_bytes: int, ctx) -> tuple[Callable[[], None], int]:
    """``(run_once, bytes_counted)`` for one collective; buffers are allocated here."""
    import torch
    import torch.distributed as dist

    n = ctx.world
    count = max(size_bytes // 4 // n * n, n)  # divisible by n so all-gather splits evenly
    buf = torch.rand(count, device=ctx.device)
    if name == "all_reduce":
        return (lambda: dist.all_reduce(buf)), count * 4
    if name == "broadcast":
        return (lambda: dist.broadcast(buf, src=0)), count * 4
    if name == "all_gather":
        part = buf[: count // n].clone()
        if ctx.backend == "nccl":
            return (lambda: dist.all_gather_into_tensor(buf, part)), count * 4
        chunks = list(buf.chunk(n))
        return (lambda: dist.all_gather(chunks, part)), count * 4
    raise ValueError(f"unknown collective {name!r}: {', '.join(OPS)}")


def time_collective(ctx, name: str, size_bytes: int, warmup: int, iters: int) -> tuple[float, int]:
    """This rank's mean seconds per op and the bytes counted (``S``)."""
    run, counted = _op(name, size_bytes, ctx)
    for _ in range(warmup):
        run()
    ctx.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        run()
    ctx.sync()
    dt = (time.perf_counter() - t0) / iters
    ctx.barrier()
    return dt, counted


def collective_rows(ctx, ops, sizes, warmup: int, iters: int, on_op=None) -> list[dict[str, Any]]:
    """Measure every (op, size) on all ranks; rank 0 gets the rows, the others an empty list."""
    import torch.distributed as dist

    rows = []
    for name in ops:
        if on_op:
            on_op(name)
        for size in sizes:
            dt, counted = time_collective(ctx, name, size, warmup, iters)
            times = [None] * ctx.world if ctx.rank == 0 else None
            dist.gather_object(dt, times, dst=0)
            if ctx.rank == 0:
                rows.append(collective_row(name, size, counted, times, ctx, warmup, iters))
    return rows


def collective_row(
    name: str, size: int, counted: int, times: list[float], ctx, warmup: int, iters: int
) -> dict[str, Any]:
    """One stored row: the slowest rank's time, algorithm and bus bandwidth (bytes/s)."""
    t = max(times)
    algbw, busbw = bandwidths(name, counted, t, ctx.world)
    return {
        "case_key": f"{name}|{size}|n={ctx.world}",
        "workload": kinds.COLLECTIVE,
        "status": OK,
        "error": None,
        "op": name,
        "size_bytes": counted,
        "requested_bytes": size,
        "dtype": "float32",
        "world_size": ctx.world,
        "nnodes": ctx.opts.nnodes,
        "backend": ctx.backend,
        "time_s": t,
        "time_min_rank_s": min(times),
        "algbw_bytes_per_s": algbw,
        "busbw_bytes_per_s": busbw,
        "warmup": warmup,
        "iters": iters,
    }


def p2p_rows(p2p_bytes: int, iters: int = 10) -> list[dict[str, Any]]:
    """Copy bandwidth for every ordered pair of visible GPUs (empty without 2 GPUs), with the NVML link."""
    import torch

    from accelbench.telemetry.sources.topology import link_topology

    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        return []
    links = link_topology(list(range(n)))
    rows = []
    for i in range(n):
        for j in range(n):
            if i != j:
                bw = copy_bandwidth(i, j, p2p_bytes, iters)
                rows.append(
                    {
                        "case_key": f"p2p|{i}->{j}",
                        "workload": kinds.P2P,
                        "status": OK,
                        "error": None,
                        "src_device": i,
                        "dst_device": j,
                        "size_bytes": p2p_bytes,
                        "iters": iters,
                        "bandwidth_bytes_per_s": bw,
                        "peer_access": torch.cuda.can_device_access_peer(i, j),
                        **links.get((i, j), {}),
                    }
                )
    return rows


def copy_bandwidth(src: int, dst: int, size_bytes: int, iters: int) -> float:
    """Bytes/s of ``iters`` copies of ``size_bytes`` from ``cuda:src`` to ``cuda:dst``."""
    import torch

    a = torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{src}").random_()
    b = torch.empty(size_bytes, dtype=torch.uint8, device=f"cuda:{dst}")
    for _ in range(2):
        b.copy_(a, non_blocking=True)
    torch.cuda.synchronize(src), torch.cuda.synchronize(dst)
    t0 = time.perf_counter()
    for _ in range(iters):
        b.copy_(a, non_blocking=True)
    torch.cuda.synchronize(src), torch.cuda.synchronize(dst)
    return size_bytes * iters / (time.perf_counter() - t0)


@dataclass(frozen=True, kw_only=True, slots=True)
class InterconnectSettings(Settings):
    """What to measure.

    Attributes:
        ops: collectives, a subset of ``all_reduce``, ``all_gather``, ``broadcast``.
        sizes: message sizes in bytes (``S`` as nccl-tests counts it).
        warmup, iters: untimed and timed operations per size (nccl-tests defaults: 5 and 20).
        p2p_bytes: buffer copied between every GPU pair (0: no pair copies).
        p2p_iters: timed copies per pair.
    """

    ops: tuple[str, ...] = OPS
    sizes: tuple[int, ...] = ()
    warmup: int = 5
    iters: int = 20
    p2p_bytes: int = 256 * 1024 * 1024
    p2p_iters: int = 10

    def __post_init__(self) -> None:
        for op in self.ops:
            if op not in OPS:
                raise ConfigError("op", op, ", ".join(OPS))
        if not self.ops or not self.sizes or any(not isinstance(s, int) or s < 4 for s in self.sizes):
            raise ConfigError("sizes", self.sizes, "one or more sizes of at least 4 bytes")
        check_int("iters", self.iters, 1)
        check_int("warmup", self.warmup, 0)
        check_int("p2p_bytes", self.p2p_bytes, 0)
        check_int("p2p_iters", self.p2p_iters, 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class InterconnectExtras(Extras):
    op: str = "all_reduce"


class Interconnect(Scenario):
    name, kind, dist_kind = "interconnect", None, kinds.INTERCONNECT
    workload = dist_workload = kinds.INTERCONNECT
    settings_type, extras_type = InterconnectSettings, InterconnectExtras
    uses_models, rank_rows = False, False
    cpu_defaults = gpu_defaults = {"models": (), "batch_sizes": ()}

    def validate(self, spec) -> None:
        pass

    def cases(self, spec, device: str) -> list[Case]:
        s = spec.settings
        ops = [
            Case(scenario=self.name, device=device, name=f"interconnect|{op}", extras=InterconnectExtras(op=op))
            for op in s.ops
        ]
        p2p = [Case(scenario=self.name, device=device, name="interconnect|p2p", extras=InterconnectExtras(op="p2p"))]
        return ops + (p2p if s.p2p_bytes and device == "cuda" else [])

    def check(self, spec) -> None:
        pass

    def unsupported_reason(self, case, device) -> str | None:
        return None

    def prepare(self, spec, device, store) -> None:
        return None

    def oom_group(self, case) -> None:
        return None

    def base_record(self, case, device) -> dict[str, Any]:
        return {"case_key": case.key, "workload": self.workload, "op": case.extras.op, "started_at": time.time()}

    def measure(self, case, spec, state, ctx, sink):
        s = spec.settings
        if case.extras.op == "p2p":
            rows = p2p_rows(s.p2p_bytes, s.p2p_iters) if ctx.rank == 0 else []
            ctx.host_barrier()  # the other ranks wait off the GPUs while rank 0 copies between them
            key, unit = "bandwidth_bytes_per_s", {"pairs": len(rows)}
        else:
            rows = collective_rows(ctx, (case.extras.op,), s.sizes, s.warmup, s.iters)
            key, unit = "busbw_bytes_per_s", {"sizes": len(rows), "world_size": ctx.world, "backend": ctx.backend}
        for row in rows:
            sink.add(row)
        best = [r[key] for r in rows]
        return ({**unit, f"best_{key}": max(best), f"worst_{key}": min(best)} if best else {}), {}


register(Interconnect())
