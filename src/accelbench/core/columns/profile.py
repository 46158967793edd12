"""Columns of a profiled step: analytic counts against the roofline, the measured step, and what Nsight Compute
measured (step totals ``ncu_*`` and per kernel family ``family_<name>_*``: one declaration serves each family)."""

from __future__ import annotations

from accelbench.core import kinds
from accelbench.core.columns.column import FLOAT, INT, JSON, STR, col
from accelbench.core.columns.metric_map import MetricMap

P = "profile"

# (suffix, type, label, format, scale) of the totals of a kernel set: the step's (ncu_) and each family's
TOTALS = (
    ("kernels", INT, "kernels", "int", 1.0),
    ("time_s", FLOAT, "time (ms)", "number:4", 1e3),
    ("time_share", FLOAT, "time share", "pct:1", 1.0),
    ("flops", FLOAT, "GFLOP", "fixed:,.2f", 1e-9),
    ("flops_fp32", FLOAT, "fp32 GFLOP", "fixed:,.2f", 1e-9),
    ("flops_fp16", FLOAT, "fp16 GFLOP", "fixed:,.2f", 1e-9),
    ("flops_fp64", FLOAT, "fp64 GFLOP", "fixed:,.2f", 1e-9),
    ("flops_tensor", FLOAT, "tensor GFLOP", "fixed:,.2f", 1e-9),
    ("dram_read_bytes", FLOAT, "DRAM read MB", "fixed:,.1f", 1e-6),
    ("dram_write_bytes", FLOAT, "DRAM write MB", "fixed:,.1f", 1e-6),
    ("dram_bytes", FLOAT, "DRAM MB", "fixed:,.1f", 1e-6),
    ("intensity_flop_per_byte", FLOAT, "FLOP/B", "fixed:.1f", 1.0),
    ("achieved_flops_per_s", FLOAT, "FLOP/s", "si:FLOP/s", 1.0),
    ("achieved_bytes_per_s", FLOAT, "B/s", "si:B/s", 1.0),
    ("ceiling_name", STR, "ceiling", "text", 1.0),
    ("bound", STR, "Bound", "text", 1.0),
    ("roof_fraction", FLOAT, "% roof", "pct:0", 1.0),
)


def _totals(prefix: str, who: str) -> tuple:
    return tuple(
        col(f"{prefix}_{suffix}", typ, f"{who} {label}".strip(), fmt, scale=scale, scenarios=P)
        for suffix, typ, label, fmt, scale in TOTALS
    )


_NCU = {c.name: c for c in _totals("ncu", "ncu")}
_NCU["ncu_bound"] = col(
    "ncu_bound",
    STR,
    "Bound",
    scenarios=P,
    levels="memory compute",
    doc="memory or compute: the step against its precision's ridge point.",
)
_NCU["ncu_roof_fraction"] = col(
    "ncu_roof_fraction",
    FLOAT,
    "% roof",
    "pct:0",
    short="Roof",
    scenarios=P,
    doc="Achieved FLOP/s over the attainable roof at the step's intensity.",
)

