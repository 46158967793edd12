"""Reports: tables (rich), charts (matplotlib, only here), and which table shows which kind of run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelbench.core import kinds


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
        kinds.INFERENCE: table.results_table,
        kinds.TRAINING: train.sweep_table,
        kinds.CONVERGENCE: lambda records, compact=False: train.summary_table(records),
        kinds.INPUT_PIPELINE: lambda records, compact=False: train.pipeline_table(records),
        kinds.PROFILE: lambda records, compact=False: profile_table(records),
        kinds.INFERENCE_DP: aggregates(scaling.scale_table),
        kinds.TRAIN_DDP: aggregates(scaling.scale_table),
        kinds.SCALE: aggregates(scaling.scale_table),
        kinds.INTERCONNECT: lambda records, compact=False: scaling.collective_table(records),
        kinds.CONCURRENT: lambda records, compact=False: scaling.concurrent_table(records),
        kinds.LOADGEN: loadgen_table,
        kinds.GENERATE: generate_table,
        kinds.TUNE: lambda records, compact=False: tune_trials(records),
    }
    return by_kind.get(kind, table.results_table)
