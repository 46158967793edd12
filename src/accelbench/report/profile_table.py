"""Rich tables for ``accelbench profile``: ceilings, per-case summary, kernel families."""

from __future__ import annotations

from rich.table import Table

from accelbench.report.table import _present, results_table


def rate(v: float, unit: str) -> str:
    """``7.9e14, "FLOP/s"`` -> ``790.0 TFLOP/s`` (SI prefix chosen so the number is >= 1)."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:,.1f} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _f(fmt: str):
    return lambda v: format(v, fmt)


PROFILE_COLUMNS = [
    ("Model", "model", str),
    ("Step", "step", str),
    ("BS", "batch_size", str),
    ("Precision", "precision", str),
    ("Mode", "mode", str),
    ("Step (ms)", "step_time_s", lambda v: f"{v * 1e3:.3f}"),
    ("Analytic GFLOP", "analytic_flops", lambda v: f"{v / 1e9:,.2f}"),
    ("Min MB", "analytic_min_bytes", lambda v: f"{v / 1e6:,.1f}"),
    ("Theory (ms)", "theoretical_time_s", lambda v: f"{v * 1e3:.3f}"),
    ("Meas/Theory", "measured_vs_theoretical", lambda v: f"{v:.2f}x"),
    ("Achieved TFLOP/s", "achieved_flops_per_s", lambda v: f"{v / 1e12:.3g}"),
    ("ncu GFLOP", "ncu_flops", lambda v: f"{v / 1e9:,.2f}"),
    ("ncu DRAM MB", "ncu_dram_bytes", lambda v: f"{v / 1e6:,.1f}"),
    ("FLOP/B", "ncu_intensity_flop_per_byte", _f(".1f")),
    ("ncu TFLOP/s", "ncu_achieved_flops_per_s", lambda v: f"{v / 1e12:.3g}"),
    ("Bound", "ncu_bound", str),
    ("% roof", "ncu_roof_fraction", lambda v: f"{100 * v:.0f}%"),
    ("GEMM/conv vs analytic", "flops_agreement", lambda v: f"{100 * v:+.2f}%"),
    ("ncu (s)", "ncu_wall_s", _f(".0f")),
    ("Status", "status", str),
]


def profile_table(records: list[dict], title: str = "Profile") -> Table:
    """One row per profiled case (columns without any value are left out)."""
    return results_table(records, title=title, columns=PROFILE_COLUMNS)


def ceilings_table(c, cached: bool = False) -> Table:
    """Measured ceilings beside the datasheet peaks."""
    t = Table(title=f"Ceilings of {c.device_name} ({'cached' if cached else 'measured now'})")
    for h in ("Ceiling", "Measured", "Datasheet", "Measured / datasheet"):
        t.add_column(h, justify="left" if h == "Ceiling" else "right")
    for name, v in c.matmul_flops_per_s.items():
        sheet = c.datasheet_flops_per_s.get(name)
        unit = "OP/s" if name == "int8" else "FLOP/s"
        t.add_row(f"{name} matmul (n={c.matmul_n})", rate(v, unit), rate(sheet, unit) if sheet else "-",
                  f"{100 * v / sheet:.0f}%" if sheet else "-")
    sheet = c.datasheet_dram_bytes_per_s
    t.add_row("DRAM copy (read + write)", rate(c.dram_bytes_per_s, "B/s"), rate(sheet, "B/s") if sheet else "-",
              f"{100 * c.dram_bytes_per_s / sheet:.0f}%" if sheet else "-")
    for name, why in c.unsupported.items():
        t.add_row(f"{name} matmul", "-", "-", f"not measured: {why}")
    return t


def family_table(rec: dict) -> Table:
    """Kernel families of one measured case, with their share of time and bound."""
    from accelbench.profile.kernels import FAMILIES

    t = Table(title=f"Kernel families: {rec['model']} {rec['step']} {rec['precision']} bs={rec['batch_size']} "
                    f"({rec.get('ncu_kernels')} kernels)")
    heads = ("Family", "Kernels", "Time (ms)", "Share", "GFLOP", "DRAM MB", "FLOP/B", "TFLOP/s", "TB/s", "Bound", "% roof")
    for h in heads:
        t.add_column(h, justify="left" if h == "Family" else "right")
    for fam in FAMILIES:
        p = f"family_{fam}"
        if rec.get(f"{p}_kernels") is None:
            continue
        g = rec.get
        t.add_row(fam, str(g(f"{p}_kernels")), f"{g(f'{p}_time_s') * 1e3:.3f}", f"{100 * g(f'{p}_time_share'):.1f}%",
                  f"{g(f'{p}_flops') / 1e9:,.2f}", f"{g(f'{p}_dram_bytes') / 1e6:,.1f}",
                  _opt(g(f"{p}_intensity_flop_per_byte"), ".1f"), _opt(g(f"{p}_achieved_flops_per_s"), ".3g", 1e12),
                  _opt(g(f"{p}_achieved_bytes_per_s"), ".2f", 1e12), str(g(f"{p}_bound") or "-"),
                  _opt(g(f"{p}_roof_fraction"), ".0%"))
    return t


def _opt(v, fmt: str, scale: float = 1.0) -> str:
    return format(v / scale, fmt) if _present(v) else "-"
