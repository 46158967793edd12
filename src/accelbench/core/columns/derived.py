"""Columns derived from a measured row (``accelbench.sweep.derived``): energy per sample and above idle, the
validity flags, the cost. An aggregate row derives its own from its combined columns (so rank rows carry none:
the rule is per-rank)."""

from __future__ import annotations

from accelbench.core.columns.column import FLOAT, RANK, STR, col

DECLARED = (
    col(
        "energy_per_sample_j",
        FLOAT,
        "Energy/img (mJ)",
        "number",
        short="mJ/img",
        scale=1e3,
        combine=RANK,
        titles=(("generate", "Energy/token (mJ)"), ("serve", "Energy/token (mJ)"), ("serve-compact", "mJ/token")),
        doc="Energy of the timed window / the samples it ran (a generate row's samples: its output tokens).",
    ),
    col(
        "energy_above_idle_j",
        FLOAT,
        "Energy above idle (J)",
        "si:J",
        combine=RANK,
        doc="Energy minus idle power x the window.",
    ),
    col("energy_above_idle_per_sample_j", FLOAT, "Above idle/img (mJ)", "number", scale=1e3, combine=RANK),
    col(
        "validity",
        STR,
        "Validity",
        combine=RANK,
        doc="ok, or the flags: latency-spread, throttled, "
        "clock-variation, other-process, cpu-contention, failed-requests, client-limited, non-finite-output, "
        "non-finite-loss.",
    ),
    col(
        "validity_reason",
        STR,
        "Validity reason",
        combine=RANK,
        doc="Each flag's reason with its figure, joined with '; '.",
    ),
    col("validity_checks", STR, "Validity checks", combine=RANK, doc="The checks that could run."),
    col("price_per_hour_usd", FLOAT, "$/hour", "fixed:.3f", combine=RANK),
    col("price_source", STR, "Price source", combine=RANK),
    col("cost_usd", FLOAT, "Total Cost", "usd", combine=RANK, doc="Device time of one pass at the price."),
    col("cost_per_1000_samples_usd", FLOAT, "$/1k img", "usd", combine=RANK, titles=(("cost", "$/1,000 images"),)),
    col("electricity_cost_usd", FLOAT, "Electricity cost", "usd", combine=RANK),
    col("electricity_cost_per_1000_samples_usd", FLOAT, "Electricity $/1,000", "usd", combine=RANK),
    col("kwh_price_usd", FLOAT, "USD per kWh", "usd", combine=RANK),
)
