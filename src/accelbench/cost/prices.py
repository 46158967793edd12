"""The shipped price list (``prices.toml``) and matching a device to it. Pure apart from reading the file.

An unknown GPU without an override gets no price (None), never zero: a cost of 0 would look like a
free, perfectly efficient GPU in every comparison.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from accelbench.core.errors import ConfigError

PRICES_FILE = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True, kw_only=True, slots=True)
class PriceEntry:
    """One row of the price list. ``usd_per_hour`` is per GPU (``per="gpu"``) or per vCPU (``per="vcpu"``)."""

    key: str
    per: str
    usd_per_hour: float
    match: str = ""
    mem_gib: float | None = None
    instance: str = ""
    provider: str = ""
    source: str = ""
    date: str = ""
    estimate: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PriceQuote:
    """The price of the hardware one case runs on: ``usd_per_hour`` for all its devices together."""

    usd_per_hour: float
    source: str


def _entry(row: dict, per: str) -> PriceEntry:
    price = row[f"usd_per_{per}_hour"]
    fields = {k: row[k] for k in ("match", "mem_gib", "instance", "provider", "source", "date", "estimate") if k in row}
    return PriceEntry(key=row["key"], per=per, usd_per_hour=float(price), **fields)


@lru_cache(maxsize=4)
def load_prices(path: str | Path = PRICES_FILE) -> tuple[PriceEntry, ...]:
    """Read a price file (``[[gpu]]`` rows with ``usd_per_gpu_hour``, ``[[cpu]]`` rows with ``usd_per_vcpu_hour``).

    Raises:
        ConfigError: unreadable file or a row without its price.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        raw = tomllib.loads(Path(path).read_text())
        return tuple([_entry(r, "gpu") for r in raw.get("gpu", [])] + [_entry(r, "vcpu") for r in raw.get("cpu", [])])
    except (OSError, KeyError, ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("price file", str(path), f"a readable price TOML ({exc})") from None


def _describe(e: PriceEntry) -> str:
    est = "estimate: " if e.estimate else ""
    return f"{est}{e.instance} ({e.provider} {e.date}; {e.source})"


def match_gpu(name: str, mem_bytes: float | None = None, entries=None) -> PriceEntry | None:
    """The price entry for an NVML GPU name, or None for an unknown GPU.

    Several matches (A100 40GB and 80GB) are resolved by the ``<N>GB`` in the name, else by the
    entry whose ``mem_gib`` is closest to ``mem_bytes``, else the first.
    """
    cands = [
        e for e in (entries or load_prices()) if e.per == "gpu" and e.match and re.search(e.match, name or "", re.I)
    ]
    if len(cands) <= 1:
        return cands[0] if cands else None
    m = re.search(r"(\d+)\s*GB", name, re.I)
    if m:
        exact = [e for e in cands if e.mem_gib == float(m.group(1))]
        if exact:
            return exact[0]
    if mem_bytes:
        return min(cands, key=lambda e: abs((e.mem_gib or 0) - mem_bytes / 2**30))
    return cands[0]


def quote(
    *,
    device_type: str,
    device_name: str | None,
    n_devices: int = 1,
    mem_bytes: float | None = None,
    vcpus: int | None = None,
    override_usd_per_hour: float | None = None,
    entries=None,
) -> PriceQuote | None:
    """The hourly price of the devices a case used.

    Args:
        device_type: ``cuda`` or ``cpu``.
        device_name: NVML GPU name (e.g. ``NVIDIA H200``); ignored for CPUs.
        n_devices: GPUs used (the price is per GPU-hour).
        mem_bytes: GPU memory, to tell A100 40GB from 80GB when the name does not.
        vcpus: logical CPUs of the machine, for a CPU-only run.
        override_usd_per_hour: price per device-hour (``--price-per-hour``); wins over the list.
    Returns:
        :class:`PriceQuote` or None when the device is not in the list and no override was given.
    """
    if override_usd_per_hour is not None:
        return PriceQuote(usd_per_hour=override_usd_per_hour * n_devices, source="--price-per-hour / config")
    if device_type == "cuda":
        e = match_gpu(device_name or "", mem_bytes, entries)
        return PriceQuote(usd_per_hour=e.usd_per_hour * n_devices, source=_describe(e)) if e else None
    cpu = [e for e in (entries or load_prices()) if e.per == "vcpu"]
    if not cpu or not vcpus:
        return None
    return PriceQuote(usd_per_hour=cpu[0].usd_per_hour * vcpus, source=f"{vcpus} vCPU x {_describe(cpu[0])}")
