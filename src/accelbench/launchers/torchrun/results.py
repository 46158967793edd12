"""Rows of a distributed case: per-rank rows, the aggregate row, scaling against a baseline.

Pure code (but :func:`find_baseline`, which reads the store). A case on ``n`` processes stores ``n`` rank rows (``rank`` = 0..n-1, ``aggregate`` False) and
one aggregate row (``rank`` None, ``aggregate`` True) whose throughput is measured over the common wall
window of all ranks (earliest start to latest end), not summed from per-rank rates taken at
different times. Every other column of the rank rows reaches the aggregate row by the rule its declaration gives
(:func:`accelbench.core.columns.combine`): a setting of the case (the model, a backend's compile mode) as it is,
energy and power summed, memory and a throttled share the worst rank's; per-rank columns (a rank's own window,
its latency percentiles) stay on the rank rows.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from accelbench.core import columns
from accelbench.core.errors import OK
from accelbench.core.parallel import comm_exposed_share, common_window, scaling, straggler


def rank_key(case_key: str, world_size: int, rank: int) -> str:
    """Case key of one rank's row, unique within a run."""
    return f"{case_key}|gpus={world_size}|rank={rank}"


def aggregate_key(case_key: str, world_size: int) -> str:
    """Case key of the aggregate row, unique within a run."""
    return f"{case_key}|gpus={world_size}|all"


def _same_host(records: Sequence[dict]) -> bool:
    return len({r.get("host") for r in records}) == 1


def aggregate(records: Sequence[dict], barrier_window_s: float | None = None) -> dict[str, Any]:
    """The aggregate row of one case from its rank rows (any order).

    Args:
        records: one dict per rank with ``rank``, ``host``, ``samples_timed``, ``window_start_epoch_s``,
            ``window_end_epoch_s``; optional ``top1_correct``/``top5_correct``/``accuracy_samples``,
            ``step_time_mean_ms``/``step_time_nosync_mean_ms`` and any other column (combined by its rule).
        barrier_window_s: rank 0's time from leaving the start barrier to leaving the end barrier; used
            instead of epoch clocks when the ranks are on different hosts (their clocks may disagree).
    Returns:
        The aggregate record (status ``ok``): every column of the rank rows by its declared rule, and
        ``throughput_samples_per_s`` = all samples / common window, ``throughput_per_gpu_samples_per_s``,
        ``straggler_rank``, ``straggler_gap_share``, accuracy, ``comm_exposed_share`` when measured, and what
        the derived columns read: ``timed_wall_s`` (the window), ``total_time_s`` (``images`` at the total rate).
    """
    recs = sorted(records, key=lambda r: r["rank"])
    r0 = recs[0]
    start, end, window = common_window(
        [r["window_start_epoch_s"] for r in recs], [r["window_end_epoch_s"] for r in recs]
    )
    if not _same_host(recs) and barrier_window_s is not None:
        window = barrier_window_s
    samples = sum(r["samples_timed"] for r in recs)
    total = samples / window
    windows = [r["window_end_epoch_s"] - r["window_start_epoch_s"] for r in recs]
    slow, gap = straggler(windows)
    out: dict[str, Any] = columns.combine(recs)
    if r0.get("rank_batch_size") is not None:
        out["global_batch_size"] = r0["rank_batch_size"] * len(recs)
    out.update(
        rank=None,
        aggregate=True,
        world_size=len(recs),
        hosts=len({r.get("host") for r in recs}),
        samples_timed=samples,
        window_s=window,
        window_start_epoch_s=start,
        window_end_epoch_s=end,
        barrier_window_s=barrier_window_s,
        throughput_samples_per_s=total,
        throughput_per_gpu_samples_per_s=total / len(recs),
        straggler_rank=recs[slow]["rank"],
        straggler_gap_share=gap,
        rank_window_max_s=max(windows),
        rank_window_min_s=min(windows),
        status=OK,
        error=None,
    )
    # what the derived columns read: the work cost is quoted for
    out["timed_wall_s"] = window
    if r0.get("images"):
        out["total_time_s"] = r0["images"] / total
    out.update(_accuracy(recs))
    out.update(_comm(recs))
    return out


