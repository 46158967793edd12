"""Rows of a distributed case: per-rank rows, the aggregate row, scaling against a baseline, error rows.

Pure code. A case on ``n`` processes stores ``n`` rank rows (``rank`` = 0..n-1, ``aggregate`` False) and
one aggregate row (``rank`` None, ``aggregate`` True) whose throughput is measured over the common wall
window of all ranks (earliest start to latest end), not summed from per-rank rates taken at
different times.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Sequence

from accelbench.distributed.maths import combine_telemetry, comm_exposed_share, common_window, scaling, straggler

# Case-level fields copied from rank 0's row into the aggregate row.
SHARED_FIELDS = (
    "workload", "model", "batch_size", "global_batch_size", "scaling_mode", "precision", "mode",
    "channels_last_setting", "channels_last", "data", "data_description", "images", "image_size", "weights",
    "pretrained", "world_size", "nnodes", "backend", "device_type", "device_name", "passes", "optimizer", "lr",
    "momentum", "weight_decay",
    "cudnn_benchmark", "started_at", "include_transfer",
)


def rank_key(case_key: str, world_size: int, rank: int) -> str:
    """Case key of one rank's row, unique within a run."""
    return f"{case_key}|gpus={world_size}|rank={rank}"


def aggregate_key(case_key: str, world_size: int) -> str:
    """Case key of the aggregate row, unique within a run."""
    return f"{case_key}|gpus={world_size}|all"


def _same_host(records: Sequence[dict]) -> bool:
    return len({r.get("host") for r in records}) == 1


def aggregate(records: Sequence[dict], telemetry_keys: Sequence[str] = (),
              barrier_window_s: float | None = None) -> dict[str, Any]:
    """The aggregate row of one case from its rank rows (any order).

    Args:
        records: one dict per rank with ``rank``, ``host``, ``samples_timed``, ``window_start_epoch_s``,
            ``window_end_epoch_s``; optional ``top1_correct``/``top5_correct``/``accuracy_samples``,
            ``step_time_mean_ms``/``step_time_nosync_mean_ms``, ``compile_s`` and telemetry keys.
        telemetry_keys: keys to combine with :func:`combine_telemetry`.
        barrier_window_s: rank 0's time from leaving the start barrier to leaving the end barrier; used
            instead of epoch clocks when the ranks are on different hosts (their clocks may disagree).
    Returns:
        The aggregate record (status ``ok``): ``throughput_samples_per_s`` = all samples / common window,
        ``throughput_per_gpu_samples_per_s``, ``straggler_rank``, ``straggler_gap_share``, accuracy,
        ``comm_exposed_share`` when measured, combined telemetry.
    """
    recs = sorted(records, key=lambda r: r["rank"])
    r0 = recs[0]
    start, end, window = common_window([r["window_start_epoch_s"] for r in recs],
                                       [r["window_end_epoch_s"] for r in recs])
    if not _same_host(recs) and barrier_window_s is not None:
        window = barrier_window_s
    samples = sum(r["samples_timed"] for r in recs)
    total = samples / window
    windows = [r["window_end_epoch_s"] - r["window_start_epoch_s"] for r in recs]
    slow, gap = straggler(windows)
    out: dict[str, Any] = {k: r0[k] for k in SHARED_FIELDS if k in r0}
    out.update(
        rank=None, aggregate=True, world_size=len(recs), hosts=len({r.get("host") for r in recs}),
        samples_timed=samples, window_s=window, window_start_epoch_s=start, window_end_epoch_s=end,
        barrier_window_s=barrier_window_s, throughput_samples_per_s=total,
        throughput_per_gpu_samples_per_s=total / len(recs), straggler_rank=recs[slow]["rank"],
        straggler_gap_share=gap, rank_window_max_s=max(windows), rank_window_min_s=min(windows),
        status="ok", error=None,
    )
    if any(r.get("compile_s") is not None for r in recs):
        out["compile_s"] = max(r["compile_s"] or 0.0 for r in recs)
    out.update(_accuracy(recs))
    out.update(_comm(recs))
    out.update(combine_telemetry(recs, telemetry_keys))
    return out


def _accuracy(recs: Sequence[dict]) -> dict[str, Any]:
    if not all(r.get("accuracy_samples") for r in recs):
        return {}
    n = sum(r["accuracy_samples"] for r in recs)
    return {"accuracy_samples": n, "top1": sum(r["top1_correct"] for r in recs) / n,
            "top5": sum(r["top5_correct"] for r in recs) / n}


def _comm(recs: Sequence[dict]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if all(r.get("step_time_mean_ms") is not None for r in recs):
        out["step_time_mean_ms"] = statistics.fmean(r["step_time_mean_ms"] for r in recs)
    if "step_time_mean_ms" in out and all(r.get("step_time_nosync_mean_ms") is not None for r in recs):
        nosync = statistics.fmean(r["step_time_nosync_mean_ms"] for r in recs)
        out["step_time_nosync_mean_ms"] = nosync
        out["comm_exposed_share"] = comm_exposed_share(out["step_time_mean_ms"], nosync)
    return out


def with_scaling(agg: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any]:
    """``agg`` plus ``speedup``/``scaling_efficiency`` against ``baseline`` (an aggregate row), if any.

    The baseline's ``throughput_samples_per_s``, ``world_size`` and ``case_id`` are recorded with it.
    """
    if not baseline or not baseline.get("throughput_samples_per_s") or agg.get("status") != "ok":
        return {**agg, "speedup": None, "scaling_efficiency": None}
    s = scaling(agg["throughput_samples_per_s"], agg["world_size"],
                baseline["throughput_samples_per_s"], int(baseline["world_size"]))
    return {**agg, "speedup": s.speedup, "scaling_efficiency": s.scaling_efficiency,
            "baseline_throughput_samples_per_s": baseline["throughput_samples_per_s"],
            "baseline_world_size": int(baseline["world_size"]), "baseline_case_id": baseline.get("case_id")}


def error_row(case: dict[str, Any], workload: str, world_size: int, status: str, error: str) -> dict[str, Any]:
    """The aggregate row of a case that did not finish (a rank crashed, ran out of memory or hung).

    Args:
        case: the planned case as a dict (``key``, ``model``, ``batch_size``, ``precision``, ``mode``, ...).
    """
    fields = ("model", "batch_size", "precision", "mode", "channels_last", "images", "data", "image_size")
    row = {k: case.get(k) for k in fields if k in case}
    if "channels_last" in row:
        row["channels_last_setting"] = row.pop("channels_last")
    return {"case_key": aggregate_key(case["key"], world_size), "workload": workload, **row,
            "world_size": world_size, "rank": None, "aggregate": True, "status": status, "error": error,
            "started_at": time.time()}


def add_row(store, run_id: int, record: dict[str, Any], series: dict | None = None) -> int:
    """``store.add_case`` without None values, so a column gets its type from its first real value
    (the store types a new column by the first value it sees; None would make it TEXT)."""
    rec = {k: v for k, v in record.items() if v is not None or k in ("status", "error")}
    return store.add_case(run_id, rec, series)
