"""The sampler process's side of :mod:`accelbench.telemetry.process`: it opens a thread-mode
:class:`~accelbench.telemetry.monitor.Monitor` whose sources read for the measured process, runs its window between
the parent's ``begin`` and ``end``, and sends back what it measured. Requests and replies are pickles over one
``multiprocessing`` connection: ``(op, *args)`` in, ``(True, value)`` or ``(False, error)`` out."""

from __future__ import annotations

import os
import pickle
import threading
import time
from typing import Any

from accelbench.telemetry.monitor import Monitor

WATCHDOG_S = 0.5  # how often the child checks that its parent is still the one that started it


def _watchdog(ppid: int) -> None:
    while os.getppid() == ppid:
        time.sleep(WATCHDOG_S)
    os._exit(0)  # the parent is gone (re-parented): nobody will read what we measure


class _Session:
    """The child's state: the open monitor of the current window, if any."""

    def __init__(self):
        self.mon: Monitor | None = None

    def _close(self) -> None:
        if self.mon is not None:
            for src in self.mon.sources:
                src.close()
            self.mon = None

    def handle(self, msg: tuple) -> Any:
        op, *args = msg
        if op == "open":  # devices, period_s, pids, factories, pid of the measured process
            self._close()
            devices, period_s, pids, factories, pid = args
            self.mon = Monitor(devices, period_s, pids, factories=factories, watch=pid)
            return None
        if op == "begin":
            self.mon.sampler.__enter__()
            return time.perf_counter()
        if op == "end":  # the measured block's (start, end), perf_counter s of the parent: one clock
            mon, self.mon = self.mon, None
            mon.sampler.stop(args[0])
            for src in mon.sources:
                src.close()
            return {"record": mon.record(), "series": mon.series(), "raw": mon.raw()}
        if op == "clock":
            return time.perf_counter()
        raise ValueError(f"unknown request {op!r}")


def serve(conn, ppid: int) -> None:
    """The sampler process: answer the parent's requests until the pipe closes or the parent is gone."""
    threading.Thread(target=_watchdog, args=(ppid,), name="accelbench-telemetry-watchdog", daemon=True).start()
    session = _Session()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply = (True, session.handle(msg))
        except Exception as exc:  # reported to the parent as the case's telemetry error; the child goes on
            session._close()
            reply = (False, f"{type(exc).__name__}: {exc}")
        try:
            try:
                conn.send(reply)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:  # a source's value that does not pickle
                conn.send((False, f"the reply could not be sent: {type(exc).__name__}: {exc}"))
        except OSError:
            return


ENTRY = "from accelbench.telemetry.child import main; main()"  # python -c ENTRY FD PARENT_PID


def main() -> None:
    """The sampler process's entry point: ``argv`` = the connection's file descriptor, the parent's pid."""
    import sys
    from multiprocessing.connection import Connection

    serve(Connection(int(sys.argv[1])), int(sys.argv[2]))
