"""Which columns each report table shows, in which order. What a column's header and cells look like is not here:
it is the column's declaration (:mod:`accelbench.core.columns`: label, short label, display format), so the
terminal tables, the HTML/markdown report and every table of one kind of figure agree.

A table is a layout (:data:`LAYOUTS`; a scenario's own tables are those its metric map declares,
:attr:`accelbench.core.columns.MetricMap.table` and ``compact``) plus every declared column whose ``views`` names the table (a new column
joins a table from its declaration alone, before the table's Validity/Status). A few cells are computed from
other columns for display (:data:`DISPLAY`: an interval from its two bounds, the power range, a LoadGen result
with its unit); they are never stored.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from accelbench.core import columns
from accelbench.core.columns import FLOAT, STR, Column, col
from accelbench.report.units import formatter, ms, rate

_FIGURE_UNITS = {"SingleStream": "p90", "MultiStream": "p99", "Server": "QPS", "Offline": "samples/s"}


def figure_text(r: dict[str, Any]) -> str | None:
    """MLPerf's figure of merit with its unit: ``920 µs p90``, ``26,100 QPS``, ``27,300 samples/s`` (a latency
    figure is stored in ms)."""
    v, sc = r.get("figure_of_merit"), r.get("loadgen_scenario")
    if not isinstance(v, (int, float)) or v != v or sc not in _FIGURE_UNITS:
        return None
    return f"{ms(v)} {_FIGURE_UNITS[sc]}" if sc in ("SingleStream", "MultiStream") else f"{rate(v)} {_FIGURE_UNITS[sc]}"


def _both(r: dict, lo: str, hi: str):
    a, b = r.get(lo), r.get(hi)
    return (a, b) if a is not None and b is not None else None


def _interval(name: str, label: str, prefix: str, ends: tuple[str, str] = ("ci95_low_ms", "ci95_high_ms")):
    column = col(name, FLOAT, label, "interval", stored=False)
    return name, (column, lambda r: _both(r, f"{prefix}_{ends[0]}", f"{prefix}_{ends[1]}"))


def _fp8(r: dict) -> str | None:
    a, b = r.get("fp8_linear_layers"), r.get("fp8_linear_layers_skipped")
    return f"{a:.0f} (+{b:.0f} bf16)" if a is not None and b is not None else None


def _power(r: dict) -> str | None:
    p = [r.get(k) for k in ("power_min_w", "power_mean_w", "power_max_w")]
    return " / ".join(f"{x:.0f}" for x in p) if all(x is not None for x in p) else None


def _configuration(r: dict) -> str:
    nhwc = " NHWC" if r.get("channels_last") else ""
    return f"{r.get('model')} bs={r.get('batch_size')} {r.get('precision')} {r.get('mode')}{nhwc}"


# display cells: name -> (their column, the function of a row that gives the value)
DISPLAY: dict[str, tuple[Column, Callable[[dict], Any]]] = dict(
    (
        _interval(
            "ci_throughput", "Throughput 95% CI", "throughput", ("ci95_low_samples_per_s", "ci95_high_samples_per_s")
        ),
        _interval("ci_latency_p50", "Latency p50 95% CI (ms)", "latency_p50"),
        _interval("ci_latency_p99", "Latency p99 95% CI (ms)", "latency_p99"),
        _interval("ci_step_time_p50", "Step p50 95% CI (ms)", "step_time_p50"),
        _interval("ci_step_time_p99", "Step p99 95% CI (ms)", "step_time_p99"),
        ("fp8_linear", (col("fp8_linear", STR, "FP8 Linear", stored=False), _fp8)),
        ("power_range", (col("power_range", STR, "Power min/avg/max (W)", stored=False), _power)),
        ("configuration", (col("configuration", STR, "Configuration", stored=False), _configuration)),
        ("figure_of_merit_text", (col("figure_of_merit_text", STR, "Result", stored=False), figure_text)),
        (
            "cost_per_million_tokens",
            (
                col("cost_per_million_tokens", FLOAT, "$/1M tokens", "usd", stored=False),
                lambda r: None if r.get("cost_per_1000_samples_usd") is None else 1000 * r["cost_per_1000_samples_usd"],
            ),
        ),  # a generate row's sample: a token
        (
            "memory_bytes",
            (
                col("memory_bytes", FLOAT, "Memory (MB)", "number", short="MB", scale=1e-6, stored=False),
                lambda r: r.get("peak_mem_bytes") or r.get("process_rss_bytes"),
            ),
        ),
    )
)

LAYOUTS: dict[str, str] = {
    "telemetry": "model batch_size precision mode throughput_samples_per_s gpu_util_mean_pct gpm_sm_util_pct "
    "gpm_tensor_util_pct gpm_dram_bw_util_pct device_mem_used_bytes power_range idle_power_w temp_max_c "
    "sm_clock_mean_mhz process_cpu_util_pct energy_per_sample_j energy_above_idle_per_sample_j "
    "energy_confidence cost_per_1000_samples_usd validity status",
    "cost": "device_name configuration total_time_s throughput_samples_per_s price_per_hour_usd cost_usd "
    "cost_per_1000_samples_usd electricity_cost_per_1000_samples_usd validity status",
    "scale": "model workload precision mode parallel_strategy mesh world_size batch_size seq_len rank_batch_size "
    "throughput_samples_per_s "
    "throughput_per_gpu_samples_per_s speedup scaling_efficiency straggler_gap_share comm_exposed_share "
    "gpu_util_mean_pct status",
    "scale-compact": "precision mode parallel_strategy world_size rank_batch_size throughput_samples_per_s "
    "throughput_per_gpu_samples_per_s scaling_efficiency status",
    "tensor-parallel": "run_id model precision mode batch_size prompt_len new_tokens device_name tp_degree "
    "decode_tokens_per_s decode_tokens_per_s_per_gpu tpot_p50_ms tp_efficiency tpot_speedup allreduce_share "
    "weight_bytes_per_gpu cost_per_million_tokens decode_kernel_families",
    "collective": "op size_bytes world_size backend time_s algbw_bytes_per_s busbw_bytes_per_s status",
    "p2p": "src_device dst_device link bandwidth_bytes_per_s",
    "concurrent": "schedule job model workload world_size throughput_samples_per_s status",
    "pipeline": "source loader_workers loader_pin_memory batch_size image_size loader_samples_per_s loader_startup_s "
    "cache_state cold_method read_bytes read_mb_per_s page_cache_resident_fraction status",
    "summary": "batch_size lr_peak epochs_done final_eval_top1 best_eval_top1 best_epoch epochs_to_target "
    "time_to_target_s samples_per_s_mean total_wall_s input_bound_epochs status",
    "epoch": "batch_size epoch eval_top1 train_loss elapsed_s samples_per_s",
    "tune": "tune_stage precision mode batch_size status throughput_samples_per_s latency_p50_ms latency_p99_ms "
    "energy_per_sample_j case_wall_s",
    "tune-compact": "tune_stage precision mode batch_size status throughput_samples_per_s latency_p99_ms case_wall_s",
    "tune-front": "precision mode batch_size throughput_samples_per_s latency_p50_ms latency_p99_ms energy_per_sample_j "
    "memory_bytes tune_stage",
}
# a scenario's tables are its metric map's (accelbench.core.columns.MetricMap: table, compact)
for _m in columns.MAPS.values():
    if _m.table:
        LAYOUTS[_m.name] = " ".join(_m.table)
    if _m.compact:
        LAYOUTS[f"{_m.name}-compact"] = " ".join(_m.compact)
_TAIL = ("validity", "status")
# what a compact table's figures are (its scenario's statistic), where its headers have no room to say it
CAPTIONS: dict[str, str] = {f"{m.name}-compact": m.statistic for m in columns.MAPS.values() if m.statistic}


def column(name: str) -> Column | None:
    """The declaration of a stored column or of a display cell."""
    shown = DISPLAY.get(name)
    return shown[0] if shown is not None else columns.get(name)


def names(view: str) -> list[str]:
    """The columns of table ``view``: its layout, and before its Validity/Status the columns declared for it."""
    layout = LAYOUTS[view].split()
    extra = [c.name for c in columns.in_view(view) if c.name not in layout]
    cut = len(layout)
    while cut and layout[cut - 1] in _TAIL:
        cut -= 1
    return layout[:cut] + extra + layout[cut:]


def view(name: str, compact: bool | None = None) -> list[tuple[str, str, Callable[[Any], str]]]:
    """``(header, key, formatter)`` of each column of table ``name``, as :func:`accelbench.report.table.results_table`
    takes them; ``compact`` (default: a ``-compact`` table) picks the short headers and formats.

    Raises:
        KeyError: an unknown table, or a layout naming an undeclared column.
    """
    short = name.endswith("-compact") if compact is None else compact
    out = []
    for key in names(name):
        c = column(key)
        if c is None:
            raise KeyError(f"table {name} shows {key}, which no column declares")
        out.append((c.header(name, short), key, formatter(c.format_kind(short), c.scale)))
    return out


# the scaling table's rates, headed in the unit of its rows' metric map (a language model's steps count tokens)
_SCALE_RATES = {
    "throughput_samples_per_s": "Throughput",
    "throughput_per_gpu_samples_per_s": "Per GPU",
    "baseline_throughput_samples_per_s": "Baseline throughput",
}


def scale_view(records: Iterable[dict], compact: bool = False) -> list[tuple[str, str, Callable[[Any], str]]]:
    """The scaling table (:func:`view` of ``scale``, or ``scale-compact``: the columns that fit 80) for ``records``:
    its rates headed in the throughput unit of the rows' metric map
    (:attr:`accelbench.core.columns.MetricMap.throughput_unit`: ``tokens/s`` for a language model's training steps,
    ``images/s`` for an image classifier's) when every row has the same map, ``samples/s`` else."""
    unit = throughput_unit(records)
    heads = (
        {"throughput_samples_per_s": unit, "throughput_per_gpu_samples_per_s": "per GPU"}
        if compact
        else {k: f"{head} ({unit})" for k, head in _SCALE_RATES.items()}
    )
    return [(heads.get(k, head), k, fmt) for head, k, fmt in view("scale-compact" if compact else "scale")]


def throughput_unit(records: Iterable[dict]) -> str:
    """The unit of ``throughput_samples_per_s`` in ``records``: their metric map's
    (:attr:`accelbench.core.columns.MetricMap.throughput_unit`) when every row has the same map, ``samples/s`` else."""
    maps = {columns.of_row(r) for r in records}
    return maps.pop().throughput_unit if len(maps) == 1 and None not in maps else "samples/s"


def caption(view: str) -> str | None:
    """The line under table ``view`` (:data:`CAPTIONS`), or None."""
    return CAPTIONS.get(view)


def is_text(key: str) -> bool:
    """A column shown as text (left-aligned)."""
    c = column(key) if isinstance(key, str) else None
    return c is not None and c.format_kind().partition(":")[0] == "text"


def with_display(records: Iterable[dict]) -> list[dict]:
    """The rows, each with its display cells (:data:`DISPLAY`) computed."""
    return [{**r, **{k: fn(r) for k, (_, fn) in DISPLAY.items()}} for r in records]
