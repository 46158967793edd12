"""Columns a timed case measures: passes and windows, throughput, latency percentiles and their intervals,
accuracy, and the quantized side of a case (int8, fp8)."""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import ANY, BOOL, FLOAT, INT, MAX, MIN, RANK, STR, SUM, col
from accelbench.core.columns.metric_map import MetricMap

TIMED = "inference train_step loadgen profile tune"
INFER = "inference loadgen tune"
QUANT = "inference tune"
QUANT_LM = QUANT + " generate"  # what the fp8 precision of a language model stores too


def _latency(prefix: str, what: str, scenarios: str, stats: str) -> tuple:
    """``<prefix>_<stat>_ms`` of one timed quantity (per rank: the aggregate row has none)."""
    words = {"p999": "p99.9"}
    return tuple(
        col(
            f"{prefix}_{k}_ms",
            FLOAT,
            f"{what} {words.get(k, k)} (ms)",
            "number",
            short=f"{words.get(k, k)} ms",
            combine=RANK,
            scenarios=scenarios,
        )
        for k in stats.split()
    )


def _intervals(prefix: str, what: str, scenarios: str) -> tuple:
    """The 95 % interval bounds of ``<prefix>`` p50 and p99 (``--repeats`` >= 2)."""
    return tuple(
        col(
            f"{prefix}_{p}_ci95_{end}_ms",
            FLOAT,
            f"{what} {p} 95% CI {end} (ms)",
            "number",
            combine=RANK,
            scenarios=scenarios,
        )
        for p in ("p50", "p99")
        for end in ("low", "high")
    )


