"""The telemetry sampler in a child process, so that the measured process keeps its GIL.

In the thread mode (:class:`accelbench.telemetry.monitor.Monitor`) the sampler thread and the energy counter's
watch (:class:`accelbench.telemetry.ticks.CounterWatch`: a read every 1 ms for ~12 ms of each 100 ms period) wake
up inside the measured process, and each wake-up takes the GIL from the loop being timed: a host-bound loop runs
slower while it is watched (Hugging Face ``generate`` at batch 1 is measurably slower a token with the monitor than
without: ``benchmarks/llm_hf_overhead.py``, docs/results.md). Here a child process runs that same ``Monitor`` (the same
sources, ``Sampler`` and ``CounterWatch``) with its sources reading for the measured process
(:meth:`accelbench.telemetry.sources.Source.watch`), and hands back what they produced: the samples, the
window-edge counters (the energy ticks among them), ``window_s``, ``busy_s``, ``errors``, and the columns and
series computed from them by the same code. Everything downstream (energy from the counter's steps,
:mod:`accelbench.telemetry.aggregate`, the validity flags) is unchanged.

Clock: the child's sample times, tick brackets and window edges are ``time.perf_counter``, which on Linux is
``clock_gettime(CLOCK_MONOTONIC)`` (``time.get_clock_info("perf_counter")``; PEP 418), one clock for every process
of the host; so the measured block's moments the parent sends (``body_t``) and the child's tick brackets are on
one time axis (``tests/test_telemetry_process.py`` checks it).

Lifecycle: one child per measuring process, a fresh interpreter (spawned, never forked: the parent may hold
CUDA; :class:`_Child` says why not through ``multiprocessing``), started by the first process-mode monitor and
kept for the next ones; each monitor opens its sources in the child when it is built (importing pynvml, probing
GPM), before its window; ``__enter__``/``__exit__`` send the window's begin and end over the pipe. The child never
outlives its parent: the parent closes the pipe at exit (:func:`shutdown`, ``atexit``), the child ends when the pipe
closes (``recv`` sees EOF when the parent dies, even by SIGKILL) and when its parent pid changes (a watchdog, for a
parent whose forked children still hold the pipe). A child that dies, fails or does not answer within
:data:`REPLY_S` leaves the case without telemetry and the reason in ``telemetry_errors``: never a failed case.
"""

from __future__ import annotations

import atexit
import os
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any

from accelbench.telemetry.child import ENTRY
from accelbench.telemetry.monitor import DEFAULT_PERIOD_S, _devices
from accelbench.telemetry.sources import SOURCES

OPEN_S = 120.0  # the first open waits for the child's start (a fresh interpreter, imports, NVML init)
REPLY_S = 30.0  # any later reply


@dataclass(frozen=True, slots=True)
class DeviceRef:
    """A watched device as the child gets it: ``type`` and ``index`` as a ``torch.device``'s, and the GPU's NVML
    UUID resolved in the parent, so the child finds its handle without importing torch (which would open CUDA)."""

    type: str
    index: int | None = None
    uuid: str | None = None


def _ref(device) -> DeviceRef:
    kind, index = getattr(device, "type", str(device)), getattr(device, "index", None)
    if kind != "cuda":
        return DeviceRef(kind, index)
    from accelbench.telemetry.sources.nvml import torch_uuid

    return DeviceRef(kind, index, torch_uuid(index or 0))


# the parent's side -------------------------------------------------------------------------------------------
class Lost(RuntimeError):
    """The sampler process died, hung or could not start (it is gone; the next monitor starts another)."""


class _Child:
    """The sampler process and the parent's end of its socket pair (a ``multiprocessing`` connection: pickles).

    A fresh interpreter running :func:`accelbench.telemetry.child.main`, as the ``spawn`` start method makes, but
    without ``multiprocessing``'s re-import of the parent's main module: a script without a ``__main__`` guard
    would run its measurement again in the child. It gets the parent's ``sys.path`` (so a source registered from a
    module of the parent's path unpickles there) and no terminal (it reports through the pipe)."""

    def __init__(self):
        import socket
        import subprocess
        import sys
        from multiprocessing.connection import Connection

        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", ENTRY, str(theirs.fileno()), str(os.getpid())],
                pass_fds=[theirs.fileno()],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        finally:
            theirs.close()  # only the child holds its end: the child sees EOF when this process dies
        self.pipe = Connection(ours.detach())
        self.owner = os.getpid()  # a forked copy of this object (a DataLoader worker's) is not the owner

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, *msg, timeout: float = REPLY_S) -> Any:
        """Send ``msg``, return the child's reply.

        Raises:
            Lost: the pipe broke or no reply came within ``timeout`` s (the child is then ended).
            RuntimeError: the child answered with an error (it goes on serving).
        """
        try:
            self.pipe.send(msg)
            if not self.pipe.poll(timeout):
                raise TimeoutError(f"no reply to {msg[0]!r} within {timeout:g} s")
            ok, value = self.pipe.recv()
        except (EOFError, OSError, TimeoutError) as exc:
            self.close()
            raise Lost(
                f"the sampler process is gone ({type(exc).__name__}: {exc}; exit code {self.proc.returncode})"
            ) from exc
        if not ok:
            raise RuntimeError(value)
        return value

    def close(self) -> None:
        """Close the pipe (the child ends on its EOF); kill it if it has not ended within 5 s."""
        import subprocess

        self.pipe.close()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_CHILD: _Child | None = None
_LOCK = threading.Lock()


