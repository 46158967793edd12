"""Columns of the telemetry around a case's timed window: GPU signals (NVML, GPM), throttling, energy, the CPU
and its package energy (RAPL), memory, and the idle power measured before a sweep.

Their rules combine the GPUs one process watches (``accelbench.telemetry.aggregate.combine``) and the ranks of a
``--gpus`` case alike: power, energy and traffic add up; a maximum, a throttled share or a variation is the
worst GPU's, so one throttled GPU flags the row.
"""

from __future__ import annotations

from accelbench.core.columns.column import FIRST, FLOAT, INT, JOIN, MAX, MEAN, MIN, STR, SUM, col

# (sample signal, label, unit suffix, rule of the mean) with min/mean/max columns each
SIGNALS = (
    ("gpu_util", "GPU utilisation", "pct", MEAN),
    ("mem_util", "Memory utilisation", "pct", MEAN),
    ("power", "Power", "w", SUM),
    ("temp", "Temperature", "c", MEAN),
    ("sm_clock", "SM clock", "mhz", MEAN),
    ("mem_clock", "Memory clock", "mhz", MEAN),
    ("pcie_tx", "PCIe TX", "bytes_per_s", SUM),
    ("pcie_rx", "PCIe RX", "bytes_per_s", SUM),
)
_UNIT = {"pct": "%", "w": "W", "c": "°C", "mhz": "MHz", "bytes_per_s": "B/s"}
# the columns a table shows, with their header and format
_SHOWN = {
    "gpu_util_mean_pct": ("GPU Util (%)", "fixed:.0f"),
    "power_mean_w": ("Power avg (W)", "fixed:.0f"),
    "temp_max_c": ("Temp max (C)", "fixed:.0f"),
    "sm_clock_mean_mhz": ("SM Clock (MHz)", "fixed:.0f"),
}


def _signal(name: str, label: str, unit: str, mean_rule: str) -> tuple:
    out = []
    for stat, rule in (("min", MIN), ("mean", mean_rule), ("max", MAX)):
        key = f"{name}_{stat}_{unit}"
        # a sum over GPUs (power, traffic) sums each GPU's extreme too: a bound of the job's
        rule = SUM if mean_rule == SUM else rule
        head, fmt = _SHOWN.get(key, (f"{label} {stat} ({_UNIT[unit]})", "number"))
        out.append(col(key, FLOAT, head, fmt, combine=rule))
    return tuple(out)


