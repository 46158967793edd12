"""When does a cumulative counter change? A thread that watches NVML's total-energy counter during a window.

NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded) advances in
steps, about every 100 ms on Hopper GPUs, each step the exact energy of its period (``benchmarks/energy_ticks_probe.py``
measures the period and how closely the steps agree at idle; docs/results.md). A reading taken at a random moment is therefore up to one period
stale at each window edge, which is what limits the plain counter difference to ``period / window``
(:func:`accelbench.telemetry.energy.confidence`). The moments of the steps themselves are not reported; this
thread reads the counter repeatedly and records, for each step it sees, the bracket ``(lo, hi]`` in which it
happened (the start of the last read that still showed the old value, the end of the first read that showed
the new one). Between steps it sleeps until shortly before the next one is due, so it costs a few reads per
period (an NVML read is far slower in a virtual machine than on bare metal). The arithmetic on the brackets is
:func:`accelbench.telemetry.energy.tick_energy`.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any

from accelbench.telemetry.energy import counter_period

POLL_S = 0.001  # pause between reads while a step is due (the thread gives the GIL back)
GUARD_S = 0.012  # start reading this long before the next step is due
MAX_TICKS = 100_000  # a counter that changes at every read is no stepped counter: stop recording
# The best-known update interval (U, dU) of each watched counter in this process: a property of the device, so
# a long window (the idle measurement before a sweep: ~30 periods) pins it for the short ones after it.
_PERIODS: dict[Hashable, tuple[float, float]] = {}


class CounterWatch:
    """Record the steps of ``read()`` (a cumulative counter) from :meth:`start` to :meth:`stop`.

    Args:
        read: returns the counter's current value, or None when it cannot be read (the thread then stops).
        clock: seconds (``time.perf_counter``).
    """

    def __init__(self, read: Callable[[], float | None], clock: Callable[[], float] = time.perf_counter):
        self.read, self.clock = read, clock
        self.ticks: list[tuple[float, float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> CounterWatch:
        self._thread = threading.Thread(target=self._run, name="accelbench-energy-ticks", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, float, float]]:
        """Stop the thread; returns the steps seen: ``(lo_s, hi_s, value)`` in ``clock`` seconds, in order."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return list(self.ticks)

    def _run(self) -> None:
        try:
            prev_t, prev = self.clock(), self.read()
            while prev is not None and not self._stop.is_set() and len(self.ticks) < MAX_TICKS:
                t0 = self.clock()
                value = self.read()
                t1 = self.clock()
                if value is None:
                    return
                if value != prev:
                    self.ticks.append((prev_t, t1, value))
                prev, prev_t = value, t0
                self._stop.wait(self._pause(t1))
        except Exception:  # a telemetry failure never ends the measured case: the plain difference stands
            return

    def _pause(self, now: float) -> float:
        """Sleep until ``GUARD_S`` before the next step is due (the median step interval after the last one),
        or ``POLL_S`` while one is due or the interval is not known yet."""
        if len(self.ticks) < 3:
            return POLL_S
        mids = [(lo + hi) / 2 for lo, hi, _ in self.ticks[-6:]]
        period = statistics.median(b - a for a, b in zip(mids, mids[1:]))
        return max(POLL_S, mids[-1] + period - GUARD_S - now)


def step_counters(ticks: list[tuple[float, float, float]], key: Hashable) -> dict[str, Any]:
    """The end-of-window counters of a watch: ``energy_ticks`` (its steps) and ``energy_update`` (``(U, dU)``,
    the best interval known for ``key``, this window's included: :func:`accelbench.telemetry.energy.counter_period`).
    Empty without steps."""
    if not ticks:
        return {}
    found, known = counter_period(ticks), _PERIODS.get(key)
    if found is not None and (known is None or found[1] / found[0] < known[1] / known[0]):
        _PERIODS[key] = known = found
    return {"energy_ticks": ticks, "energy_update": known}
