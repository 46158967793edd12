"""Columns of an MLPerf LoadGen test (``accelbench loadgen``): the scenario, LoadGen's verdict and figure of
merit, its query counts and settings, the batching SUT, and the Server QPS search."""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import BOOL, FLOAT, INT, RANK, STR, col
from accelbench.core.columns.metric_map import MetricMap

L = "loadgen"

DECLARED = (
    col("loadgen_scenario", STR, "Scenario", scenarios=L, levels="SingleStream MultiStream Server Offline"),
    col("loadgen_mode", STR, "LoadGen mode", scenarios=L),
    col(
        "result_validity",
        STR,
        "LoadGen",
        scenarios=L,
        levels="INVALID VALID",
        titles=(("loadgen-compact", ""),),
        doc="LoadGen's verdict.",
    ),
    col("invalid_reasons", STR, "Invalid reasons", scenarios=L),
    col(
        "figure_of_merit",
        FLOAT,
        "Figure of merit",
        "number",
        scenarios=L,
        doc="MLPerf's figure: p90 latency (ms, SingleStream), p99 latency (ms, MultiStream), QPS (Server), "
        "samples/s (Offline); figure_of_merit_name says which.",
    ),
    col("figure_of_merit_name", STR, "Figure of merit name", scenarios=L),
    col("queries", INT, "Queries", "int", scenarios=L),
    col("samples_per_query", INT, "Samples per query", "int", scenarios=L),
    col("throughput_qps", FLOAT, "QPS", "rate", combine=RANK, scenarios=L),
    col("min_duration_s", FLOAT, "Minimum duration (s)", "number", scenarios=L),
    col("min_query_count", INT, "Minimum queries", "int", scenarios=L),
    col("loadgen_version", STR, "LoadGen version", scenarios=L),
    col(
        "early_stopping_latency_ms",
        FLOAT,
        "Early-stop latency (ms)",
        "number",
        short="Early-stop ms",
        combine=RANK,
        scenarios=L,
    ),
    col("batches", INT, "Batches", "int", scenarios=L),
    col("batch_size_mean", FLOAT, "Batch mean", "fixed:.1f", scenarios=L),
    col("sut_host_us_per_batch", FLOAT, "SUT host (us/batch)", "fixed:.0f", scenarios=L),
    col(
        "sut_host_share",
        FLOAT,
        "SUT host share",
        "pct:1",
        scenarios=L,
        doc="Share of the test's wall time the SUT's host code took.",
    ),
    col("loadgen_log_dir", STR, "LoadGen log folder", scenarios=L),
    col("energy_per_query_j", FLOAT, "J/query", "number", combine=RANK, scenarios=L),
    col("qsl_samples", INT, "QSL samples", "int", scenarios=L),
    col("batch_sizes_built", STR, "Batch sizes built", scenarios=L),
    col("forward_ms_at_batch", FLOAT, "Forward at batch (ms)", "number", scenarios=L),
    col("mlperf_rules", BOOL, "MLPerf rules", "yesno", scenarios=L),
    col("batch_timeout_us", INT, "Batch timeout (us)", "int", scenarios=L),
    col("server_target_qps", FLOAT, "Target QPS", "rate", scenarios=L),
    col("server_latency_bound_ms", FLOAT, "Server latency bound (ms)", "number", scenarios=L),
    col("server_scheduled_qps", FLOAT, "Scheduled QPS", "rate", scenarios=L),
    col("server_overlatency_queries", INT, "Queries over the bound", "int", scenarios=L),
    col("server_capacity_qps", FLOAT, "Capacity QPS", "rate", scenarios=L),
    col("server_search_probes", INT, "Search probes", "int", scenarios=L),
    col("server_lowest_invalid_qps", FLOAT, "Lowest invalid QPS", "rate", scenarios=L),
    col("server_peak_qps", FLOAT, "Peak QPS", "rate", scenarios=L),
    col("server_search_floor_qps", FLOAT, "Search floor QPS", "rate", scenarios=L),
)

METRIC_MAPS = (
    MetricMap(
        name="loadgen",
        workloads=(kinds.LOADGEN,),
        kinds=(kinds.LOADGEN,),
        throughput="throughput_samples_per_s",
        throughput_unit="samples/s",
        sample="query sample",
        latency="latency",
        table=tuple(
            "model loadgen_scenario batch_size precision mode figure_of_merit_text result_validity "
            "throughput_samples_per_s throughput_qps server_target_qps latency_p50_ms latency_p90_ms latency_p99_ms "
            "latency_p999_ms early_stopping_latency_ms batch_size_mean sut_host_us_per_batch sut_host_share top1 "
            "power_mean_w energy_per_query_j cost_per_1000_samples_usd validity status".split()
        ),
        compact=tuple(
            "model loadgen_scenario batch_size precision mode figure_of_merit_text latency_p99_ms "
            "result_validity energy_per_sample_j status".split()
        ),
        section="loadgen",
    ),
)
