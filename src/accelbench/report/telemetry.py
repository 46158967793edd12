"""Rich tables for telemetry (the seed study's utilisation / power / energy / cost layout) and costs."""

from __future__ import annotations

from typing import Iterable

from rich.table import Table

from accelbench.report.table import results_table
from accelbench.report.units import usd


def _f(fmt: str, scale: float = 1.0):
    return lambda v: format(v * scale, fmt)


TELEMETRY_COLUMNS = [
    ("Model", "model", str),
    ("Batch Size", "batch_size", str),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("Throughput (img/s)", "throughput_samples_per_s", _f(",.1f")),
    ("GPU Util (%)", "gpu_util_mean_pct", _f(".0f")),
    ("SM Active (%)", "gpm_sm_util_pct", _f(".1f")),
    ("Tensor Active (%)", "gpm_tensor_util_pct", _f(".1f")),
    ("DRAM BW (%)", "gpm_dram_bw_util_pct", _f(".1f")),
    ("Memory Used (MB)", "device_mem_used_bytes", _f(",.0f", 1e-6)),
    ("Power min/avg/max (W)", "_power_range", str),
    ("Idle (W)", "idle_power_w", _f(".0f")),
    ("Temp max (C)", "temp_max_c", _f(".0f")),
    ("SM Clock (MHz)", "sm_clock_mean_mhz", _f(".0f")),
    ("CPU proc (%)", "process_cpu_util_pct", _f(".0f")),
    ("Energy/img (mJ)", "energy_per_sample_j", _f(".2f", 1e3)),
    ("Above idle/img (mJ)", "energy_above_idle_per_sample_j", _f(".2f", 1e3)),
    ("Energy conf.", "energy_confidence", str),
    ("$/1k img", "cost_per_1000_samples_usd", usd),
    ("Validity", "validity", str),
    ("Status", "status", str),
]

COST_COLUMNS = [
    ("Device", "device_name", str),
    ("Configuration", "_configuration", str),
    ("Time (s)", "total_time_s", _f(".3f")),
    ("Throughput (img/s)", "throughput_samples_per_s", _f(",.1f")),
    ("$/hour", "price_per_hour_usd", _f(".3f")),
    ("Total Cost", "cost_usd", usd),
    ("$/1,000 images", "cost_per_1000_samples_usd", usd),
    ("Electricity $/1,000", "electricity_cost_per_1000_samples_usd", usd),
    ("Validity", "validity", str),
    ("Status", "status", str),
]


def _num(v):
    return None if v is None or v != v else v


def _display(r: dict) -> dict:
    out = dict(r)
    p = [_num(r.get(k)) for k in ("power_min_w", "power_mean_w", "power_max_w")]
    out["_power_range"] = " / ".join(f"{x:.0f}" for x in p) if all(x is not None for x in p) else None
    nhwc = " NHWC" if r.get("channels_last") else ""
    out["_configuration"] = f"{r.get('model')} bs={r.get('batch_size')} {r.get('precision')} {r.get('mode')}{nhwc}"
    return out


def telemetry_table(records: Iterable[dict], title: str | None = None) -> Table:
    """Per case: utilisation (NVML and GPM), power min/avg/max, idle power, temperature, clocks,
    energy per image (total and above idle), $ per 1,000 images and validity."""
    return results_table([_display(r) for r in records], title=title, columns=TELEMETRY_COLUMNS)


def cost_table(records: Iterable[dict], title: str | None = None) -> Table:
    """The reference study's cost comparison: configuration, time, throughput, $/hour, total cost,
    $/1,000 images (one row per record given; see :func:`accelbench.cost.best_rows`)."""
    return results_table([_display(r) for r in records], title=title, columns=COST_COLUMNS)
