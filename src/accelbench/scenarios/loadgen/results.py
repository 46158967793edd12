"""LoadGen's logs read back into columns.

The detail log (``mlperf_log_detail.txt``) is one ``:::MLLOG {json}`` event per line; its ``result_*``,
``early_stopping_*`` and ``effective_*`` keys hold everything the summary prints. The figure of merit is
MLPerf's for each scenario (MLPerf Inference rules, "Scenarios"): SingleStream the 90th-percentile
latency, MultiStream the 99th-percentile latency of a query of 8 samples, Server the scheduled queries
per second at which the latency bound holds, Offline samples per second. LoadGen's latencies are in
nanoseconds; the columns are in milliseconds.

The accuracy log (``mlperf_log_accuracy.json``, AccuracyOnly mode) lists each sample's answer as hex
bytes: here the int32 top-5 class indices the SUT returned.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PERCENTILES = {"50.00": "p50", "90.00": "p90", "95.00": "p95", "97.00": "p97", "99.00": "p99", "99.90": "p999"}
FIGURE_OF_MERIT = {
    "SingleStream": ("latency_p90_ms", "p90 latency (ms)"),
    "MultiStream": ("latency_p99_ms", "p99 latency of 8 samples (ms)"),
    "Server": ("server_scheduled_qps", "scheduled QPS"),
    "Offline": ("throughput_samples_per_s", "samples/s"),
}


def read_detail(path: Path) -> dict[str, Any]:
    """Every event of a LoadGen detail log as ``{key: value}`` (a repeated key keeps its last value).

    Raises:
        FileNotFoundError: no log at ``path``.
    """
    out: dict[str, Any] = {}
    for line in Path(path).read_text().splitlines():
        if line.startswith(":::MLLOG "):
            event = json.loads(line[len(":::MLLOG ") :])
            out[event["key"]] = event["value"]
    return out


def _ms(ns: Any) -> float | None:
    return ns / 1e6 if isinstance(ns, (int, float)) else None


def invalid_reasons(d: dict[str, Any]) -> str | None:
    """Why LoadGen called the result INVALID, one line; None when VALID."""
    if d.get("result_validity") == "VALID":
        return None
    reasons = []
    if d.get("result_perf_constraints_met") is False:
        pct = d.get("effective_target_latency_percentile") or 0.99
        seen = _ms(d.get(f"result_{100 * pct:.2f}_percentile_latency_ns"))
        bound = _ms(d.get("effective_target_latency_ns"))
        reasons.append(
            f"latency bound not met (p{100 * pct:g} {seen:.3g} ms > {bound:g} ms)"
            if seen is not None and bound
            else "latency bound not met"
        )
    for key, text in (
        ("result_min_duration_met", "minimum duration not met"),
        ("result_min_queries_met", "minimum query count not met"),
        ("early_stopping_met", "early stopping not met (too few queries for the percentile)"),
    ):
        if d.get(key) is False:
            reasons.append(text)
    advice = str(d.get("result_invalid_reason") or "").strip()
    if advice:
        reasons.append(f"LoadGen: {advice}")
    return "; ".join(reasons) or f"result {d.get('result_validity')}"


def result_columns(d: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """Columns of one test from its detail log (``wall_s``: our window around the test, for the rates LoadGen
    does not log).

    Returns:
        ``loadgen_scenario``, ``result_validity``, ``invalid_reasons``, ``figure_of_merit`` (and its
        ``_name``), ``latency_p50_ms`` ... ``latency_p999_ms`` (per query; None for Offline, whose one query
        spans the test), ``early_stopping_latency_ms``, ``queries``, ``samples_per_query``, ``samples_timed``,
        ``throughput_qps``, ``throughput_samples_per_s``, the Server rates and targets, ``loadgen_version``.
    """
    scenario = d.get("effective_scenario")
    per_query = int(d.get("effective_samples_per_query") or 1)
    queries = int(d.get("result_query_count") or 0)
    samples = queries * per_query
    cols: dict[str, Any] = {
        "loadgen_scenario": scenario,
        "loadgen_mode": d.get("effective_test_mode"),
        "result_validity": d.get("result_validity"),
        "invalid_reasons": invalid_reasons(d),
        "queries": queries,
        "samples_per_query": per_query,
        "samples_timed": samples,
        "throughput_qps": queries / wall_s if wall_s and scenario != "Offline" else None,  # Offline: one query
        "min_duration_s": (d.get("effective_min_duration_ms") or 0) / 1e3,
        "min_query_count": d.get("effective_min_query_count"),
        "loadgen_version": d.get("loadgen_version"),
    }
    offline = scenario == "Offline"
    for pct, name in PERCENTILES.items():
        cols[f"latency_{name}_ms"] = None if offline else _ms(d.get(f"result_{pct}_percentile_latency_ns"))
    for stat in ("mean", "min", "max"):
        cols[f"latency_{stat}_ms"] = None if offline else _ms(d.get(f"result_{stat}_latency_ns"))
    early = d.get("early_stopping_latency_ss" if scenario == "SingleStream" else "early_stopping_latency_ms")
    cols["early_stopping_latency_ms"] = _ms(early) if scenario in ("SingleStream", "MultiStream") else None
    rate = {
        "Offline": d.get("result_samples_per_second"),
        "Server": d.get("result_completed_samples_per_sec"),
        "SingleStream": d.get("result_qps_with_loadgen_overhead"),
    }.get(scenario)
    cols["throughput_samples_per_s"] = rate if rate is not None else (samples / wall_s if wall_s else None)
    if scenario == "Server":
        cols.update(
            server_target_qps=d.get("effective_target_qps"),
            server_latency_bound_ms=_ms(d.get("effective_target_latency_ns")),
            server_scheduled_qps=d.get("result_scheduled_samples_per_sec"),
            server_overlatency_queries=d.get("result_overlatency_query_count"),
        )
    key, name = FIGURE_OF_MERIT.get(scenario, (None, None))
    cols["figure_of_merit"] = cols.get(key) if key else None
    cols["figure_of_merit_name"] = name
    return cols


def accuracy(path: Path, labels) -> dict[str, Any]:
    """Top-1 and top-5 of an AccuracyOnly test from its accuracy log.

    Args:
        path: ``mlperf_log_accuracy.json``; each entry's ``data`` is the hex of the int32 top-5 indices.
        labels: sequence of int labels indexed by QSL index.
    Returns:
        ``top1``, ``top5`` (fractions) and ``accuracy_samples`` (distinct samples answered).
    """
    import numpy as np

    seen: dict[int, np.ndarray] = {}
    for entry in json.loads(Path(path).read_text() or "[]"):
        seen[int(entry["qsl_idx"])] = np.frombuffer(bytes.fromhex(entry["data"]), dtype=np.int32)
    n = len(seen)
    hits1 = sum(int(top.size > 0 and top[0] == labels[i]) for i, top in seen.items())
    hits5 = sum(int(labels[i] in top) for i, top in seen.items())
    return {"top1": hits1 / n if n else None, "top5": hits5 / n if n else None, "accuracy_samples": n}
