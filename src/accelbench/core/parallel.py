"""Pure maths of parallel results: scaling efficiency (data-parallel and tensor-parallel), bus bandwidth, common
windows, concurrency (the columns of an aggregate row combine by their declared rules:
:func:`accelbench.core.columns.combine`).

No torch import; every function is tested with exact numbers.

Definitions:
    speed-up ``S(n) = T(n) / T(b)`` and scaling efficiency ``E(n) = (T(n) / n) / (T(b) / b)``, with
    ``T`` the total throughput (samples/s) on ``n`` processes and ``b`` the baseline's process count
    (normally 1): Amdahl/Gustafson's usual definitions as used by MLPerf and Horovod's scaling reports
    (Sergeev & Del Balso 2018, "Horovod", fig. 6).
    Bus bandwidth ``busbw = algbw * f(op, n)`` with ``algbw = S / t`` and ``f`` = 2(n-1)/n (all-reduce),
    (n-1)/n (all-gather, reduce-scatter, all-to-all), 1 (broadcast, reduce): NVIDIA nccl-tests,
    doc/PERFORMANCE.md. For all-gather, ``S`` is the total gathered size (``sendcount * n`` elements).
    Tensor parallelism (:func:`tp_scaling`): the same efficiency with ``T`` a generate row's decode tokens/s and ``n``
    its ``tp_degree`` (the GPUs one copy of the model is split over), so ``E(n)`` is decode tokens/s per GPU at TP n
    over the same at the smallest degree measured (Megatron-LM reports its model-parallel scaling as this per-GPU
    ratio: Shoeybi et al. 2019, "Megatron-LM", section 5.1); the TPOT speed-up is ``TPOT_p50(b) / TPOT_p50(n)``, the
    latency a user sees per output token.
    Collective share of a tensor-parallel decode step (:func:`kernel_collective_share`,
    :func:`host_collective_share`): the time in the collectives over the time of the steps profiled, on a GPU the
    device time of the NCCL kernels over that of every kernel (a trace's "communication" over its "kernel" time, as
    Holistic Trace Analysis's temporal breakdown counts it), on CPUs the host time of the collective ops over the wall
    time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelbench.core.errors import OK

BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Scaling:
    """Speed-up and scaling efficiency of ``world_size`` processes against a baseline."""

    speedup: float
    scaling_efficiency: float


def scaling(throughput: float, world_size: int, base_throughput: float, base_world_size: int = 1) -> Scaling:
    """Speed-up ``T(n)/T(b)`` and efficiency ``(T(n)/n)/(T(b)/b)`` (see module docstring).

    Args:
        throughput: total samples/s of the ``world_size``-process run.
        base_throughput: total samples/s of the baseline run on ``base_world_size`` processes.
    Raises:
        ValueError: a non-positive throughput or process count.
    """
    if throughput <= 0 or base_throughput <= 0 or world_size < 1 or base_world_size < 1:
        raise ValueError("throughputs and process counts must be positive")
    speedup = throughput / base_throughput
    return Scaling(speedup=speedup, scaling_efficiency=speedup * base_world_size / world_size)


# the cases one tensor-parallel scaling curve is made of: the same generation on the same device, any tp_degree
TP_GROUP = ("model", "precision", "mode", "batch_size", "prompt_len", "new_tokens", "device_name")
# the deployments one question compares: the same generation on the same device, any precision, engine and tp_degree
# ("how many GPUs, in which precision, for this model at this batch": one GPU in 8 bits against two in bf16)
DEPLOY_GROUP = ("model", "batch_size", "prompt_len", "new_tokens", "device_name")


@dataclass(frozen=True, kw_only=True, slots=True)
class TpScaling:
    """A generate row against the smallest tensor-parallel degree of its group (:data:`TP_GROUP`)."""

    base_tp_degree: int
    tp_efficiency: float
    tpot_speedup: float | None


def tp_scaling(rows: Sequence[Mapping[str, Any]]) -> list[TpScaling | None]:
    """The TP efficiency and TPOT speed-up of each generate row, in the rows' order (see module docstring).

    Rows are grouped by :data:`TP_GROUP`; the baseline of a group is its first counted row at its smallest
    ``tp_degree`` (a row without one ran on one GPU). Only ``ok`` rows with a positive ``decode_tokens_per_s`` count.

    Args:
        rows: generate rows as stored or exported; ``decode_tokens_per_s`` in tokens/s (the whole job's),
            ``tpot_p50_ms`` in ms.
    Returns:
        per row, a :class:`TpScaling` (``tp_efficiency`` = (T(n)/n) / (T(b)/b) through :func:`scaling`;
        ``tpot_speedup`` None where either TPOT p50 is missing), or None: a row that does not count, or one whose
        group has a single degree.
    """
    counted = [r.get("status") == OK and (r.get("decode_tokens_per_s") or 0) > 0 for r in rows]
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(rows):
        if counted[i]:
            groups.setdefault(tuple(r.get(k) for k in TP_GROUP), []).append(i)
    out: list[TpScaling | None] = [None] * len(rows)
    for members in groups.values():
        degree = {i: int(rows[i].get("tp_degree") or 1) for i in members}
        if len(set(degree.values())) < 2:
            continue
        b = min(members, key=lambda i: (degree[i], i))
        base = rows[b]
        for i in members:
            r = rows[i]
            s = scaling(r["decode_tokens_per_s"], degree[i], base["decode_tokens_per_s"], degree[b])
            tpot, base_tpot = latency_p50(r), latency_p50(base)
            out[i] = TpScaling(
                base_tp_degree=degree[b],
                tp_efficiency=s.scaling_efficiency,
                tpot_speedup=base_tpot / tpot if tpot and base_tpot else None,
            )
    return out


def latency_p50(row: Mapping[str, Any]) -> float | None:
    """The row's latency p50 as its metric map names it (a generate row's: TPOT p50, ms), or None."""
    from accelbench.core.columns import maps

    m = maps.of_row(row)  # it reads the row's workload only
    column = m.column("latency_p50") if m is not None else None
    return row.get(column) if column else None


def bus_factor(op: str, n: int) -> float:
    """The nccl-tests correction factor from algorithm to bus bandwidth for ``op`` over ``n`` ranks.

    Raises:
        ValueError: unknown op or n < 1.
    """
    if op not in BUS_FACTORS:
        raise ValueError(f"unknown collective {op!r}: {', '.join(BUS_FACTORS)}")
    if n < 1:
        raise ValueError("n must be >= 1")
    return BUS_FACTORS[op](n)


def bandwidths(op: str, size_bytes: int, time_s: float, n: int) -> tuple[float, float]:
    """``(algbw, busbw)`` in bytes/s of one ``op`` moving ``size_bytes`` in ``time_s`` over ``n`` ranks."""
    algbw = size_bytes / time_s
    return algbw, algbw * bus_factor(op, n)


def common_window(starts: Sequence[float], ends: Sequence[float]) -> tuple[float, float, float]:
    """``(start, end, seconds)`` of the window covering every rank: min start .. max end."""
    start, end = min(starts), max(ends)
    return start, end, end - start


def straggler(windows: Sequence[float]) -> tuple[int, float]:
    """``(index of the slowest rank, gap share)``: the longest timed window and ``(max - min) / max``."""
    slow = max(range(len(windows)), key=lambda i: windows[i])
    longest = windows[slow]
    return slow, (longest - min(windows)) / longest if longest > 0 else 0.0


def comm_exposed_share(step_s: float, step_nosync_s: float) -> float:
    """Share of a DDP step spent in communication that computation did not hide.

    ``(t_sync - t_nosync) / t_sync``: the step with gradient all-reduce against the same step under
    ``DistributedDataParallel.no_sync()`` (no all-reduce). Negative values (noise) are kept as measured.
    """
    return (step_s - step_nosync_s) / step_s


def overlap_fraction(intervals: Sequence[tuple[float, float]]) -> float:
    """Time all ``intervals`` run together over the time any runs: ``|intersection| / |union|``.

    1.0 means the jobs' timed windows coincided; 0 means they never overlapped. The union is the span
    from the earliest start to the latest end (gaps count as not overlapped).
    """
    inter = min(e for _, e in intervals) - max(s for s, _ in intervals)
    span = max(e for _, e in intervals) - min(s for s, _ in intervals)
    return max(inter, 0.0) / span if span > 0 else 1.0


# every NCCL kernel's name carries it (``ncclDevKernel_AllReduce_Sum_bf16_RING_LL``, ``ncclKernel_AllGather_...``)
COLLECTIVE_KERNEL = "nccl"
# the host ops of a collective, as torch.profiler names them: the functional collectives a split model calls
# (``_c10d_functional::all_reduce``, ``all_gather_into_tensor``, and ``wait_tensor``, where the host waits for
# them), the ``c10d::`` ops they dispatch to (``c10d::allreduce_``) and the backends' (``gloo:all_reduce``)
COLLECTIVE_OPS = ("all_reduce", "allreduce", "all_gather", "allgather", "wait_tensor")


def is_collective_kernel(name: str) -> bool:
    """``name`` is a collective's device kernel: an NCCL kernel (:data:`COLLECTIVE_KERNEL`, any case)."""
    return COLLECTIVE_KERNEL in name.lower()


