"""The table of a generate run: a row per case with the two phases apart (prefill: time to first token, prefill
tokens/s, MFU; decode: time per output token, decode tokens/s, MBU), memory, energy and cost per token. Its columns are
the ``generate`` views (:mod:`accelbench.report.views`), their headers and formats the columns' own."""

from __future__ import annotations

from collections.abc import Iterable

from accelbench.core import kinds
from accelbench.core.columns import for_kind
from accelbench.core.errors import OK
from accelbench.report.runs import oom_lines
from accelbench.report.table import is_detail, scenario_table
from accelbench.report.views import view

GROUP = for_kind(kinds.GENERATE).group  # one line of a batch-size chart: the generate map's series


def generate_table(records: Iterable[dict], compact: bool = False, title: str | None = None):
    """The case rows of a generate run as a rich table; compact fits 80 columns
    (:func:`accelbench.report.runs.scenario_table` of the generate map)."""
    return scenario_table(for_kind(kinds.GENERATE), records, compact, title)


def roofline_points(records: list[dict]) -> list:
    """Prefill and decode of each ``ok`` case on the roofline: arithmetic intensity = FLOPs / least bytes moved
    (prefill: weights + the prompt's KV cache written; decode: weights + the KV cache read, a step), attained
    FLOP/s = FLOPs / time (prefill: median TTFT; decode: mean TPOT)."""
    from accelbench.report.roofline import Point

    pts = []
    for r in records:
        if r.get("status") != OK or is_detail(r):
            continue
        label = (
            f"{r.get('model')} {r.get('precision')} {r.get('mode')} bs={r.get('batch_size')} p={r.get('prompt_len')}"
        )
        if r.get("prefill_flops") and r.get("prefill_min_bytes") and r.get("prefill_flops_per_s"):
            pts.append(
                Point(
                    label=f"prefill {label}",
                    intensity=r["prefill_flops"] / r["prefill_min_bytes"],
                    flops_per_s=r["prefill_flops_per_s"],
                    color="#1f77b4",
                    marker="s",
                )
            )
        if r.get("decode_step_flops") and r.get("decode_step_bytes") and r.get("tpot_mean_ms"):
            pts.append(
                Point(
                    label=f"decode {label}",
                    intensity=r["decode_step_flops"] / r["decode_step_bytes"],
                    flops_per_s=r["decode_step_flops"] / (r["tpot_mean_ms"] / 1e3),
                    color="#d62728",
                )
            )
    return pts


def generate_blocks(store, run: dict, records: list[dict], context: str = "") -> list[dict | None]:
    """A generate run's report blocks: the table; decode tokens/s, TPOT, TTFT, TTFT over its roofline floor
    (``ttft_over_floor``) and MBU/MFU against batch size (log
    axes: batch 1 and 256 on one chart; a series of one batch size is left to the table), each chart titled with
    ``context`` (model, device, run); the out-of-memory boundary; prefill and decode on the device's roofline."""
    from accelbench.report import charts
    from accelbench.report.blocks import charts_block, table_block

    rows = [r for r in records if not is_detail(r)]
    ok = [r for r in rows if r.get("status") == OK]
    items = []
    for column, ylabel, title, scale in (
        ("decode_tokens_per_s", "tokens/s", "Decode tokens/s against batch size", 1.0),
        ("tpot_p50_ms", "ms", "Time per output token (p50)", 1.0),
        ("ttft_p50_ms", "ms", "Time to first token (p50)", 1.0),
        ("ttft_over_floor", "x its floor", "TTFT (p50) over its roofline floor", 1.0),
        ("mbu", "%", "MBU (decode) against batch size", 100.0),
        ("mfu", "%", "MFU (prefill) against batch size", 100.0),
    ):
        chart = charts.batch_chart(ok, column, ylabel, title, scale=scale, group=GROUP, context=context)
        if chart:
            items.append({"title": title, "svg": chart})
    blocks = [table_block(rows, view("generate"), "Generation: prefill and decode"), charts_block(items)]
    from accelbench.report.runs import quality_lines

    lines = quality_lines(run["kind"], rows) + oom_lines(run["kind"], rows)
    if lines:
        blocks.append({"type": "notes", "title": "Quality and the out-of-memory boundary", "lines": lines})
    name = run["env"].get("device_name")
    points = roofline_points(ok)
    if name and points:
        from accelbench.ceilings.cache import run_ceilings
        from accelbench.report.roofline import figure

        ceilings = run_ceilings(store, run)
        if ceilings is not None:
            fig = figure(ceilings, points, f"Prefill (squares) and decode (dots) on the roofline: {context or name}")
            blocks.append({**charts_block([{"title": "Roofline", "png": charts.png_base64(fig)}]), "title": "Roofline"})
    return blocks