DECLARED = (
    col(
        "step",
        STR,
        "Step",
        scenarios=P,
        doc="inference or train (an image model), prefill or decode (a language model): the profiled step.",
    ),
    # analytic counts and the roofline of the step's precision
    col("analytic_flops", FLOAT, "Analytic GFLOP", "fixed:,.2f", scale=1e-9, scenarios=P),
    col("analytic_forward_flops", FLOAT, "Analytic forward GFLOP", "fixed:,.2f", scale=1e-9, scenarios=P),
    col(
        "analytic_min_bytes",
        INT,
        "Min MB",
        "fixed:,.1f",
        scale=1e-6,
        scenarios=P,
        doc="The fewest DRAM bytes the step must move: parameters, inputs, activations once.",
    ),
    col("analytic_activation_bytes", INT, "Activation bytes", "si:B", scenarios=P),
    col("analytic_input_bytes", INT, "Input bytes", "si:B", scenarios=P),
    col("analytic_intensity_flop_per_byte", FLOAT, "Analytic FLOP/B", "fixed:.1f", scenarios=P),
    col("analytic_flop_calls", JSON, "Counted op calls", scenarios=P, doc="[[op, FLOPs], ...] in call order."),
    col("analytic_flops_by_op", JSON, "FLOPs by op", scenarios=P, doc="{op: FLOPs}."),
    col("analytic_uncounted_ops", JSON, "Uncounted ops", scenarios=P, doc="{op: calls} FlopCounterMode cannot count."),
    col("analytic_bound", STR, "Analytic bound", scenarios=P, levels="memory compute"),
    col("ceiling_name", STR, "Ceiling", scenarios=P),
    col("ceiling_flops_per_s", FLOAT, "Ceiling FLOP/s", "si:FLOP/s", scenarios=P),
    col("ceiling_dram_bytes_per_s", FLOAT, "Ceiling DRAM B/s", "si:B/s", scenarios=P),
    col("ridge_point_flop_per_byte", FLOAT, "Ridge point (FLOP/B)", "fixed:.1f", scenarios=P),
    col("datasheet_flops_per_s", FLOAT, "Datasheet FLOP/s", "si:FLOP/s", scenarios=P),
    col("datasheet_dram_bytes_per_s", FLOAT, "Datasheet DRAM B/s", "si:B/s", scenarios=P),
    col("theoretical_time_s", FLOAT, "Theory (ms)", "number:4", scale=1e3, scenarios=P),
    col("theoretical_compute_time_s", FLOAT, "Theory compute (ms)", "number:4", scale=1e3, scenarios=P),
    col("theoretical_memory_time_s", FLOAT, "Theory memory (ms)", "number:4", scale=1e3, scenarios=P),
    # the measured step
    col(
        "step_time_s",
        FLOAT,
        "Step (ms)",
        "number:4",
        short="ms",
        short_fmt="number",
        scale=1e3,
        scenarios=P,
        doc="The median step time.",
    ),
    col("step_time_mean_s", FLOAT, "Step mean (ms)", "number:4", scale=1e3, scenarios=P),
    col("step_time_min_s", FLOAT, "Step min (ms)", "number:4", scale=1e3, scenarios=P),
    col("step_time_p99_s", FLOAT, "Step p99 (ms)", "number:4", scale=1e3, scenarios=P),
    col("measured_vs_theoretical", FLOAT, "Meas/Theory", "times:2", short="Meas/Th", scenarios=P),
    col("achieved_flops_per_s", FLOAT, "Achieved FLOP/s", "si:FLOP/s", short="FLOP/s", scenarios=P),
    col(
        "achieved_bytes_per_s",
        FLOAT,
        "Achieved B/s",
        "si:B/s",
        short="B/s",
        scenarios=P,
        doc="The analytic least bytes over the median step time: the bandwidth the step needed at least.",
    ),
    col("roof_fraction", FLOAT, "Analytic % roof", "pct:0", scenarios=P),
    col("charts", JSON, "Charts", scenarios=P, doc="The chart files written for the case."),
    col("chart_error", STR, "Chart error", scenarios=P),
    # Nsight Compute
    col("ncu_status", STR, "ncu status", scenarios=P, doc="ok, skipped, unavailable or error."),
    col("ncu_error", STR, "ncu error", scenarios=P),
    col("ncu_wall_s", FLOAT, "ncu (s)", "fixed:.0f", scenarios=P),
    col("ncu_metrics", JSON, "ncu metrics", scenarios=P),
    col("ncu_missing_metrics", JSON, "ncu missing metrics", scenarios=P),
    *_NCU.values(),
    col("ncu_tensor_source", STR, "ncu tensor source", scenarios=P),
    col("ncu_zero_dram_kernels", INT, "ncu kernels without DRAM traffic", "int", scenarios=P),
    col(
        "ncu_time_over_step",
        FLOAT,
        "ncu kernels / step",
        "times:2",
        scenarios=P,
        doc="The sum of ncu's kernel times over the step's median time without ncu (step_time_s). Above 1, ncu's "
        "replays (each kernel alone, caches flushed) take longer than the step runs them, the short kernels most: "
        "their achieved rates read low. Below 1, the step spends the rest outside its kernels (launch gaps, host "
        "time).",
    ),
    col("ncu_gemm_conv_flops", FLOAT, "ncu GEMM/conv GFLOP", "fixed:,.2f", scale=1e-9, scenarios=P),
    col(
        "flops_agreement",
        FLOAT,
        "GEMM/conv vs analytic",
        "spct:2",
        scenarios=P,
        doc="(GEMM/convolution kernels' FLOPs - analytic FLOPs) / analytic FLOPs.",
    ),
    col("ncu_flops_vs_analytic", FLOAT, "ncu vs analytic FLOPs", "spct:2", scenarios=P),
    col("layers_paired", INT, "Layers paired", "int", scenarios=P),
    col("layers_within_2pct", INT, "Layers within 2%", "int", scenarios=P),
    col("layer_flops_ratio_median", FLOAT, "Layer FLOPs ratio median", "fixed:.3f", scenarios=P),
    col("layer_flops_ratio_max", FLOAT, "Layer FLOPs ratio max", "fixed:.3f", scenarios=P),
    col("layer_flops_ratio_max_kernel", STR, "Layer FLOPs ratio max kernel", scenarios=P),
    col("layer_flops_ratio_max_analytic_flops", FLOAT, "Layer FLOPs ratio max analytic FLOPs", "si:FLOP", scenarios=P),
    *_totals("family_*", "Family"),
)

METRIC_MAPS = (
    MetricMap(
        name="profile",
        workloads=(kinds.PROFILE,),
        kinds=(kinds.PROFILE,),
        table=tuple(
            "model step batch_size precision mode step_time_s analytic_flops analytic_min_bytes theoretical_time_s "
            "measured_vs_theoretical achieved_flops_per_s ncu_flops ncu_dram_bytes ncu_intensity_flop_per_byte "
            "ncu_achieved_flops_per_s ncu_bound ncu_roof_fraction flops_agreement ncu_wall_s status".split()
        ),
        compact=tuple(
            "model step batch_size precision mode step_time_s measured_vs_theoretical achieved_flops_per_s "
            "ncu_bound ncu_roof_fraction status".split()
        ),
        section="profile",
    ),
)
