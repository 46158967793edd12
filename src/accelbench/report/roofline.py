"""Roofline charts (log-log, matplotlib, PNG + SVG): model level, kernel-family level, and a summary.

x: arithmetic intensity (FLOP per DRAM byte); y: achieved FLOP/s. Solid roofs are the measured
ceilings (one per matmul precision, all sharing the measured DRAM slope); dashed ones are the
datasheet peaks. Points that cannot sit on log axes are listed under the chart instead: work with no
FLOPs (copies) and kernels with no DRAM traffic (unbounded intensity).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core.errors import OK
from accelbench.report.plots import pyplot

_COLORS = {
    "fp32": "#1f77b4",
    "tf32": "#17becf",
    "fp16": "#ff7f0e",
    "bf16": "#d62728",
    "fp8": "#9467bd",
    "int8": "#8c564b",
}
_POINT_COLORS = ("#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#999999", "#000000")
_FAMILY_COLORS = {
    "gemm_conv": "#d62728",
    "normalization": "#2ca02c",
    "reduction_pooling": "#9467bd",
    "copy_transpose": "#7f7f7f",
    "elementwise": "#1f77b4",
    "other": "#bcbd22",
    # a transformer step's (kernels.TRANSFORMER_FAMILIES)
    "gemm": "#d62728",
    "attention": "#ff7f0e",
    "norm": "#2ca02c",
    "rotary": "#e377c2",
    "activation": "#17becf",
    "copy": "#7f7f7f",
    "sampling": "#9467bd",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """A point on the chart: intensity (FLOP/byte, None = no DRAM bytes), FLOP/s, marker area (pt^2)."""

    label: str
    intensity: float | None
    flops_per_s: float | None
    size: float = 60.0
    color: str = "black"
    marker: str = "o"


def _fmt_rate(v: float) -> str:
    for scale, unit in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if v >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} "


def draw(
    ceilings, points: list[Point], title: str, stem: str | Path, background: list[Point] = (), notes: list[str] = ()
) -> list[Path]:
    """Draw a roofline with ``points`` over faint ``background`` points; write ``stem.png`` and ``stem.svg``.

    Raises:
        MissingDependencyError: matplotlib is not installed.
    """
    fig = figure(ceilings, points, title, background, notes)
    Path(stem).parent.mkdir(parents=True, exist_ok=True)
    paths = [Path(f"{stem}.png"), Path(f"{stem}.svg")]
    for path in paths:
        fig.savefig(path, dpi=130)
    pyplot().close(fig)
    return paths


def figure(ceilings, points: list[Point], title: str, background: list[Point] = (), notes: list[str] = ()):
    """The roofline as an open matplotlib figure (:func:`draw` saves it; the HTML report inlines it)."""
    plt = pyplot()
    bw = ceilings.dram_bytes_per_s
    # int8 counts integer operations: not a FLOP/s roof (it stays in the ceilings table)
    peaks = dict(sorted(((k, v) for k, v in ceilings.matmul_flops_per_s.items() if k != "int8"), key=lambda kv: kv[1]))
    shown = [p for p in [*points, *background] if p.flops_per_s and p.flops_per_s > 0]
    xs = [p.intensity for p in shown if p.intensity] + [v / bw for v in peaks.values()]
    x_lo, x_hi = min(xs + [1.0]) / 4, max(xs + [1.0]) * 8
    # the legend below the axes, in columns: beside them it left a third of the picture blank
    entries = len(points) + len(peaks) + 1
    ncol = 1 if entries <= 4 else 2 if entries <= 12 else 3
    rows = -(-entries // ncol)
    fig, ax = plt.subplots(figsize=(9.5, 5.2 + 0.16 * rows), layout="constrained")
    _roofs(ax, ceilings, peaks, x_lo, x_hi)
    _scatter(ax, points, background, x_hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ys = [p.flops_per_s for p in shown] + list(peaks.values())
    ax.set_ylim(min(ys) / 5, max(ys) * 3)
    ax.set_xlabel("arithmetic intensity (FLOP / DRAM byte)" + "".join(f"\n{n}" for n in notes))
    ax.set_ylabel("FLOP/s")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.text(
        0.01,
        0.99,
        f"DRAM {_fmt_rate(bw)}B/s measured (copy, read + write)",
        transform=ax.transAxes,
        va="top",
        fontsize=8,
    )
    fig.legend(*ax.get_legend_handles_labels(), fontsize=7, loc="outside lower center", ncol=ncol, frameon=False)
    return fig


def _roofs(ax, ceilings, peaks: dict, x_lo: float, x_hi: float) -> None:
    """Measured roofs (solid) and datasheet roofs (dashed), one per precision."""
    bw = ceilings.dram_bytes_per_s
    grid = [x_lo * (x_hi / x_lo) ** (i / 200) for i in range(201)]
    for name, peak in peaks.items():
        ax.plot(
            grid,
            [min(peak, x * bw) for x in grid],
            color=_COLORS.get(name, "k"),
            lw=1.6,
            label=f"{name} matmul {_fmt_rate(peak)}FLOP/s (measured)",
        )
        sheet = ceilings.datasheet_flops_per_s.get(name)
        sbw = ceilings.datasheet_dram_bytes_per_s or bw
        if sheet:
            ax.plot(grid, [min(sheet, x * sbw) for x in grid], color=_COLORS.get(name, "k"), lw=0.8, ls="--", alpha=0.6)
    ax.plot([], [], color="k", lw=0.8, ls="--", label="datasheet peaks")


def _scatter(ax, points: list[Point], background: list[Point], x_hi: float) -> None:
    """Faint background points, then the labelled points; no DRAM bytes: a '>' at the right edge."""
    for p in background:
        if p.flops_per_s and p.flops_per_s > 0:
            ax.scatter([p.intensity or x_hi / 1.5], [p.flops_per_s], s=p.size, c=p.color, alpha=0.25, lw=0)
    for p in points:
        if p.flops_per_s and p.flops_per_s > 0:
            ax.scatter(
                [p.intensity or x_hi / 1.5],
                [p.flops_per_s],
                s=p.size,
                c=p.color,
                marker=p.marker if p.intensity else ">",
                edgecolors="k",
                linewidths=0.6,
                zorder=3,
                label=p.label,
            )


def _case_title(rec: dict, what: str) -> str:
    return (
        f"{what}: {rec['model']} {rec['step']} {rec['precision']} bs={rec['batch_size']} {rec['mode']} "
        f"on {rec.get('device_name') or rec['device']}"
    )


def model_chart(rec: dict, ceilings, stem) -> list[Path]:
    """The step as points: analytic (FLOPs / minimum bytes, at the measured step time) and, when ncu
    ran, measured (counter FLOPs / DRAM bytes, at the summed kernel time)."""
    pts = [
        Point(
            label=f"analytic: {rec['analytic_flops'] / 1e9:.4g} GFLOP / {rec['analytic_min_bytes'] / 1e6:.4g} MB",
            intensity=rec.get("analytic_intensity_flop_per_byte"),
            flops_per_s=rec.get("achieved_flops_per_s"),
            color="white",
            marker="s",
            size=70,
        )
    ]
    if rec.get("ncu_status") == "ok":
        pts.append(
            Point(
                label=f"measured (ncu): {rec['ncu_flops'] / 1e9:.4g} GFLOP / {rec['ncu_dram_bytes'] / 1e6:.4g} MB",
                intensity=rec.get("ncu_intensity_flop_per_byte"),
                flops_per_s=rec.get("ncu_achieved_flops_per_s"),
                color="gold",
                marker="o",
                size=90,
            )
        )
    return draw(ceilings, pts, _case_title(rec, "Model roofline"), stem)


def kernel_chart(rec: dict, rows: list[dict], ceilings, stem) -> list[Path]:
    """Kernel families as points sized by their share of step time, each kernel as a faint dot."""
    from accelbench.core.kernels import ALL_FAMILIES

    pts, notes = [], []
    for fam in ALL_FAMILIES:
        share = rec.get(f"family_{fam}_time_share")
        if share is None:
            continue
        flops = rec.get(f"family_{fam}_flops") or 0
        label = f"{fam} ({100 * share:.1f}% of time, {rec.get(f'family_{fam}_kernels')} kernels)"
        if flops <= 0:
            notes.append(f"{label}: no FLOPs, not on the chart")
            continue
        pts.append(
            Point(
                label=label,
                intensity=rec.get(f"family_{fam}_intensity_flop_per_byte"),
                flops_per_s=rec.get(f"family_{fam}_achieved_flops_per_s"),
                size=40 + 900 * share,
                color=_FAMILY_COLORS[fam],
            )
        )
    bg = [
        Point(
            label="",
            intensity=r["intensity_flop_per_byte"],
            flops_per_s=r["achieved_flops_per_s"],
            size=8,
            color=_FAMILY_COLORS.get(r["family"], "k"),
        )
        for r in rows
    ]
    zero = sum(1 for r in rows if not (r["dram_read_bytes"] or r["dram_write_bytes"]))
    if zero:
        notes.append(f"{zero} kernels moved no DRAM bytes (unbounded intensity): drawn at the right edge")
    return draw(ceilings, pts, _case_title(rec, "Kernel roofline"), stem, background=bg, notes=notes)


def case_charts(rec: dict, rows: list[dict], ceilings, stem) -> dict[str, Any]:
    """``{"charts": [paths]}`` of the model- and kernel-level charts of one profiled case (its row and its kernel
    rows), or ``{"charts": [], "chart_error": why}`` (a missing matplotlib included): a chart is a by-product,
    never the case's failure."""
    from accelbench.core.errors import one_line

    try:
        paths = model_chart(rec, ceilings, f"{stem}-model")
        if rows:
            paths += kernel_chart(rec, rows, ceilings, f"{stem}-kernels")
    except Exception as exc:  # never lose the case over a chart
        return {"charts": [], "chart_error": one_line(exc)}
    return {"charts": [str(p) for p in paths]}


def summary_chart(records: list[dict], ceilings, stem, title: str = "Model roofline") -> list[Path]:
    """One point per profiled case: measured (ncu) where available, else analytic."""
    return draw(ceilings, summary_points(records), title, stem)


def summary_points(records: list[dict]) -> list[Point]:
    """The points of :func:`summary_chart`: one per ``ok`` case, measured (ncu) where available, else analytic."""
    pts = []
    for i, r in enumerate(records):
        if r.get("status") != OK:
            continue
        ncu = r.get("ncu_status") == "ok"
        x = r.get("ncu_intensity_flop_per_byte") if ncu else r.get("analytic_intensity_flop_per_byte")
        y = r.get("ncu_achieved_flops_per_s") if ncu else r.get("achieved_flops_per_s")
        color = _POINT_COLORS[i % len(_POINT_COLORS)]
        pts.append(
            Point(
                label=f"{r['model']} {r['step']} {r['precision']} bs={r['batch_size']}"
                + ("" if ncu else " (analytic)"),
                intensity=x,
                flops_per_s=y,
                color=color,
                marker="o" if ncu else "s",
            )
        )
    return pts
