"""Processes tied to the accelbench process that starts them: they end when it ends, however it ends.

Linux sends a process a signal chosen in advance when its parent dies (``prctl(PR_SET_PDEATHSIG)``, man 2 prctl):
:func:`tie_to_parent`. That is what still stops a child when accelbench itself is killed (``kill -9``, a SIGKILL of
its process group, the OOM killer), which no handler of ours can see. Two launchers use it: torchrun's
(:mod:`accelbench.launchers.torchrun.tether`: torchrun tied, its ranks tied to torchrun) and a launched server's.

A server's command may fork (a shell without ``exec``, a server that starts workers): the signal reaches one process,
so ``python -m accelbench.launchers.tether PARENT_PID PROGRAM ARG...`` (:func:`hold`) leads the command's process
group: tied to accelbench, it runs the command as its child in its own group, and when accelbench dies (or when it is
sent SIGTERM, SIGINT or SIGHUP) it ends the whole group: SIGTERM, then SIGKILL after :data:`GRACE_S`. Otherwise it
exits with the command's exit code.

No torch import here: this runs before an interpreter becomes torchrun, and in front of every launched server. On
other systems than Linux there is no parent-death signal and the program is started untied.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
GRACE_S = 10.0  # seconds the group has after SIGTERM before it is killed (vLLM's own shutdown waits 5)


def tie_to_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends; True when set (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def command(parent_pid: int, argv: list[str]) -> list[str]:
    """The command line that runs ``argv`` held by :func:`hold`, tied to ``parent_pid`` (start it in a new session)."""
    return [sys.executable, "-m", "accelbench.launchers.tether", str(parent_pid), *argv]


def hold(parent: int, argv: list[str], grace_s: float = GRACE_S) -> int:
    """Tie to ``parent``, run ``argv`` as a child in this process group, end the group when told or orphaned.

    Returns:
        the command's exit code (128 + N for a command killed by signal N); 1 without starting anything when the
        parent is already gone.
    """
    tie_to_parent(signal.SIGTERM)
    if os.getppid() != parent:  # the parent died between fork and tie: nobody would stop the command
        return 1
    child = subprocess.Popen(argv)

    def end(signum, frame) -> None:
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # the group's own SIGTERM below, and a burst of parent-death signals
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(0, signal.SIGTERM)
        raise _Ending  # out of the wait below: Popen.wait is not reentrant, a handler must not wait itself

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, end)
    try:
        code = child.wait()
    except _Ending:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace_s)
        os.killpg(0, signal.SIGKILL)  # the children that outlived the command too, and this process
        raise
    return 128 - code if code < 0 else code


class _Ending(Exception):
    """Raised by :func:`hold`'s signal handler to end its wait for the command."""


if __name__ == "__main__":
    sys.exit(hold(int(sys.argv[1]), sys.argv[2:]))
