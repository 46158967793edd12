"""The table of a generate run: a row per case with the two phases apart (prefill: time to first token, prefill
tokens/s, MFU; decode: time per output token, decode tokens/s, MBU), memory, energy and cost per token. Its columns are
the ``generate`` views (:mod:`accelbench.report.views`), their headers and formats the columns' own. Across the runs
of a report, the tensor-parallel section (:func:`tp_section`) sets each case's degrees side by side."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

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


def tp_rows(records: Iterable[dict]) -> list[dict]:
    """The counted generate rows (``ok``, a positive decode tokens/s) of every deployment measured at more than one
    ``tp_degree`` (:data:`accelbench.core.parallel.DEPLOY_GROUP`: the same model, batch, prompt and device; any
    precision and engine), each with its ``tp_efficiency`` and ``tpot_speedup`` (:func:`accelbench.core.parallel
    .tp_scaling`: against the smallest degree of its precision and engine; None when they ran at one degree only),
    its per-GPU decode tokens/s and weights filled on one GPU (the whole model's), sorted by case then degree."""
    from accelbench.core.parallel import DEPLOY_GROUP, TP_GROUP, tp_scaling

    rows = [r for r in records if r.get("workload") == kinds.GENERATE and not is_detail(r)]
    rows = [r for r in rows if r.get("status") == OK and (r.get("decode_tokens_per_s") or 0) > 0]
    degrees = {k: {int(r.get("tp_degree") or 1) for r in g} for k, g in _groups(rows, DEPLOY_GROUP).items()}
    out = []
    for r, s in zip(rows, tp_scaling(rows)):
        if len(degrees[tuple(r.get(k) for k in DEPLOY_GROUP)]) < 2:
            continue
        tp = int(r.get("tp_degree") or 1)
        per_gpu = r.get("decode_tokens_per_s_per_gpu") or r["decode_tokens_per_s"] / tp
        weights = r.get("weight_bytes_per_gpu") or (r.get("weight_bytes") if tp == 1 else None)
        out.append(
            {**r, "tp_degree": tp, "decode_tokens_per_s_per_gpu": per_gpu, "weight_bytes_per_gpu": weights}
            | {"tp_efficiency": s and s.tp_efficiency, "tpot_speedup": s and s.tpot_speedup}
        )
    return sorted(out, key=lambda r: (tuple(str(r.get(k)) for k in TP_GROUP), r["tp_degree"], r.get("run_id") or 0))


def tp_verdicts(rows: list[dict]) -> list[str]:
    """Lines over :func:`tp_rows` (``rows``): a line a case (precision and engine) measured at more than one degree,
    naming which degree is cheapest at each TPOT target and the degree of the lowest TPOT p50 (ms); then a line a
    deployment (:data:`accelbench.core.parallel.DEPLOY_GROUP`) measured in more than one precision or engine, naming
    the same over every degree, precision and engine: "how many GPUs, in which precision" (one GPU in 8-bit weights
    against two in bf16), with the perplexity of each named row, or that it was not measured.

    The cost is the cost per million output tokens (``cost_per_1000_samples_usd`` x 1000: a generate row's sample is
    an output token; the price of the GPUs it used, :mod:`accelbench.cost`). The rows named are the cost/TPOT
    frontier, cheapest first: each next one has a lower TPOT p50 than every cheaper one, so it is the cheapest for a
    TPOT target under the one before it (a row both dearer and slower than another is never the answer). A
    configuration measured in several runs counts once, by its latest measurement (the case's ``started_at``, then the
    highest ``run_id``: an older run imported later does not replace a newer one). A row whose measurement was
    flagged (``validity``: clocks limited, another process...) says so beside its figures. A group whose rows have no
    cost names the lowest TPOT only; one with no TPOT either has no line."""
    from accelbench.core.parallel import DEPLOY_GROUP, TP_GROUP

    lines = []
    for (model, precision, mode, batch, prompt, *_), members in _groups(rows, TP_GROUP).items():
        said, _ = _frontier(members, lambda r: f"TP {r['tp_degree']}")
        if len({r["tp_degree"] for r in members}) > 1 and said:
            lines.append(f"{model} {precision} {mode}, batch {batch}, prompt {prompt}: {said}.")
    for (model, batch, prompt, *_), members in _groups(rows, DEPLOY_GROUP).items():
        said, named = _frontier(members, lambda r: f"TP {r['tp_degree']} {r.get('precision')} {r.get('mode')}")
        if len({(r.get("precision"), r.get("mode")) for r in members}) > 1 and said:
            ppl = {r.get("precision"): r.get("perplexity") for r in named}
            known = ", ".join(f"{p} {v:.4g}" for p, v in ppl.items() if v is not None)
            unknown = ", ".join(str(p) for p, v in ppl.items() if v is None)
            quality = (f" Perplexity: {known}." if known else "") + (
                f" Perplexity not measured for {unknown}." if unknown else ""
            )
            lines.append(f"{model}, batch {batch}, prompt {prompt}, any precision and engine: {said}.{quality}")
    return lines


def _groups(rows: list[dict], keys: tuple[str, ...]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in keys), []).append(r)
    return groups