def _child() -> _Child:
    """The running sampler process, started first when there is none (or the last one died)."""
    global _CHILD
    if _CHILD is not None and _CHILD.owner != os.getpid():
        _CHILD = None  # inherited through fork: the parent's child, not ours
    if _CHILD is None or not _CHILD.alive():
        if _CHILD is not None:
            _CHILD.close()  # reap the one that died
        try:
            _CHILD = _Child()
        except Exception as exc:  # no file descriptors left, no executable, ...
            _CHILD = None
            raise Lost(f"the sampler process could not start ({type(exc).__name__}: {exc})") from exc
    return _CHILD


def shutdown() -> None:
    """End the sampler process (closing the pipe ends it); the next process-mode monitor starts another."""
    global _CHILD
    with _LOCK:
        if _CHILD is not None and _CHILD.owner == os.getpid():
            _CHILD.close()
        _CHILD = None


atexit.register(shutdown)


def _factories() -> tuple[dict, dict[str, str]]:
    """The registry as the child can rebuild it: factories it can import by name, and an error for the others."""
    ok, errors = {}, {}
    for name, factory in SOURCES.items():
        try:
            pickle.dumps(factory)
            ok[name] = factory
        except Exception:
            errors[name] = (
                "not read in the sampler process: its factory cannot be pickled (register a module-level function)"
            )
    return ok, errors


class ProcessMonitor:
    """:class:`~accelbench.telemetry.monitor.Monitor`'s interface (a context manager around the timed region;
    ``record()``, ``series()``, ``raw()``), its sources read in the sampler process (see the module docstring).

    Attributes:
        child_pid: the sampler process's pid (None when it could not start).
        sampler: after the window, what the child's sampler produced: ``samples``, ``counters``, ``window_s``,
            ``busy_s``, ``errors`` (as :class:`~accelbench.telemetry.sampler.Sampler`'s).
        errors: source or sampler-process name -> what went wrong (also in ``telemetry_errors``).
    """

    isolation = "process"

    def __init__(self, device, period_s: float | None = DEFAULT_PERIOD_S, pids: tuple[int, ...] = ()):
        devs = _devices(device)
        self.device, self.period_s = devs[0], float(period_s or 0.0)
        factories, self.errors = _factories()
        self.result: dict[str, Any] | None = None
        self.sampler: Any = None
        self.child_pid: int | None = None
        self._child: _Child | None = None
        self._body = (0.0, 0.0)
        try:
            with _LOCK:
                child = _child()
                self.child_pid = child.pid
                child.ask(
                    "open", [_ref(d) for d in devs], self.period_s, tuple(pids), factories, os.getpid(), timeout=OPEN_S
                )
            self._child = child
        except Exception as exc:  # a telemetry failure never ends the measured case
            self.errors["sampler process"] = f"{type(exc).__name__}: {exc}" if not isinstance(exc, Lost) else str(exc)

    def _ask(self, *msg) -> Any:
        if self._child is None:
            return None
        try:
            with _LOCK:
                return self._child.ask(*msg)
        except Exception as exc:
            self.errors["sampler process"] = str(exc) if isinstance(exc, Lost) else f"{type(exc).__name__}: {exc}"
            self._child = None
            return None

    def __enter__(self) -> ProcessMonitor:
        self._ask("begin")
        self._body = (time.perf_counter(), 0.0)
        return self

    def __exit__(self, *exc) -> None:
        self._body = (self._body[0], time.perf_counter())
        self.result = self._ask("end", self._body)
        if self.result is not None:
            raw = self.result["raw"]
            self.sampler = _Handed(raw["samples"], raw["counters"], raw["window_s"], raw["busy_s"], raw["errors"])

    def record(self) -> dict[str, Any]:
        """The columns :meth:`Monitor.record` gives, computed in the child, with ``telemetry_isolation``
        ``process``; without the child's data (it died, failed or never started) the window's length, no samples,
        no energy (``energy_source`` "not available") and the reason in ``telemetry_errors``."""
        if self.result is None:
            body_s = self._body[1] - self._body[0]
            rec = {
                "telemetry_period_ms": 1000 * self.period_s,
                "telemetry_window_s": body_s if body_s > 0 else None,
                "telemetry_samples": 0,
                "telemetry_busy_pct": None,
                "energy_j": None,
                "energy_source": "not available",
            }
        else:
            rec = dict(self.result["record"])
        rec["telemetry_isolation"] = self.isolation
        errors = [rec["telemetry_errors"]] if rec.get("telemetry_errors") else []
        errors += [f"{k}: {v}" for k, v in self.errors.items()]
        if errors:
            rec["telemetry_errors"] = "; ".join(errors)
        return rec

    def series(self) -> dict[str, list[float]]:
        """:meth:`Monitor.series` of the child's samples ({} without them)."""
        return dict(self.result["series"]) if self.result is not None else {}

    def raw(self) -> dict[str, Any]:
        """:meth:`Monitor.raw` of the child's window (empty samples and counters without it)."""
        if self.result is not None:
            return {**self.result["raw"], "errors": {**self.result["raw"]["errors"], **self.errors}}
        return {
            "period_s": self.period_s,
            "window_s": None,
            "busy_s": 0.0,
            "samples": {},
            "counters": {},
            "info": {},
            "errors": dict(self.errors),
        }


@dataclass(frozen=True, slots=True)
class _Handed:
    samples: dict
    counters: dict
    window_s: float | None
    busy_s: float
    errors: dict
