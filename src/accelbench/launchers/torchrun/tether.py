"""Start torchrun tied to the accelbench process that launches it.

``python -m accelbench.launchers.torchrun.tether PARENT_PID PROGRAM ARG...`` asks Linux to send this process
``SIGTERM`` when its parent dies (``prctl(PR_SET_PDEATHSIG)``, man 2 prctl), then replaces itself with
``PROGRAM`` (``os.execv``; the setting survives the exec of a program that is not set-user-ID). The
launcher starts torchrun in a session of its own, so a terminal's Ctrl-C reaches accelbench only; this tie
is what still stops torchrun, and through it every rank, when accelbench itself is killed (``kill -9``,
a SIGKILL of its process group, the OOM killer), which no handler of ours can see.

No torch import here: this runs before the interpreter becomes torchrun. On other systems than Linux
there is no parent-death signal and the program is started untied.
"""

from __future__ import annotations

import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def tie_to_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent thread ends; True when set (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0


def main(argv: list[str]) -> int:
    """Tie, check the parent still lives (it may have died before the tie), then exec ``argv[1:]``.

    Args:
        argv: ``[parent_pid, program, arg, ...]``; ``program`` is a path (``sys.executable``).
    Returns:
        1 without starting anything when the parent is already gone (never returns otherwise).
    """
    parent, program = int(argv[0]), argv[1]
    tie_to_parent()
    if os.getppid() != parent:  # the launcher died between fork and tie: nobody would stop the ranks
        return 1
    os.execv(program, argv[1:])
    return 1  # not reached: execv replaces the process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
