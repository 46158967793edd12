"""A background thread that samples telemetry sources at a fixed period (no driver imports here).

A *source* is any object with ``name``, ``begin() -> dict``, ``read() -> dict`` and ``end() -> dict``
(:class:`accelbench.telemetry.sources.Source`); ``begin`` and ``end`` read the counters that bound the
window (energy, CPU times), ``read`` returns one sample. A source with ``sampled = False`` (only
window-edge counters) is never ``read``.
The thread samples every source at t = 0, then every ``period_s`` (drift-free: the next tick is
scheduled from the start time, not from the end of the previous read), and a last sample is taken at
exit so the series covers the whole window. ``period_s = 0`` turns the thread off: only the counters
at the window edges are read. Each source's end counters also get ``body_t``: the ``time.perf_counter``
moments the measured block began and ended (the ``with`` body, without the sampler's own start and stop).
"""

from __future__ import annotations

import threading
import time
from typing import Any


class Sampler:
    """Context manager: ``samples[name]`` (list of dicts with ``t_s``) and ``counters[name]``
    (``{"begin": ..., "end": ...}``) per source, plus ``window_s`` (s, perf_counter) and ``busy_s``
    (time the thread spent reading, s: its cost).

    A source whose ``read`` raises stops being sampled (its error is kept in ``errors``); the case
    goes on.
    """

    def __init__(self, sources: list[Any], period_s: float = 0.1):
        self.sources = list(sources)
        self.period_s = float(period_s or 0.0)
        self.samples: dict[str, list[dict[str, Any]]] = {s.name: [] for s in self.sources}
        self.counters: dict[str, dict[str, Any]] = {s.name: {} for s in self.sources}
        self.errors: dict[str, str] = {}
        self.window_s: float | None = None
        self.busy_s = 0.0  # time the thread spent reading (its cost), s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._body_start = 0.0

    def _sample_all(self) -> None:
        t = time.perf_counter() - self._t0
        for s in self.sources:
            if s.name in self.errors or not getattr(s, "sampled", True):
                continue
            try:
                row = s.read()
            except Exception as exc:  # a telemetry failure must never end the measured case
                self.errors[s.name] = f"{type(exc).__name__}: {exc}"
                continue
            row["t_s"] = t
            self.samples[s.name].append(row)

    def _loop(self) -> None:
        k = 0
        while True:
            t = time.perf_counter()
            self._sample_all()
            self.busy_s += time.perf_counter() - t
            k += 1
            delay = self._t0 + k * self.period_s - time.perf_counter()
            if self._stop.wait(max(delay, 0.0)):
                return

    def __enter__(self) -> Sampler:
        for s in self.sources:
            self.counters[s.name]["begin"] = s.begin()
        self._t0 = time.perf_counter()
        if self.period_s > 0:
            self._thread = threading.Thread(target=self._loop, name="accelbench-telemetry", daemon=True)
            self._thread.start()
        self._body_start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.stop((self._body_start, time.perf_counter()))

    def stop(self, body: tuple[float, float]) -> None:
        """End the window: the last sample, ``window_s`` and the end counters, whose ``body_t`` is ``body``:
        the ``time.perf_counter`` moments (s) the measured block began and ended. :meth:`__exit__` gives its
        own; the sampler process (:mod:`accelbench.telemetry.process`) gives those of the measured process."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._sample_all()
        self.window_s = time.perf_counter() - self._t0
        for s in self.sources:
            self.counters[s.name]["end"] = {**s.end(), "body_t": tuple(body)}