def _accuracy(recs: Sequence[dict]) -> dict[str, Any]:
    if not all(r.get("accuracy_samples") for r in recs):
        return {}
    n = sum(r["accuracy_samples"] for r in recs)
    return {
        "accuracy_samples": n,
        "top1": sum(r["top1_correct"] for r in recs) / n,
        "top5": sum(r["top5_correct"] for r in recs) / n,
    }


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
    if not baseline or not baseline.get("throughput_samples_per_s") or agg.get("status") != OK:
        return {**agg, "speedup": None, "scaling_efficiency": None}
    s = scaling(
        agg["throughput_samples_per_s"],
        agg["world_size"],
        baseline["throughput_samples_per_s"],
        int(baseline["world_size"]),
    )
    return {
        **agg,
        "speedup": s.speedup,
        "scaling_efficiency": s.scaling_efficiency,
        "baseline_throughput_samples_per_s": baseline["throughput_samples_per_s"],
        "baseline_world_size": int(baseline["world_size"]),
        "baseline_case_id": baseline.get("case_id"),
    }


def rows_of(gathered: list[dict], key: str) -> tuple[list[tuple[dict, dict]], dict]:
    """The rank rows ``(record, series)`` (keys made unique per rank) and the aggregate row of one case, from
    every rank's ``{"record", "series"}`` (:func:`accelbench.launchers.torchrun.worker.measure_case`)."""
    recs = [g["record"] for g in gathered]
    world = len(recs)
    ranks = [
        (
            {
                **{k: v for k, v in g["record"].items() if not k.startswith("_")},
                "case_key": rank_key(key, world, g["record"]["rank"]),
            },
            g["series"],
        )
        for g in gathered
    ]
    agg = aggregate(recs, barrier_window_s=recs[0].get("barrier_window_s"))
    agg["case_key"] = aggregate_key(key, world)
    return ranks, agg


def find_baseline(store, run_id: int | None, workload: str, key: str, device_name: str | None) -> dict | None:
    """The aggregate row a case's speed-up is measured against.

    Preference: the smallest world size of the same case in the same run (the 1-GPU point of a scaling
    study), else the newest 1-process row of the same case on the same device model in any run.
    """
    pattern = key.replace("%", r"\%").replace("_", r"\_") + "|gpus=%|all"
    rows = [
        r
        for r in store.find_cases(key_like=pattern, workload=workload, status=OK)
        if device_name is None or r.get("device_name") == device_name
    ]
    same_run = [r for r in rows if r["run_id"] == run_id]
    if same_run:
        return min(same_run, key=lambda r: (r["world_size"], -r["case_id"]))
    return next((r for r in rows if r["world_size"] == 1), None)


def summary_line(agg: dict) -> str:
    """One line per finished case for the console, its rate in the samples of its scenario's metric map (images,
    tokens), with its speed-up and scaling efficiency once :func:`with_scaling` has given them."""
    from accelbench.core import columns

    eff = agg.get("scaling_efficiency")
    tail = f", speed-up {agg['speedup']:.2f}x, efficiency {100 * eff:.1f}%" if eff is not None else ""
    what = f"{agg.get('model')} bs={agg.get('batch_size')} {agg.get('precision')} {agg.get('mode')}"
    if agg.get("parallel_strategy"):  # a language model's step: DDP or FSDP2 over its mesh
        what += f" seq={agg.get('seq_len')} {agg['parallel_strategy']} ({agg.get('mesh')})"
    if agg.get("throughput_samples_per_s") is None:
        return f"{agg.get('workload')} {agg.get('case_key')} on {agg.get('world_size')} ranks"
    per = getattr(columns.of_row(agg), "per", None) or "sample"
    return (
        f"{agg['workload']} {what} on {agg['world_size']} ranks: {agg['throughput_samples_per_s']:,.1f} {per}s/s "
        f"({agg['throughput_per_gpu_samples_per_s']:,.1f} per rank){tail}"
    )
