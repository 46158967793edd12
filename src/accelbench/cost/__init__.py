"""Cost maths (pure, exact-number tested): dollars for a case, per 1,000 samples, electricity, and the
cost comparison of the reference study (one best row per device, precision and mode).

Formulas:
    cost_usd = usd_per_hour * seconds / 3600
    cost_per_1000_samples_usd = cost_usd / samples * 1000  (= usd_per_hour / 3.6 / throughput)
    electricity_cost_usd = energy_per_sample_j * samples / 3.6e6 * usd_per_kwh  (1 kWh = 3.6e6 J)
Unknown inputs give None, never 0. Prices: :mod:`accelbench.cost.prices`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from accelbench.core.errors import OK

J_PER_KWH = 3.6e6


def cost_columns(
    *,
    seconds: float | None,
    samples: int | None,
    usd_per_hour: float | None,
    price_source: str | None = None,
    energy_per_sample_j: float | None = None,
    usd_per_kwh: float | None = None,
) -> dict[str, Any]:
    """Cost columns of one case.

    Args:
        seconds: time the case's work takes (s), e.g. ``total_time_s`` for ``images`` images.
        samples: samples processed in that time.
        usd_per_hour: price of the devices used (None: unknown).
        price_source: where the price came from (stored with the case).
        energy_per_sample_j: measured energy per sample (J), for the electricity cost.
        usd_per_kwh: electricity price (``--kwh-price``); None leaves the electricity cost out.
    Returns:
        ``price_per_hour_usd``, ``price_source``, ``cost_usd``, ``cost_per_1000_samples_usd``,
        ``electricity_cost_usd``, ``electricity_cost_per_1000_samples_usd``, ``kwh_price_usd``.
    """
    cost = usd_per_hour * seconds / 3600.0 if usd_per_hour is not None and seconds is not None else None
    per_1000 = cost / samples * 1000.0 if cost is not None and samples else None
    el = el_1000 = None
    if usd_per_kwh is not None and energy_per_sample_j is not None:
        el_1000 = energy_per_sample_j * 1000.0 / J_PER_KWH * usd_per_kwh
        el = energy_per_sample_j * samples / J_PER_KWH * usd_per_kwh if samples else None
    return {
        "price_per_hour_usd": usd_per_hour,
        "price_source": price_source
        if usd_per_hour is not None
        else "unknown: device not in the price list, pass --price-per-hour",
        "cost_usd": cost,
        "cost_per_1000_samples_usd": per_1000,
        "electricity_cost_usd": el,
        "electricity_cost_per_1000_samples_usd": el_1000,
        "kwh_price_usd": usd_per_kwh,
    }


def best_rows(records: Iterable[dict], key=("device_name", "model", "precision", "mode")) -> list[dict]:
    """One row per ``key`` (device, model, precision, mode): the ``ok`` case with the highest throughput
    (ties: the lower cost per 1,000 samples, then the earlier case). Order: first appearance of each key."""
    best: dict[tuple, dict] = {}
    for r in records:
        if r.get("status") != OK or r.get("throughput_samples_per_s") is None:
            continue
        k = tuple(r.get(f) for f in key)
        cur = best.get(k)
        if cur is None or _rank(r) > _rank(cur):
            best[k] = r
    return list(best.values())


def _rank(r: dict) -> tuple:
    c = r.get("cost_per_1000_samples_usd")
    return (r["throughput_samples_per_s"], -c if c is not None else float("-inf"))


def recost(
    record: dict, *, usd_per_hour: float | None, price_source: str | None, usd_per_kwh: float | None = None
) -> dict[str, Any]:
    """A copy of a stored inference case with its cost columns recomputed for another price."""
    out = dict(record)
    out.update(
        cost_columns(
            seconds=record.get("total_time_s"),
            samples=record.get("images"),
            usd_per_hour=usd_per_hour,
            price_source=price_source,
            energy_per_sample_j=record.get("energy_per_sample_j"),
            usd_per_kwh=usd_per_kwh,
        )
    )
    return out