DECLARED = (
    # passes, windows and what they timed
    col("passes", INT, "Passes", "int", doc="Passes over the images (or the data) the case timed."),
    col("pass_batches", INT, "Batches per pass", "int", scenarios="inference tune"),
    col("batches_timed", INT, "Batches timed", "int", combine=MAX, scenarios="inference tune"),
    col("steps_timed", INT, "Steps timed", "int", combine=MAX, scenarios="train_step profile"),
    col("samples_timed", INT, "Samples timed", "int", combine=SUM, doc="Samples in the timed window(s), every rank's."),
    col("timed_wall_s", FLOAT, "Timed wall time (s)", "fixed:.3f", combine=MAX),
    col("device_time_s", FLOAT, "Device time (s)", "fixed:.3f", combine=RANK),
    col("first_step_s", FLOAT, "First step (s)", "fixed:.2f", combine=MAX, scenarios="train_step"),
    col(
        "compile_s",
        FLOAT,
        "Compile (s)",
        "fixed:.1f",
        short="Comp. s",
        combine=MAX,
        doc="Time the backend took to build the model (compile, capture, export).",
    ),
    col("windows", INT, "Windows", "int", doc="Timed windows of the case (--repeats)."),
    col("window_batches", INT, "Batches per window", "int"),
    # throughput
    col(
        "throughput_samples_per_s",
        FLOAT,
        "Throughput (img/s)",
        "rate",
        short="img/s",
        combine=RANK,
        titles=(
            ("loadgen", "Samples/s"),
            ("scale", "Throughput (samples/s)"),
            ("concurrent", "Throughput (samples/s)"),
            ("tune", "samples/s"),
            ("tune-compact", "samples/s"),
            ("tune-front", "samples/s"),
        ),
        doc="Samples per second over the timed window (the aggregate row: every rank's samples over the common "
        "window).",
    ),
    col(
        "total_time_s",
        FLOAT,
        "Inference Time (s)",
        "fixed:.3f",
        combine=RANK,
        titles=(("cost", "Time (s)"),),
        doc="The time the images of one pass take at the measured throughput.",
    ),
    col("throughput_ci95_low_samples_per_s", FLOAT, "Throughput 95% CI low (samples/s)", "rate", combine=RANK),
    col("throughput_ci95_high_samples_per_s", FLOAT, "Throughput 95% CI high (samples/s)", "rate", combine=RANK),
    col("ci95_note", STR, "CI note", combine=RANK),
    # latency (inference, loadgen) and step time (training)
    *_latency("latency", "Latency", INFER, "mean min p50 p90 p95 p97 p99 p999 max"),
    col(
        "latency_spread",
        FLOAT,
        "Spread",
        "pct:1",
        combine=MAX,
        scenarios=INFER,
        doc="IQR / median of the batch latencies (the worst rank's).",
    ),
    col("latency_noisy", BOOL, "Latency noisy", "yesno", combine=ANY, scenarios=INFER),
    *_intervals("latency", "Latency", INFER),
    *_latency("step_time", "Step", "train_step", "mean min p50 p90 p99 max"),
    col("step_time_spread", FLOAT, "Spread", "pct:1", combine=MAX, scenarios="train_step profile"),
    col("step_time_noisy", BOOL, "Step time noisy", "yesno", combine=ANY, scenarios="train_step"),
    *_intervals("step_time", "Step", "train_step"),
    col(
        "step_time_nosync_mean_ms",
        FLOAT,
        "Step without all-reduce mean (ms)",
        "number",
        combine=RANK,
        scenarios="train_step",
        doc="The DDP step under no_sync() (the aggregate row: the ranks' mean).",
    ),
    # accuracy
    col(
        "top1",
        FLOAT,
        "Top-1",
        "pct:2",
        short_fmt="pct:1",
        combine=RANK,
        scenarios=INFER,
        doc="Top-1 accuracy (0..1) on the labelled images (the aggregate row: every rank's).",
    ),
    col("top5", FLOAT, "Top-5", "pct:2", combine=RANK, scenarios=INFER),
    col("accuracy_samples", INT, "Accuracy samples", "int", combine=SUM, scenarios=INFER),
    col("top1_correct", INT, "Top-1 correct", "int", combine=SUM, scenarios="inference"),
    col("top5_correct", INT, "Top-5 correct", "int", combine=SUM, scenarios="inference"),
    col(
        "outputs_finite",
        BOOL,
        "Outputs finite",
        "yesno",
        combine=MIN,
        scenarios=INFER,
        doc="False when the model's outputs held NaN or inf (on any rank).",
    ),
    col("top1_fp32_ref", FLOAT, "Top-1 fp32", "pct:2", combine=RANK, scenarios=QUANT),
    col(
        "top1_delta_pts",
        FLOAT,
        "Top-1 Δ (pts)",
        "signed:2",
        short="Δ pts",
        combine=RANK,
        scenarios=QUANT,
        doc="Top-1 minus the fp32 reference's, in percentage points.",
    ),
    col(
        "accuracy_target_met",
        BOOL,
        "Target Met",
        "yesno",
        combine=RANK,
        scenarios=QUANT,
        doc="Top-1 at least 99 % of the fp32 reference (MLPerf's closed-division rule).",
    ),
    # quantized precisions
    col(
        "simulated",
        BOOL,
        "Simulated",
        "yesno",
        scenarios=QUANT,
        doc="The precision has no kernel path here: accuracy measured in simulation, no speed.",
    ),
    col("quant_api", STR, "Quantization API", scenarios=QUANT_LM),
    col("quant_config", STR, "Quantization config", scenarios=QUANT_LM),
    col("quant_kernels", STR, "Quantized kernels", scenarios=QUANT_LM),
    col("calibration_data", STR, "Calibration data", scenarios=QUANT),
    col("calibration_images", INT, "Calibration images", "int", scenarios=QUANT),
    col("calibration_s", FLOAT, "Calibration (s)", "fixed:.1f", combine=MAX, scenarios=QUANT),
    col("fp8_linear_layers", INT, "FP8 linear layers", "int", scenarios=QUANT_LM),
    col("fp8_linear_layers_skipped", INT, "FP8 linear layers skipped", "int", scenarios=QUANT_LM),
    col("fp8_flops_share", FLOAT, "FP8 FLOPs", "pct:0", scenarios=QUANT, doc="Share of the FLOPs run in fp8."),
    col("compute_dtype", STR, "Compute dtype", scenarios=QUANT_LM),
)

METRIC_MAPS = (
    MetricMap(
        name="inference",
        workloads=(kinds.INFERENCE, kinds.INFERENCE_DP),
        kinds=(kinds.INFERENCE,),
        throughput="throughput_samples_per_s",
        throughput_unit="images/s",
        sample="image",
        latency="latency",
        latency_series="latency_ms",
        table=tuple(
            "model batch_size precision mode channels_last total_time_s throughput_samples_per_s latency_p50_ms "
            "latency_p99_ms latency_spread ci_throughput ci_latency_p50 ci_latency_p99 gpu_util_mean_pct "
            "device_mem_used_bytes peak_mem_bytes top1 top1_fp32_ref top1_delta_pts accuracy_target_met simulated "
            "fp8_linear fp8_flops_share power_mean_w energy_per_sample_j cost_per_1000_samples_usd validity "
            "status".split()
        ),
        compact=tuple(
            "model batch_size precision mode throughput_samples_per_s latency_p50_ms latency_p99_ms top1 "
            "top1_delta_pts energy_per_sample_j status".split()
        ),
        statistic="p50, p99: percentiles of every timed batch; img/s: images over the timed time",
        throughput_ci=("throughput_ci95_low_samples_per_s", "throughput_ci95_high_samples_per_s"),
    ),
)
