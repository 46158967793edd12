"""Columns every workload derives from a measured case: energy per sample and above idle, validity,
cost. One call per case, shared by inference, training and multi-GPU workloads::

    ctx = sweep_context(device, env, idle_s=3.0, price_per_hour=None, kwh_price=None)  # once, before the sweep
    ...
    rec.update(derived_columns(rec, ctx))                                          # after each case

The context holds what is measured or looked up once per sweep: idle power and the device's price.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import validity
from accelbench.core.errors import OK
from accelbench.cost import cost_columns
from accelbench.cost.prices import PriceQuote, quote
from accelbench.telemetry.energy import per_sample_columns


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepContext:
    """Per-sweep inputs of :func:`derived_columns`.

    Attributes:
        device_name: GPU name (NVML) or CPU model.
        idle: ``measure_idle`` result (``idle_power_w`` W, its source, temperature...).
        price: price of the devices a case uses (None: unknown device, no override).
        kwh_price_usd: electricity price (USD/kWh) or None.
    """

    device_name: str | None
    idle: dict[str, Any]
    price: PriceQuote | None
    kwh_price_usd: float | None = None


def sweep_context(
    device,
    env: dict[str, Any],
    *,
    idle_s: float = 3.0,
    price_per_hour: float | None = None,
    kwh_price: float | None = None,
    telemetry_period_ms: float = 100.0,
) -> SweepContext:
    """Measure idle power (``idle_s`` seconds with nothing running) and look up the price, once per sweep.

    Args:
        device: ``torch.device`` or a list of them (the devices every case uses).
        env: provenance of :func:`accelbench.sweep.provenance.collect` (GPU name, memory, CPU count).
        idle_s: idle measurement length (s); 0 skips it.
        price_per_hour: USD per device-hour override (``--price-per-hour``).
        kwh_price: USD per kWh for the electricity cost (``--kwh-price``).
    """
    from accelbench.core.device import sync_if_context
    from accelbench.telemetry import measure_idle

    devs = list(device) if isinstance(device, (list, tuple)) else [device]
    period_s = telemetry_period_ms / 1000 if telemetry_period_ms else 0.1
    for d in devs:  # our own queued work first (a process without a CUDA context has none, and gets none)
        sync_if_context(d)
    idle = measure_idle(devs, idle_s, period_s)
    dtype = devs[0].type
    name = env.get("gpu_name") or env.get("device_name")
    price = quote(
        device_type=dtype,
        device_name=name,
        n_devices=len(devs),
        mem_bytes=env.get("gpu_mem_total_bytes"),
        vcpus=env.get("cpu_count"),
        override_usd_per_hour=price_per_hour,
    )
    return SweepContext(device_name=name, idle=idle, price=price, kwh_price_usd=kwh_price)


def derived_columns(
    rec: dict[str, Any],
    ctx: SweepContext,
    *,
    samples_key: str = "samples_timed",
    work_seconds_key: str = "total_time_s",
    work_samples_key: str = "images",
    spread_key: str = "latency_spread",
) -> dict[str, Any]:
    """Energy-per-sample, idle, validity and cost columns for one case record.

    Args:
        rec: the case so far (status, throughput, ``energy_j``, ``energy_window_s``, telemetry...).
        ctx: :func:`sweep_context`.
        samples_key: samples processed in the energy window.
        work_seconds_key / work_samples_key: the work the cost is quoted for (inference: ``images``
            images in ``total_time_s``).
        spread_key: IQR/median column for the validity check.
    Returns:
        New columns; for a case that did not run (status other than ``ok``) only the device and idle ones.
    """
    out: dict[str, Any] = {"device_name": ctx.device_name, **ctx.idle}
    if rec.get("status") != OK:
        return out
    out.update(
        per_sample_columns(
            rec.get("energy_j"),
            rec.get(samples_key),
            window_s=rec.get("energy_window_s"),
            idle_power_w=ctx.idle.get("idle_power_w"),
        )
    )
    out.update(validity.assess(rec, spread_key))
    price = ctx.price
    out.update(
        cost_columns(
            seconds=rec.get(work_seconds_key),
            samples=rec.get(work_samples_key),
            usd_per_hour=price.usd_per_hour if price else None,
            price_source=price.source if price else None,
            energy_per_sample_j=out["energy_per_sample_j"],
            usd_per_kwh=ctx.kwh_price_usd,
        )
    )
    return out
