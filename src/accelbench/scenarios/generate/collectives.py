"""The all-reduce share of a tensor-parallel decode step: how much of a step of a model split over several GPUs
(:mod:`accelbench.models.tensor_parallel`) is its collectives, the row-parallel all-reduces (two a layer) and the
split LM head's all-gather.

After a case's timed generations, outside its telemetry window, every rank runs a prefill and :data:`STEPS` + 1
more decode steps of the case's session under ``torch.profiler``, the first not recorded
(:func:`accelbench.backends.lm_timing.profile_decode`; every rank, so that the collectives pair up and each rank bears
the profiler's overhead alike). Rank 0's figure of the recorded steps is the row's:

- on a GPU (NCCL), device time: the NCCL kernels' time over the time of every device activity recorded (kernels,
  copies, fills) (:func:`accelbench.core.parallel.kernel_collective_share`). An NCCL kernel runs from its launch on
  this GPU until every rank's part is done, so its time includes waiting for the slowest rank, as a trace shows it.
- on CPUs (gloo), host time: the time the thread that runs the steps spends in the collective ops over the wall
  time of the steps (:func:`accelbench.core.parallel.host_collective_share`). The profiler records, for each
  collective, the functional op (``_c10d_functional::all_reduce``, with ``c10d::allreduce_`` nested in it: the
  launch) and ``_c10d_functional::wait_tensor`` (the wait for gloo's worker thread to finish it); both are counted,
  each once: only collective ops not nested in another one, with their nested time. gloo's own ``gloo:all_reduce``
  events, recorded on gloo's worker threads as asynchronous events, overlap the wait: left out.

The cost a case: a prefill and nine decode steps (a tenth of a second or two for a 70B model split over two GPUs),
the profiler's start (on a GPU, the first start in a process sets CUPTI up) and the reading of its events.
"""

from __future__ import annotations

from typing import Any

STEPS = 8  # decode steps recorded a case


def allreduce_share(run, prompts, new_tokens: int, device) -> dict[str, Any]:
    """``allreduce_share`` of a split model's case (see the module docstring), or None and
    ``allreduce_share_note`` saying why; every rank calls it with the same arguments.

    Args:
        run: the case's :class:`accelbench.backends.lm_timing.Runner` (its session runs the steps).
        prompts: the case's prompts ``(batch, prompt_len)`` on ``device``.
    """
    from accelbench.backends.lm_timing import profile_decode

    if run.session is None:
        return _none("the engine runs whole generations: no decode step of its own to profile")
    if device.type not in ("cuda", "cpu"):
        return _none(f"no collective share measured on {device.type}")
    prof = profile_decode(run.session, prompts, new_tokens, STEPS, device)
    if prof.events is None:
        return _none(prof.error)
    try:
        share = _share(prof, device)
    except Exception as exc:  # the profile's reading is beside the measurement: a note, never a failed case
        return _none(f"the profile could not be read: {type(exc).__name__}: {exc}"[:300])
    if share is None:
        return _none("the profiler recorded no " + ("kernel" if device.type == "cuda" else "step") + " time")
    return {"allreduce_share": share}


def _none(why: str | None) -> dict[str, Any]:
    return {"allreduce_share": None, "allreduce_share_note": why}


def _share(prof, device) -> float | None:
    """The share of the recorded steps' time in the collectives: device time on CUDA, host time on CPUs."""
    from torch.autograd import DeviceType

    from accelbench.core.parallel import host_collective_share, is_collective_op, kernel_collective_share

    if device.type == "cuda":
        # device activities: kernels, copies and fills; not the GPU spans of user annotations (record_function
        # ranges: the profiler's steps, a compiled region), which cover kernels already counted
        return kernel_collective_share(
            (e.name, e.self_device_time_total)
            for e in prof.events
            if e.device_type != DeviceType.CPU and not getattr(e, "is_user_annotation", False)
        )

    def outermost(e) -> bool:
        parent = e.cpu_parent
        while parent is not None:
            if is_collective_op(parent.name):
                return False
            parent = parent.cpu_parent
        return True

    ops = [
        (e.name, e.cpu_time_total)
        for e in prof.events
        if e.device_type == DeviceType.CPU and not e.is_async and is_collective_op(e.name) and outermost(e)
    ]
    return host_collective_share(ops, prof.wall_s * 1e6)  # the profiler's times are microseconds
