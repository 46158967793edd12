"""Launchers: where a sweep's cases run. :data:`INLINE` runs them in this process;
:class:`accelbench.launchers.torchrun.Torchrun` runs them on N ranks (GPUs or CPU processes) through
torchrun. Any scenario whose ``dist_kind`` is set runs under either, through the same loop.

A launcher answers the loop's questions (:func:`accelbench.sweep.loop.run`): the device, the run kind,
what identifies the launch for ``--resume``, the devices idle power and price cover, the key a case is
stored under, and it executes the cases, reporting each finished one to the sweep.
"""

from accelbench.launchers.inline import INLINE, Inline

__all__ = ["INLINE", "Inline"]
