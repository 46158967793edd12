"""Where a sweep is while it runs: the case it measures and the stage of that case ("loading the model", "the
warm-up generation", "the timed window"), so that a run stopped by Ctrl-C, SIGTERM or a timeout says where it was.

The shared steps of every scenario name their stage (:func:`enter`: measuring the device's ceilings, building or
loading the model, building the forward, warming up, the timed window, profiling); the sweep loop names the case
(:func:`start_case`, :func:`end_case`). The state is one thread's: a sweep runs in one thread, and a study that
runs several sweeps at once (``concurrent``: one a thread) has each name its own. A torchrun rank's stages reach the
launcher as progress events (``{"event": "stage", "key", "what"}``, :mod:`accelbench.launchers.torchrun.job`): local
rank 0 writes them through :func:`listening`, and the launcher reads them back with :func:`from_events` and follows
them (:func:`follow`). The command line's progress bar listens too: it names the running case's stage.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Where:
    """The running case and its stage.

    Attributes:
        case: the case's key (a row's ``case_key``); None before the first case (start-up: the device's ceilings,
            the data).
        since: when the case started (``time.time()``, s).
        stage: what it is doing, None until a step names it.
        stage_since: when that stage began (``time.time()``, s).
    """

    case: str | None
    since: float
    stage: str | None = None
    stage_since: float | None = None

    def line(self, now: float | None = None) -> str:
        """``"case K after 250 s; stage: loading the model, for 120 s"``: whole seconds up to ``now``
        (``time.time()`` by default)."""
        now = time.time() if now is None else now
        head = f"case {self.case} after {now - self.since:.0f} s" if self.case else "start-up, before any case"
        if self.stage is None or self.stage_since is None:
            return head
        return f"{head}; stage: {self.stage}, for {now - self.stage_since:.0f} s"


_state = threading.local()  # .where: this thread's Where, or None
_listeners: list[Callable[[Where], None]] = []


def _where() -> Where | None:
    return getattr(_state, "where", None)


def start_case(key: str) -> None:
    """``key``'s case starts: no stage yet."""
    _state.where = Where(case=key, since=time.time())


def end_case() -> None:
    """The running case ended (stored)."""
    _state.where = None


def enter(what: str) -> None:
    """The running case (or the start-up, outside a case) is now doing ``what`` (a phrase: "compiling"); the
    listeners hear where it is."""
    now = time.time()
    _state.where = replace(_where() or Where(case=None, since=now), stage=what, stage_since=now)
    _tell(_state.where)


def current() -> Where | None:
    """Where this thread's sweep is, or None between cases."""
    return _where()


def adopt(where: Where | None) -> None:
    """Take ``where`` as this thread's (a launcher, from its ranks' events)."""
    _state.where = where


def follow(where: Where | None) -> None:
    """Take ``where`` as this thread's, and tell the listeners when its case or stage is new (a launcher following
    its ranks' events as they come)."""
    new = where is not None and where.stage is not None and where != _where()
    adopt(where)
    if new:
        _tell(where)


def _tell(where: Where) -> None:
    for listener in list(_listeners):
        listener(where)


@contextlib.contextmanager
def listening(listener: Callable[[Where], None]) -> Iterator[None]:
    """``listener(where)`` is called on every :func:`enter` (and :func:`follow` of a new stage) inside the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def from_events(events: list[dict]) -> Where | None:
    """Where a torchrun job was, from its progress events (``{"event": "start"|"stage"|"done", "key", "t"}``, and
    ``"what"`` for a stage): the last started case without its ``done`` and its last stage; the start-up's last
    stage when no case started; None when every started case is done."""
    where = None
    for e in events:
        event, key = e.get("event"), e.get("key")
        if event == "start":
            where = Where(case=key, since=e["t"])
        elif event == "stage":
            base = where if where is not None and where.case == key else Where(case=key, since=e["t"])
            where = replace(base, stage=e.get("what"), stage_since=e["t"])
        elif event == "done" and where is not None and where.case == key:
            where = None
    return where
