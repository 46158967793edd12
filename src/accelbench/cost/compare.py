"""Cost comparison across stored runs (what ``accelbench cost`` prints), as a library function."""

from __future__ import annotations

from typing import Any

from accelbench.core.errors import OK
from accelbench.cost import best_rows, recost
from accelbench.cost.prices import quote


def _price_for(r: dict, env: dict, override: float | None):
    dtype = str(r.get("device") or env.get("device") or "cpu").split(":")[0]
    n = r.get("gpus_monitored")
    n = int(n) if n is not None and n == n else 1
    return quote(
        device_type=dtype,
        device_name=r.get("device_name"),
        n_devices=n,
        mem_bytes=env.get("gpu_mem_total_bytes"),
        vcpus=env.get("cpu_count"),
        override_usd_per_hour=override,
    )


def cost_comparison(
    store,
    run_id: int | None = None,
    *,
    price_per_hour: float | None = None,
    kwh_price: float | None = None,
    workload: str = "inference",
    best: bool = True,
) -> list[dict[str, Any]]:
    """Inference cases of one run (or all runs) with cost columns, one best row per (device, model,
    precision, mode) unless ``best`` is False.

    Stored costs are kept unless ``price_per_hour`` / ``kwh_price`` is given (then every row is
    re-priced) or the case has no price (runs stored before prices existed: looked up again by
    device name). Raises KeyError for an unknown ``run_id``.
    """
    runs = [store.run(run_id)] if run_id is not None else [store.run(r["run_id"]) for r in store.runs()]
    rows: list[dict] = []
    for run in runs:
        env = run["env"]
        for r in store.records(run["run_id"], workload=workload):
            if r.get("device_name") is None:
                r["device_name"] = env.get("gpu_name") or env.get("device_name")
            if price_per_hour is not None or kwh_price is not None or r.get("price_per_hour_usd") is None:
                q = _price_for(r, env, price_per_hour)
                r = recost(
                    r,
                    usd_per_hour=q.usd_per_hour if q else None,
                    price_source=q.source if q else None,
                    usd_per_kwh=kwh_price if kwh_price is not None else r.get("kwh_price_usd"),
                )
            rows.append(r)
    return best_rows(rows) if best else [r for r in rows if r.get("status") == OK]
