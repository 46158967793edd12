"""Rich tables for ``accelbench profile``: ceilings, per-case summary, kernel families."""

from __future__ import annotations

from rich.table import Table

from accelbench.report.table import results_table
from accelbench.report.units import number, si
from accelbench.report.views import view


def rate(v: float, unit: str) -> str:
    """``7.9e14, "FLOP/s"`` -> ``790 TFLOP/s`` (:func:`accelbench.report.units.si`)."""
    return si(v, unit)


def _f(fmt: str):
    return lambda v: format(v, fmt)


def profile_table(records: list[dict], title: str = "Profile", compact: bool = False) -> Table:
    """One row per profiled case (columns without any value are left out); compact fits 80 columns."""
    return results_table(
        records, title=title, columns=view("profile-compact" if compact else "profile"), compact=compact
    )


def ceilings_table(c, cached: bool = False) -> Table:
    """Measured ceilings beside the datasheet peaks."""
    t = Table(title=f"Ceilings of {c.device_name} ({'cached' if cached else 'measured now'})")
    for h in ("Ceiling", "Measured", "Datasheet", "Measured / datasheet"):
        t.add_column(h, justify="left" if h == "Ceiling" else "right")
    for name, v in c.matmul_flops_per_s.items():
        sheet = c.datasheet_flops_per_s.get(name)
        unit = "OP/s" if name == "int8" else "FLOP/s"
        t.add_row(
            f"{name} matmul (n={c.matmul_n})",
            rate(v, unit),
            rate(sheet, unit) if sheet else "-",
            f"{100 * v / sheet:.0f}%" if sheet else "-",
        )
    sheet = c.datasheet_dram_bytes_per_s
    t.add_row(
        "DRAM copy (read + write)",
        rate(c.dram_bytes_per_s, "B/s"),
        rate(sheet, "B/s") if sheet else "-",
        f"{100 * c.dram_bytes_per_s / sheet:.0f}%" if sheet else "-",
    )
    for name, why in c.unsupported.items():
        t.add_row(f"{name} matmul", "-", "-", f"not measured: {why}")
    return t


FAMILY_COLUMNS = [
    ("Family", "family", str),
    ("Kernels", "kernels", lambda v: str(int(v))),
    ("Time (ms)", "time_s", lambda v: number(v * 1e3, 4)),
    ("Share", "time_share", lambda v: f"{100 * v:.1f}%"),
    ("GFLOP", "flops", lambda v: f"{v / 1e9:,.2f}"),
    ("DRAM MB", "dram_bytes", lambda v: f"{v / 1e6:,.1f}"),
    ("FLOP/B", "intensity_flop_per_byte", _f(".1f")),
    ("FLOP/s", "achieved_flops_per_s", lambda v: si(v)),
    ("B/s", "achieved_bytes_per_s", lambda v: si(v)),
    ("Bound", "bound", str),
    ("% roof", "roof_fraction", lambda v: f"{100 * v:.0f}%"),
]
COMPACT_FAMILY = (
    "family",
    "kernels",
    "time_s",
    "time_share",
    "achieved_flops_per_s",
    "achieved_bytes_per_s",
    "bound",
    "roof_fraction",
)


def family_table(rec: dict, compact: bool = False) -> Table:
    """Kernel families of one measured case, with their share of time and bound; compact fits 80 columns."""
    from accelbench.core.kernels import ALL_FAMILIES

    keys = [k for _, k, _ in FAMILY_COLUMNS if k != "family"]
    rows = [
        {"family": fam, **{k: rec.get(f"family_{fam}_{k}") for k in keys}}
        for fam in ALL_FAMILIES
        if rec.get(f"family_{fam}_kernels") is not None
    ]
    cols = [c for c in FAMILY_COLUMNS if not compact or c[1] in COMPACT_FAMILY]
    title = (
        f"Kernel families: {rec['model']} {rec['step']} {rec['precision']} bs={rec['batch_size']} "
        f"({rec.get('ncu_kernels')} kernels)"
    )
    return results_table(rows, title=title, columns=cols, compact=compact)


def _pct(v: float) -> str:
    return f"{number(100 * v, 2)} %"