DECLARED = (
    *(c for signal in SIGNALS for c in _signal(*signal)),
    col(
        "device_mem_used_bytes",
        FLOAT,
        "Memory Used (MB)",
        "fixed:,.0f",
        scale=1e-6,
        combine=MAX,
        doc="Device memory used (NVML), the largest sample.",
    ),
    col("device_mem_used_mean_bytes", FLOAT, "Memory used mean (MB)", "fixed:,.0f", scale=1e-6, combine=MAX),
    col("power_source", STR, "Power source", combine=JOIN),
    col("pcie_source", STR, "PCIe source", combine=JOIN),
    col("sm_clock_variation", FLOAT, "SM clock variation", "pct:1", combine=MAX, doc="(p95 - p5) / median."),
    col("clocks_event_reasons", STR, "Clock event reasons", combine=JOIN),
    col("throttle_samples", INT, "Throttled samples", "int", combine=SUM),
    col(
        "throttle_sample_frac",
        FLOAT,
        "Throttled share",
        "pct:1",
        combine=MAX,
        doc="Share of the samples whose clocks power or heat limited (the most throttled GPU's).",
    ),
    col("throttle_power_s", FLOAT, "Power throttling (s)", "number", combine=MAX),
    col("throttle_thermal_s", FLOAT, "Thermal throttling (s)", "number", combine=MAX),
    col("gpm_sm_util_pct", FLOAT, "SM Active (%)", "fixed:.1f", combine=MEAN),
    col("gpm_tensor_util_pct", FLOAT, "Tensor Active (%)", "fixed:.1f", combine=MEAN),
    col("gpm_dram_bw_util_pct", FLOAT, "DRAM BW (%)", "fixed:.1f", combine=MEAN),
    col("gpm_*_pct", FLOAT, "GPM metric (%)", "fixed:.1f", combine=MEAN, doc="A GPM metric over the whole window."),
    col("gpm_status", STR, "GPM status", combine=JOIN),
    col("gpus_monitored", INT, "GPUs monitored", "int", combine=SUM),
    col("gpu_processes", INT, "GPU processes", "int", combine=MAX),
    col("other_gpu_processes", INT, "Other GPU processes", "int", combine=SUM),
    # energy
    col(
        "energy_j",
        FLOAT,
        "Energy (J)",
        "si:J",
        combine=SUM,
        doc="Energy of the timed window, every GPU's (or the CPU package's).",
    ),
    col("energy_source", STR, "Energy source", combine=JOIN),
    col("energy_method", STR, "Energy method", combine=JOIN),
    col("energy_window_s", FLOAT, "Energy window (s)", "number", combine=MAX),
    col("energy_uncertainty_pct", FLOAT, "Energy uncertainty (%)", "fixed:.1f", combine=MAX),
    col(
        "energy_confidence",
        STR,
        "Energy conf.",
        levels="low ok",
        combine=MIN,
        doc="ok, or low when the window is short against the counter's updates (any GPU's low makes it low).",
    ),
    col("energy_counter_update_s", FLOAT, "Energy counter update (s)", "number", combine=MEAN),
    # the sampler
    col("telemetry_period_ms", FLOAT, "Telemetry period (ms)", "number", combine=FIRST),
    col(
        "telemetry_isolation",
        STR,
        "Telemetry isolation",
        combine=JOIN,
        doc="Where the sampler ran: thread (a "
        "thread of the measured process) or process (a sampler process: the measured loop kept its GIL).",
    ),
    col("telemetry_window_s", FLOAT, "Telemetry window (s)", "number", combine=MAX),
    col("telemetry_samples", INT, "Telemetry samples", "int", combine=MIN),
    col("telemetry_busy_pct", FLOAT, "Telemetry busy (%)", "fixed:.1f", combine=MEAN),
    col("telemetry_errors", STR, "Telemetry errors", combine=JOIN),
    # the CPU
    col("process_cpu_util_pct", FLOAT, "CPU proc (%)", "fixed:.0f", combine=MEAN),
    col("system_cpu_util_pct", FLOAT, "CPU system (%)", "fixed:.0f", combine=MEAN),
    col(
        "cpu_other_util_pct",
        FLOAT,
        "CPU others (%)",
        "fixed:.0f",
        combine=MEAN,
        doc="The host's CPU time other processes used (not this job's).",
    ),
    col("process_rss_max_bytes", FLOAT, "Process RSS max (B)", "si:B", combine=MAX),
    col("process_rss_bytes", INT, "Process RSS (B)", "si:B", combine=MAX),
    col("cpu_energy_j", FLOAT, "CPU energy (J)", "si:J", combine=SUM),
    col("cpu_power_mean_w", FLOAT, "CPU power (W)", "fixed:.0f", combine=SUM),
    col("cpu_energy_source", STR, "CPU energy source", combine=JOIN),
    # memory the allocator saw
    col("peak_mem_bytes", INT, "Peak Alloc (MB)", "fixed:,.0f", scale=1e-6, combine=MAX),
    col("peak_mem_reserved_bytes", INT, "Peak reserved (MB)", "fixed:,.0f", scale=1e-6, combine=MAX),
    # idle, measured once before the sweep
    col("idle_power_w", FLOAT, "Idle (W)", "fixed:.0f"),
    col("idle_power_source", STR, "Idle power source"),
    col("idle_window_s", FLOAT, "Idle window (s)", "number"),
    col("idle_temp_c", FLOAT, "Idle temperature (°C)", "fixed:.0f"),
    col("idle_sm_clock_mhz", FLOAT, "Idle SM clock (MHz)", "fixed:.0f"),
    col("idle_gpu_util_pct", FLOAT, "Idle GPU utilisation (%)", "fixed:.0f"),
    col("idle_other_gpu_processes", INT, "Idle other GPU processes", "int"),
)
