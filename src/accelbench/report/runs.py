"""Which table and which report section lay out a stored run, and the lines under its table: one lookup, from the
run's kind.

A scenario's run is laid out as its metric map says (:func:`accelbench.core.columns.for_kind`: the map's tables and
its ``section``); the runs a study or a multi-GPU launch opens (scale, concurrent, tune, interconnect, and the
``--gpus`` kinds, whose rows are their scenario's but whose table is the scaling table) have no map and are named in
:data:`RUN_SECTIONS`. The terminal table (:func:`table_for`), the HTML/markdown section
(:func:`accelbench.report.sections.run_section`) and the lines under the table (:func:`quality_lines`,
:func:`oom_lines`) all read :func:`section_of`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from accelbench.core import kinds
from accelbench.core.columns import MetricMap, for_kind

SWEEP = "sweep"  # the default section: the scenario's table, charts against batch size, latency histograms
# runs no scenario map lays out: their section
RUN_SECTIONS = {
    kinds.INFERENCE_DP: "scale",
    kinds.TRAIN_DDP: "scale",
    kinds.TRAIN_LM_DDP: "scale",
    kinds.SCALE: "scale",
    kinds.CONCURRENT: "concurrent",
    kinds.INTERCONNECT: "interconnect",
    kinds.TUNE: "tune",
}
DEFAULT_GROUP = ("model", "precision", "mode")  # a batch-size series, where no map names one


def section_of(kind: str) -> tuple[str, MetricMap | None]:
    """``(section name, the run's map or None)`` of a run of ``kind``; an unknown kind reads as the default
    section (:data:`SWEEP`) without a map."""
    m = for_kind(kind)
    return (m.section, m) if m is not None else (RUN_SECTIONS.get(kind, SWEEP), None)


def table_for(kind: str) -> Callable[..., Any]:
    """The table function of a run kind: ``fn(records, compact=False)`` -> a rich renderable."""
    from accelbench.report import scaling, table, train
    from accelbench.report.profile_table import profile_table
    from accelbench.report.table import scenario_table
    from accelbench.report.tune import trials_table

    name, m = section_of(kind)
    if m is not None and m.table and name not in ("profile", "convergence", "pipeline"):
        return lambda records, compact=False: scenario_table(m, records, compact)

    def aggregates(fn):
        return lambda records, compact=False: fn([r for r in records if r.get("aggregate") == 1], compact=compact)

    by_section = {
        "convergence": lambda records, compact=False: train.summary_table(records),
        "pipeline": lambda records, compact=False: train.pipeline_table(records),
        "profile": lambda records, compact=False: profile_table(records, compact=compact),
        "scale": aggregates(scaling.scale_table),
        "interconnect": lambda records, compact=False: scaling.collective_table(records),
        "concurrent": lambda records, compact=False: scaling.concurrent_table(records),
        "tune": lambda records, compact=False: trials_table(records),
    }
    return by_section.get(name, table.results_table)


def oom_lines(kind: str, records: list[dict]) -> list[str]:
    """Per batch-size series of the run's scenario (:attr:`MetricMap.group`: a generate run's adds the prompt and the
    new tokens) where a batch ran out of memory: the largest batch that ran and the smallest that did not."""
    from accelbench.report.table import oom_boundary

    _, m = section_of(kind)
    group = m.group if m is not None else DEFAULT_GROUP
    out = []
    for values, b in oom_boundary(records, group).items():
        if b["smallest_oom"] is None:
            continue
        head = " ".join(str(v) if k in DEFAULT_GROUP else f"{k}={v}" for k, v in zip(group, values))
        ran = f"largest batch that ran {b['largest_ok']}" if b["largest_ok"] is not None else "no batch size ran"
        out.append(f"OOM boundary {head}: {ran}, out of memory at {b['smallest_oom']}")
    return out


def quality_lines(kind: str, records: Iterable[dict]) -> list[str]:
    """Under a run's table: per model, the cheapest precision meeting its scenario's quality target (an image
    classifier's top-1 against fp32, a language model's perplexity against its reference precision), or the
    highest load meeting a serve run's SLO; none for a scenario without one."""
    from accelbench.report.table import cheapest_lines, is_detail

    name, _ = section_of(kind)
    rows = [r for r in records if not is_detail(r)]
    if name == "serve":
        from accelbench.report.serve import slo_lines

        return slo_lines(rows)
    if name == "generate":
        from accelbench.scenarios.generate.quality import cheapest_meeting_perplexity, quality_line

        return [quality_line(q) for q in cheapest_meeting_perplexity(rows)]
    return cheapest_lines(rows) if kind in (kinds.INFERENCE, kinds.INFERENCE_DP) else []