def phase_line(rec: dict) -> str | None:
    """One line placing a language model's profiled prefill or decode step on the roofline, from what was measured:
    ``decode is memory-bound: arithmetic intensity X below the ridge point Y; N % of the step time in GEMM/GEMV at
    Z % of the measured copy bandwidth (K kernels a step)``.

    The bound is the step's intensity against its precision's ridge point (:mod:`accelbench.core.roofline`): Nsight
    Compute's FLOPs over DRAM bytes where ncu ran, else the analytic counts (generate's; the line says so); never
    the phase's name. Where ncu ran, the family with the largest share of kernel time is named with its achieved
    bandwidth over the measured copy ceiling (memory-bound) or its FLOP/s over the step's ceiling (compute-bound).
    None for a row that is not an ``ok`` language-model step.
    """
    from accelbench.core.errors import OK
    from accelbench.core.kernels import LABELS, TRANSFORMER_FAMILIES
    from accelbench.scenarios.profile.lm import LM_STEPS

    if rec.get("step") not in LM_STEPS or rec.get("status") != OK:
        return None
    ncu = rec.get("ncu_status") == "ok"
    intensity = rec.get("ncu_intensity_flop_per_byte" if ncu else "analytic_intensity_flop_per_byte")
    ridge = rec.get("ridge_point_flop_per_byte")
    if intensity is None or ridge is None:
        return f"{rec['step']}: no DRAM bytes {'measured' if ncu else 'counted'}: not placed on the roofline"
    memory = intensity < ridge
    head = (
        f"{rec['step']} is {'memory' if memory else 'compute'}-bound: arithmetic intensity {number(intensity)} "
        f"FLOP/B {'below' if memory else 'at or above'} the ridge point {number(ridge)} FLOP/B"
    )
    bw, peak = rec.get("ceiling_dram_bytes_per_s"), rec.get("ceiling_flops_per_s")
    if not ncu:
        achieved = rec.get("achieved_bytes_per_s") if memory else rec.get("achieved_flops_per_s")
        roof = bw if memory else peak
        where = "the measured copy bandwidth" if memory else f"the {rec.get('ceiling_name')} ceiling"
        tail = (
            f"; {si(achieved, 'B/s' if memory else 'FLOP/s')} = {_pct(achieved / roof)} of {where}"
            if achieved and roof
            else ""
        )
        return head + tail + " (analytic: the FLOP and byte counts of generate, no kernel counters)"
    shares = {f: rec.get(f"family_{f}_time_share") for f in TRANSFORMER_FAMILIES}
    shares = {f: s for f, s in shares.items() if s is not None}
    if not shares:
        return head
    top = max(shares, key=shares.get)
    achieved = rec.get(f"family_{top}_achieved_bytes_per_s" if memory else f"family_{top}_achieved_flops_per_s")
    roof = bw if memory else peak
    where = "the measured copy bandwidth" if memory else f"the {rec.get('ceiling_name')} ceiling"
    at = f" at {_pct(achieved / roof)} of {where}" if achieved and roof else ""
    return (
        f"{head}; {_pct(shares[top])} of the step time in {LABELS[top]}{at} ({rec.get('ncu_kernels')} kernels a step)"
    )


REPLAY_TOLERANCE = 0.2  # ncu's kernel sum within 20 % of the step's own time: no note


def replay_note(rec: dict) -> str | None:
    """One line when Nsight Compute's kernel times, summed, differ from the step's median time without ncu by more
    than :data:`REPLAY_TOLERANCE` (``ncu_time_over_step``, or ``ncu_time_s / step_time_s`` for a row stored before
    that column), saying what that does to the per-kernel rates; else None.

    Above: ncu replays each kernel alone, with the caches flushed and no kernel before it to overlap, so a short
    kernel takes longer than in the step and its achieved bandwidth reads low (on an H200, an int8 GEMV of 4096 x
    4096 took 19.3 us under ncu and 5.7 us in a CUDA graph: docs/results.md, the compiled prefill). Below: the step
    spends the rest of its time outside its kernels (launch gaps, host work).
    """
    ratio, step_s, ncu_s = rec.get("ncu_time_over_step"), rec.get("step_time_s"), rec.get("ncu_time_s")
    if ratio is None and ncu_s and step_s:  # a row stored before the column: the same ratio from its two times
        ratio = ncu_s / step_s
    if ratio is None or not step_s or abs(ratio - 1) <= REPLAY_TOLERANCE:
        return None
    ncu_ms, step_ms = ratio * step_s * 1e3, step_s * 1e3
    head = f"{rec.get('model')} {rec.get('step')}: ncu's kernels sum to {number(ncu_ms)} ms, {ratio:.2f}x the step's"
    head += f" {number(step_ms)} ms timed without ncu"
    if ratio > 1:
        return (
            f"{head}: ncu replays each kernel alone (caches flushed), so its times, the short kernels' most, are "
            "longer than in the step and their achieved rates read low"
        )
    return f"{head}: {(1 - ratio) * 100:.0f} % of the step is outside its kernels (launch gaps, host work)"
