"""Reports: tables (rich), charts (matplotlib, only here), and which table shows which kind of run."""

from __future__ import annotations

from typing import Any, Callable


def table_for(kind: str) -> Callable[..., Any]:
    """The table function of a run kind: ``fn(records, compact=False)`` -> a rich renderable."""
    from accelbench.report import scaling, table, train
    from accelbench.report.generate import generate_table
    from accelbench.report.loadgen import loadgen_table
    from accelbench.report.profile_table import profile_table
    from accelbench.report.tune import trials_table as tune_trials

    def aggregates(fn):
        return lambda records, compact=False: fn([r for r in records if r.get("aggregate") == 1])

    by_kind = {
        "inference": table.results_table,
        "training": train.sweep_table,
        "convergence": lambda records, compact=False: train.summary_table(records),
        "input-pipeline": lambda records, compact=False: train.pipeline_table(records),
        "profile": lambda records, compact=False: profile_table(records),
        "inference-dp": aggregates(scaling.scale_table),
        "train-ddp": aggregates(scaling.scale_table),
        "scale": aggregates(scaling.scale_table),
        "interconnect": lambda records, compact=False: scaling.collective_table(records),
        "concurrent": lambda records, compact=False: scaling.concurrent_table(records),
        "loadgen": loadgen_table,
        "generate": generate_table,
        "tune": lambda records, compact=False: tune_trials(records),
    }
    return by_kind.get(kind, table.results_table)