def is_collective_op(name: str) -> bool:
    """``name`` is a collective's host op (one of :data:`COLLECTIVE_OPS` in it, any case)."""
    low = name.lower()
    return any(op in low for op in COLLECTIVE_OPS)


def kernel_collective_share(kernels: Iterable[tuple[str, float]]) -> float | None:
    """The share of device time spent in collective kernels.

    Args:
        kernels: ``(name, device time)`` of every kernel a profile recorded (any one time unit).
    Returns:
        the summed time of the NCCL kernels (:func:`is_collective_kernel`) over the summed time of all of them
        (0..1), or None when there is no kernel time.
    """
    total = comm = 0.0
    for name, t in kernels:
        total += t
        if is_collective_kernel(name):
            comm += t
    return comm / total if total > 0 else None


def host_collective_share(ops: Iterable[tuple[str, float]], wall: float) -> float | None:
    """The share of a host's wall time spent in collective ops.

    Args:
        ops: ``(name, host time)`` of the ops a profile recorded on the thread that ran the steps, none nested in
            another collective op (so no time is counted twice); any one time unit.
        wall: the wall time of the profiled steps, in the same unit.
    Returns:
        the summed time of the collective ops (:func:`is_collective_op`) over ``wall``, or None for no wall time.
    """
    if wall <= 0:
        return None
    return sum(t for name, t in ops if is_collective_op(name)) / wall