def _frontier(members: list[dict], label) -> tuple[str, list[dict]]:
    """The cost/TPOT frontier of ``members`` cheapest first, then the lowest TPOT where the frontier does not end at
    it (see :func:`tp_verdicts`), each row named by ``label(row)``, and the rows named; empty when no row has a
    TPOT."""
    from accelbench.core.parallel import latency_p50

    latest: dict[str, dict] = {}  # a configuration measured in several runs: its latest measurement (tp_verdicts)
    for r in sorted(members, key=lambda r: (r.get("started_at") or 0, r.get("run_id") or 0)):
        latest[label(r)] = r
    timed = [(tpot, r) for r in latest.values() if (tpot := latency_p50(r))]
    if not timed:
        return "", []
    said = []
    frontier: list[tuple[float, dict]] = []
    for tpot, r in sorted(
        ((t, r) for t, r in timed if r.get("cost_per_1000_samples_usd") is not None),
        key=lambda t: (t[1]["cost_per_1000_samples_usd"], t[0]),
    ):
        if not frontier or tpot < frontier[-1][0]:
            frontier.append((tpot, r))
    for i, (tpot, r) in enumerate(frontier):
        cost = 1000 * r["cost_per_1000_samples_usd"]
        if i == 0:
            said.append(f"cheapest at {label(r)} (${cost:.2f} per million output tokens, TPOT {tpot:.2f} ms{_flag(r)})")
        else:
            said.append(f"under a TPOT of {frontier[i - 1][0]:.2f} ms, {label(r)} (${cost:.2f}{_flag(r)})")
    named = [r for _, r in frontier]
    tpot, fastest = min(timed, key=lambda t: t[0])
    if not frontier or tpot < frontier[-1][0]:  # a faster row without a price
        said.append(f"lowest TPOT at {label(fastest)} ({tpot:.2f} ms{_flag(fastest)})")
        named.append(fastest)
    return "; ".join(said), named


def _flag(row: dict) -> str:
    """``", flagged: throttled"`` for a row whose measurement was flagged (:func:`accelbench.core.validity.assess`),
    else empty."""
    from accelbench.core.validity import VALID

    validity = row.get("validity")
    return f", flagged: {validity}" if validity and validity != VALID else ""


def tp_chart(rows: list[dict]) -> str | None:
    """TP efficiency (%) against ``tp_degree``, one line a case (:func:`tp_rows`), linear scaling dashed at 100 %;
    inline SVG, or None without rows that have one (a precision run at one degree has no curve)."""
    from accelbench.core.parallel import TP_GROUP
    from accelbench.report.charts import svg
    from accelbench.report.plots import pyplot

    rows = [r for r in rows if r.get("tp_efficiency") is not None]
    if not rows:
        return None
    lines: dict[str, list[dict]] = {}
    for r in rows:
        model, precision, mode, batch, prompt, new = (r.get(k) for k in TP_GROUP[:6])
        label = f"{model} {precision} {mode} bs={batch} prompt={prompt} new={new}"
        lines.setdefault(label, []).append(r)
    fig, ax = pyplot().subplots(figsize=(6.4, 3.8), constrained_layout=True)
    degrees = sorted({r["tp_degree"] for r in rows})
    ax.axhline(100.0, ls="--", lw=1, color="#7f7f7f", label="linear scaling")
    for label, rs in lines.items():
        ax.plot([r["tp_degree"] for r in rs], [100 * r["tp_efficiency"] for r in rs], "o-", ms=3.5, lw=1.3, label=label)
    ax.set_xticks(degrees)
    ax.set(
        xlabel="tensor-parallel GPUs",
        ylabel="%",
        title="TP efficiency: decode tokens/s per GPU over the smallest degree's",
    )
    ax.title.set_fontsize(9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return svg(fig)


def tp_section(runs: Iterable[tuple[Any, int, str]]) -> dict | None:
    """The report's tensor-parallel section over the runs reported (``(store, run_id, label)`` triples; the TP 1 and
    TP N rows of a case are usually two runs, possibly of two stores): every case measured at more than one
    ``tp_degree`` on one device, a row a degree with its TP efficiency and TPOT speed-up (:func:`tp_rows`), and the
    efficiency against the degree. None when no case has two degrees."""
    from accelbench.report.blocks import charts_block, table_block
    from accelbench.report.views import view

    labels, records = [], []
    for store, run_id, label in runs:
        labels.append(label)
        if store.run(run_id)["kind"] == kinds.GENERATE:  # only generate runs have TP degrees: no other run is read
            records += store.records(run_id)
    rows = tp_rows(records)
    if not rows:
        return None
    note = (
        "TP efficiency = (decode tokens/s / n) at TP n over the same at the case's smallest degree (100 % is linear "
        "scaling); TPOT speed-up = TPOT p50 at the smallest degree over TPOT p50 at n; all-reduce share = the share of "
        "a decode step in the collectives (GPUs: NCCL kernels' device time over all kernels'; CPUs: host time)."
    )
    chart = tp_chart(rows)
    return {
        "id": "tensor-parallel",
        "title": "Tensor parallelism across " + ", ".join(dict.fromkeys(labels)),
        "provenance": [],
        "spec": None,
        "blocks": [
            b
            for b in (
                table_block(rows, view("tensor-parallel"), "Tensor parallelism", [note, *tp_verdicts(rows)]),
                charts_block([{"title": "TP efficiency", "svg": chart}] if chart else []),
            )
            if b
        ],
    }
