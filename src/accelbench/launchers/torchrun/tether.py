"""Start torchrun tied to the accelbench process that launches it.

``python -m accelbench.launchers.torchrun.tether PARENT_PID PROGRAM ARG...`` asks Linux to send this process
``SIGTERM`` when its parent dies (:func:`accelbench.launchers.tether.tie_to_parent`), then replaces itself with
``PROGRAM`` (``os.execv``; the setting survives the exec of a program that is not set-user-ID). The
launcher starts torchrun in a session of its own, so a terminal's Ctrl-C reaches accelbench only; this tie
is what still stops torchrun, and through it every rank, when accelbench itself is killed (``kill -9``,
a SIGKILL of its process group, the OOM killer), which no handler of ours can see.

The ranks are tied to torchrun in turn (:func:`tie_to_agent`, called first by every rank): the parent-death
signal reaches torchrun once per thread of the dying accelbench (the kernel sends it each time it hands the orphan
to another live thread of the dying process: ``forget_original_parent`` in ``kernel/exit.c``), and torchrun's
handler raises on each; a burst of them can end torchrun inside its own shutdown before it signalled its ranks,
which would then run on in their own sessions. A rank tied to torchrun ends with it, however torchrun ends.

No torch import here: this runs before the interpreter becomes torchrun. On other systems than Linux
there is no parent-death signal and the program is started untied.
"""

from __future__ import annotations

import os
import signal
import sys

from accelbench.launchers.tether import tie_to_parent

__all__ = ["AGENT_PID", "main", "tie_to_agent", "tie_to_parent"]

AGENT_PID = "ACCELBENCH_TORCHRUN_PID"  # torchrun's pid (the tether's: exec keeps it), in the ranks' environment


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
    os.environ[AGENT_PID] = str(os.getpid())  # torchrun passes its environment on to the ranks
    os.execv(program, argv[1:])
    return 1  # not reached: execv replaces the process or raises


def tie_to_agent() -> bool:
    """In a rank that the launcher's torchrun started: SIGKILL this process when torchrun ends (module docstring).

    Returns:
        False when torchrun has already ended (the rank should exit at once); True otherwise, also where there is
        nothing to tie to (a user's own torchrun, another system than Linux).
    """
    agent = os.environ.get(AGENT_PID)
    if not agent or not tie_to_parent(signal.SIGKILL):
        return True
    return os.getppid() == int(agent)  # torchrun may have ended between starting this rank and the tie


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
