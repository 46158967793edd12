"""The timed steps of a training case, shared by the image (``train_step``) and language-model (``train_lm``) rows.

After the case's first step (which compiles, builds DDP's buckets and gives the first loss), the warm-up steps run,
every rank agrees on the number of whole passes over the batches that reach ``min_timed_batches`` and
``min_time_s`` (:func:`accelbench.core.timing.passes_needed`), those passes are timed in ``repeats`` windows under the
case's telemetry (:func:`accelbench.core.timing.time_windows`, CUDA events per step), and one more step gives the
last loss.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class TimedSteps:
    """What the timed steps measured.

    Attributes:
        lat_ms: every timed step's time, ms, in window order. wall_s: the windows' summed wall time, seconds.
        windows: :func:`~accelbench.core.timing.time_windows`'s windows. clocks: the ranks' window clocks (torchrun).
        monitor: the telemetry monitor of the timed window. passes: whole passes over the batches timed.
        last_loss: the loss of one step after the timed window.
    """

    lat_ms: list[float]
    wall_s: float
    windows: list
    clocks: dict
    monitor: Any
    passes: int
    last_loss: float

    def columns(self, step, first_loss: float, samples_per_step: int) -> dict[str, Any]:
        """The row's timing and loss columns; a sample is what ``samples_per_step`` counts (images, tokens)."""
        from accelbench.core.stats import stat_columns, summarize

        samples = len(self.lat_ms) * samples_per_step
        return {
            "compile_s": step.compile_s,
            "first_step_s": step.first_step_s,
            "passes": self.passes,
            "steps_timed": len(self.lat_ms),
            "samples_timed": samples,
            "timed_wall_s": self.wall_s,
            "device_time_s": sum(self.lat_ms) / 1e3,
            "throughput_samples_per_s": samples / self.wall_s,
            **stat_columns(summarize(self.lat_ms), "step_time"),
            "loss_first": first_loss,
            "loss_last": self.last_loss,
            "loss_finite": math.isfinite(self.last_loss),
        }


def time_steps(fn: Callable, batches: Sequence, step, spec, case, rank) -> TimedSteps:
    """Warm up, time and take the last loss of ``fn`` (one training step of an ``(inputs, labels)`` batch, returning
    the loss first) over ``batches`` (see the module docstring); ``step`` is the built step (its ``first_step_s``
    sizes the passes when there is no warm-up)."""
    from accelbench.core.timing import passes_needed, time_windows, warm_up
    from accelbench.scenarios.base import case_monitor

    dev = rank.device
    step_s = warm_up(fn, batches, spec.warmup_batches, dev) or step.first_step_s
    passes = int(rank.agree_max(passes_needed(spec.min_timed_batches, spec.min_time_s, len(batches), step_s)))
    with case_monitor(spec, case, dev, rank.pids()) as mon:
        windows, clocks = rank.timed_window(
            lambda: time_windows(fn, batches, passes * len(batches), dev, spec.settings.repeats)
        )
    lat_ms, wall_s = [x for w in windows for x in w[0]], sum(w[1] for w in windows)
    last_loss = fn(batches[0])[0].item()
    return TimedSteps(lat_ms, wall_s, windows, clocks, mon, passes, last_loss)
