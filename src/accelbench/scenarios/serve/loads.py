"""The load of a serve level, one value: closed (N requests always in flight) or open (arrivals at a rate, Poisson or
gamma, at most a cap in flight), and the open loop's absolute send times (:func:`send_times`). The client
(:mod:`accelbench.scenarios.serve.load`) sends at a :class:`Load`; the levels of a run are :func:`level_loads`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from accelbench.core.errors import ConfigError

ARRIVALS = ("poisson", "gamma")
# levels run when neither concurrency nor request rates are given
GPU_CONCURRENCY, CPU_CONCURRENCY = (1, 8, 32), (1, 4)


@dataclass(frozen=True, kw_only=True, slots=True)
class Load:
    """A level's load: a closed loop (``concurrency`` requests always in flight) or an open loop (``rate_per_s``
    arrivals a second on :func:`send_times`, at most ``max_concurrency`` in flight). Build one with :meth:`closed` or
    :meth:`open`; everything that differs between the two kinds (the case key, the row's columns, the pool's size,
    the search's bounds) is asked of it.

    Attributes:
        concurrency: closed loop: requests in flight (None: an open loop).
        rate_per_s: open loop: arrivals a second (``math.inf``: all at once; None: a closed loop).
        arrival, burstiness: the open loop's gaps: ``poisson``, or ``gamma`` of shape ``burstiness``
            (:func:`send_times`); a closed loop has none (its fields keep their defaults).
        max_concurrency: the open loop's cap of requests in flight (None: none; later arrivals queue in the client).

    Raises:
        ConfigError: both or neither of ``concurrency`` and ``rate_per_s``, or a bad value (one line).
    """

    concurrency: int | None = None
    rate_per_s: float | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ConfigError(
                "load", (self.concurrency, self.rate_per_s), "a concurrency (closed loop) or a request rate, not both"
            )
        if not self.is_open:
            if not isinstance(self.concurrency, int) or self.concurrency < 1:
                raise ConfigError("concurrency", self.concurrency, "an integer >= 1")
            if self.max_concurrency is not None:
                raise ConfigError("max_concurrency", self.max_concurrency, "nothing with a concurrency (closed loop)")
            return
        if self.arrival not in ARRIVALS:
            raise ConfigError("arrival", self.arrival, ", ".join(ARRIVALS))
        if not self.rate_per_s > 0:
            raise ConfigError("request rate", self.rate_per_s, "a rate > 0 requests/s")
        if not self.burstiness > 0:
            raise ConfigError("burstiness", self.burstiness, "a gamma shape > 0")
        if self.max_concurrency is not None and (not isinstance(self.max_concurrency, int) or self.max_concurrency < 1):
            raise ConfigError("max_concurrency", self.max_concurrency, "an integer >= 1")

    @classmethod
    def closed(cls, concurrency: int) -> Load:
        """``concurrency`` requests always in flight."""
        return cls(concurrency=concurrency)

    @classmethod
    def open(
        cls, rate_per_s: float, *, arrival: str = "poisson", burstiness: float = 1.0, cap: int | None = None
    ) -> Load:
        """``rate_per_s`` arrivals a second (``arrival``, ``burstiness``: :func:`send_times`), at most ``cap`` in
        flight (None: no cap)."""
        return cls(rate_per_s=rate_per_s, arrival=arrival, burstiness=burstiness, max_concurrency=cap)

    @classmethod
    def of_level(cls, concurrency: int | None, rate_per_s: float | None, settings: Any = None) -> Load:
        """The load of a level given as its two fields (one of them None), its open loop's arrivals, burstiness and
        cap from ``settings`` (:class:`~accelbench.scenarios.serve.ServeSettings`; None: the defaults)."""
        if concurrency is not None or rate_per_s is None or settings is None:
            return cls(concurrency=concurrency, rate_per_s=rate_per_s)
        return cls.open(
            rate_per_s, arrival=settings.arrival, burstiness=settings.burstiness, cap=settings.max_concurrency
        )

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Load | None:
        """The load of a stored level row (its :meth:`columns`); None: a row without a valid one."""
        c, r, cap = row.get("concurrency"), row.get("request_rate_per_s"), row.get("max_concurrency")
        try:
            if c is not None:
                return cls.closed(int(c))
            if r is None:
                return None
            arrival, burstiness = row.get("arrival") or "poisson", row.get("burstiness") or 1.0
            return cls.open(float(r), arrival=arrival, burstiness=burstiness, cap=None if cap is None else int(cap))
        except (ConfigError, TypeError, ValueError):
            return None

    @property
    def is_open(self) -> bool:
        """Arrivals at a rate (open loop), not a fixed number in flight (closed loop)."""
        return self.rate_per_s is not None

    @property
    def value(self) -> float:
        """The load as one number (the concurrency, or the rate a second): what the SLO search moves."""
        return self.rate_per_s if self.is_open else self.concurrency

    @property
    def limit(self) -> int | None:
        """The most requests in flight (the connection pool's size; warm-up's concurrency); None: no limit."""
        return self.max_concurrency if self.is_open else self.concurrency

    @property
    def column(self) -> str:
        """The row column holding :attr:`value` (``slo_max_<column>`` names the search's answer)."""
        return "request_rate_per_s" if self.is_open else "concurrency"

    @property
    def integer(self) -> bool:
        """Loads of this kind are whole numbers (a concurrency): the search's midpoints are rounded down."""
        return not self.is_open

    @property
    def label(self) -> str:
        """A short label for messages: ``concurrency 8``, ``4 requests/s``."""
        return f"{self.rate_per_s:g} requests/s" if self.is_open else f"concurrency {self.concurrency}"

    def with_value(self, value: float) -> Load:
        """The same kind of load (same arrivals and cap) at ``value`` (a concurrency is taken as an integer)."""
        if self.is_open:
            return Load.open(float(value), arrival=self.arrival, burstiness=self.burstiness, cap=self.max_concurrency)
        return Load.closed(int(value))

    def key_suffix(self) -> str:
        """What the load adds to a case key: ``|c=8``, ``|rate=2.5`` (stored runs are resumed by these keys)."""
        return f"|rate={self.rate_per_s:g}" if self.is_open else f"|c={self.concurrency}"

    def search_key_suffix(self) -> str:
        """What an SLO search over this kind of load adds to its case key: ``|rate`` or ``|concurrency``."""
        return "|rate" if self.is_open else "|concurrency"

    def columns(self) -> dict[str, Any]:
        """The row's load columns: ``concurrency`` or ``request_rate_per_s``; an open loop's ``arrival``,
        ``max_concurrency`` and (gamma arrivals only) ``burstiness``; None where they do not apply."""
        open_ = self.is_open
        return {
            "concurrency": self.concurrency,
            "request_rate_per_s": self.rate_per_s,
            "arrival": self.arrival if open_ else None,
            "burstiness": self.burstiness if open_ and self.arrival == "gamma" else None,
            "max_concurrency": self.max_concurrency if open_ else None,
        }

    def search_bounds(self, values: list[float] | tuple[float, ...], steps: int) -> tuple[float, float]:
        """``(lo, hi)`` of an SLO search over the levels' ``values``: their lowest and highest; one value is the
        top, and the bottom is 1 (a concurrency) or the finest step ``steps`` halvings would reach (a rate > 0)."""
        hi = max(values)
        if len(values) > 1:
            return min(values), hi
        return (hi / 2 ** (steps + 1), hi) if self.is_open else (1, hi)

    def check_duration(self, duration_s: float | None) -> None:
        """Raises ConfigError: a level of ``duration_s`` (not None) at an infinite rate (it would never end)."""
        if duration_s is not None and self.is_open and math.isinf(self.rate_per_s):
            raise ConfigError("request rate", self.rate_per_s, "a finite rate when the level lasts a duration")

    def sender(self, level: Any, n: int, seed: int, duration_s: float | None):
        """What sends ``level``'s requests: a coroutine function (closed: ``concurrency`` workers; open: the
        arrivals' schedule, drawn now, outside the measured window)."""
        if not self.is_open:
            return lambda: level.closed(n, self.concurrency, duration_s)
        times = schedule(n, self.rate_per_s, self.arrival, self.burstiness, seed, duration_s)
        return lambda: level.open(times, self.max_concurrency)


def send_times(n: int, rate: float, arrival: str = "poisson", burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Absolute send times (s from the level's start) of ``n`` open-loop arrivals at ``rate`` requests/s.

    The first request is due at its first gap, each later one a gap after the previous: gaps are exponential with
    mean ``1/rate`` (``poisson``), or gamma with shape ``burstiness`` and scale ``1/(rate*burstiness)`` (``gamma``:
    mean ``1/rate``; below 1 burstier, above 1 more regular; 1 is Poisson) — vLLM ``benchmark_serving``'s
    definition. ``rate`` infinite: all due at 0. Drawn from ``numpy.random.default_rng(seed)``.

    Raises:
        ConfigError: ``rate`` or ``burstiness`` not > 0, an unknown arrival.
    """
    if arrival not in ARRIVALS:
        raise ConfigError("arrival", arrival, ", ".join(ARRIVALS))
    if not rate > 0:
        raise ConfigError("request rate", rate, "a rate > 0 requests/s")
    if not burstiness > 0:
        raise ConfigError("burstiness", burstiness, "a gamma shape > 0")
    if math.isinf(rate):
        return [0.0] * n
    rng = np.random.default_rng(seed)
    if arrival == "poisson":
        gaps = rng.exponential(1.0 / rate, size=n)
    else:
        gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=n)
    return [float(t) for t in np.cumsum(gaps)]


def level_loads(st: Any, device: str) -> list[Load]:
    """The loads of the levels the serve settings ``st`` give: its request rates (open loop), else its concurrencies (closed loop;
    neither given: the device's defaults)."""
    if st.request_rates:
        return [
            Load.open(r, arrival=st.arrival, burstiness=st.burstiness, cap=st.max_concurrency) for r in st.request_rates
        ]
    conc = st.concurrency or (GPU_CONCURRENCY if device.startswith("cuda") else CPU_CONCURRENCY)
    return [Load.closed(c) for c in conc]


def schedule(n: int, rate: float, arrival: str, burstiness: float, seed: int, duration_s: float | None) -> list[float]:
    """The open loop's send times (:func:`send_times`): ``n`` arrivals, or those before ``duration_s`` when the level
    lasts a duration."""
    if duration_s is None:
        return send_times(n, rate, arrival, burstiness, seed)
    times = send_times(int(rate * duration_s * 2) + 16, rate, arrival, burstiness, seed)
    return [t for t in times if t < duration_s]
