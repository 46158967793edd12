"""Signal handling shared by the commands and launchers.

Ctrl-C and SIGTERM stop a run the same way: as a KeyboardInterrupt, which the one loop turns into an
``interrupted`` run that ``--resume`` continues (:mod:`accelbench.sweep.loop`). Blocks that must not be cut
short, or that must not be interrupted at all (a LoadGen test), swap the handlers for their duration.

Python runs signal handlers in the main thread only and lets only that thread set them
(https://docs.python.org/3/library/signal.html#signals-and-threads): elsewhere :func:`handlers` does nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def raise_interrupt(signum: int, frame: Any) -> None:
    """A handler that stops as Ctrl-C does.

    Raises:
        KeyboardInterrupt: always.
    """
    raise KeyboardInterrupt


@contextlib.contextmanager
def handlers(handler: Any, sigs: tuple[int, ...] = STOP_SIGNALS) -> Iterator[None]:
    """``handler`` (a function or ``signal.SIG_IGN``) for ``sigs`` inside the block, in the main thread; the
    old handlers come back after, however the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, handler) for sig in sigs}
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
