"""What a profiled decode step says: where its device time goes, and for a model split over several GPUs
(:mod:`accelbench.models.tensor_parallel`) the share of it in the collectives, the row-parallel all-reduces (two a
layer) and the split LM head's all-gather.

After a case's timed generations, outside its telemetry window, a prefill and :data:`STEPS` + 1 more decode steps of
the case's session run under ``torch.profiler``, the first not recorded
(:func:`accelbench.backends.lm_timing.profile_decode`). A split model's ranks all run them, so that the collectives
pair up and each rank bears the profiler's overhead alike; rank 0's figures are the row's. Cases of one device are
profiled on a GPU only (:func:`decode_profile_columns`); where such a case has no profiled step (an engine that runs
whole generations, a profile that recorded or could not be read nothing), ``decode_profile_note`` says why.

**Where the time goes** (on a GPU, :func:`kernel_breakdown`): ``decode_kernel_ms``, the device time of a recorded
step's kernels, copies and fills, beside ``decode_profiled_step_ms``, its wall time under the profiler (their
difference is time the GPU had no work: launches, host code, waits); ``decode_kernel_families``, that device time by
family (:func:`accelbench.core.kernels.classify_transformer`: GEMM/GEMV, attention, norm, ...; the NCCL kernels as
``collective``); and ``decode_top_kernels``, the kernels that take most of it. Holistic Trace Analysis's temporal
breakdown divides a trace the same way (idle, compute and communication time; https://hta.readthedocs.io).

**The all-reduce share** (``allreduce_share``, split models only):

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
TOP_KERNELS = 10  # kernels named in decode_top_kernels


def decode_profile_columns(run, prompts, new_tokens: int, device, split: bool) -> dict[str, Any]:
    """The columns of a case's profiled decode steps (see the module docstring); every rank of a split model calls
    it with the same arguments.

    Args:
        run: the case's :class:`accelbench.backends.lm_timing.Runner` (its session runs the steps).
        prompts: the case's prompts ``(batch, prompt_len)`` on ``device``.
        split: the model is split over several ranks (tensor parallelism).
    Returns:
        a split model's ``allreduce_share`` (or None and ``allreduce_share_note`` saying why) and, on a GPU, the
        kernel breakdown (:func:`kernel_breakdown`); for one device's model, on a GPU the kernel breakdown or
        ``decode_profile_note`` saying why there is none, else nothing.
    """
    from accelbench.backends.lm_timing import profile_decode
    from accelbench.core import stage
    from accelbench.core.parallel import kernel_collective_share

    if not split and device.type != "cuda":
        return {}
    none = _none if split else (lambda why: {"decode_profile_note": why})
    if run.session is None:
        return none("the engine runs whole generations: no decode step of its own to profile")
    if device.type not in ("cuda", "cpu"):
        return none(f"no collective share measured on {device.type}")
    stage.enter("profiling decode steps")
    prof = profile_decode(run.session, prompts, new_tokens, STEPS, device)
    if prof.events is None:
        return none(prof.error)
    try:
        kernels = _kernels(prof) if device.type == "cuda" else None  # read once: the share's and the breakdown's
        share = None
        if split:
            share = _host_share(prof) if kernels is None else kernel_collective_share(kernels)
        breakdown = {} if kernels is None else kernel_breakdown(kernels, prof.steps, prof.wall_s)
    except Exception as exc:  # the profile's reading is beside the measurement: a note, never a failed case
        return none(f"the profile could not be read: {type(exc).__name__}: {exc}"[:300])
    if not split:
        return breakdown or none("the profiler recorded no kernel time")
    if share is None:
        return _none("the profiler recorded no " + ("kernel" if device.type == "cuda" else "step") + " time")
    return {"allreduce_share": share, **breakdown}


def kernel_breakdown(kernels: list[tuple[str, float]], steps: int, wall_s: float) -> dict[str, Any]:
    """Where the recorded decode steps' device time goes.

    Args:
        kernels: ``(name, device time in microseconds)`` of every kernel, copy and fill recorded (the profiler's
            unit), over ``steps`` decode steps.
        steps: decode steps recorded (at least 1).
        wall_s: the recorded steps' synchronised wall time, seconds.
    Returns:
        ``decode_kernel_ms`` (device time a step, ms), ``decode_profiled_step_ms`` (wall time a step under the
        profiler, ms), ``decode_kernel_families`` (each family's device time a step, "family ms", most first, "; "
        between) and ``decode_top_kernels`` (the :data:`TOP_KERNELS` kernel names with most device time, each
        "name ms xcalls" a step, most first); empty when nothing was recorded.
    Raises:
        ValueError: ``steps`` below 1.
    """
    if steps < 1:
        raise ValueError(f"steps {steps}: one recorded decode step at least")
    from accelbench.core.kernels import classify_transformer
    from accelbench.core.parallel import is_collective_kernel

    by_name: dict[str, list[float]] = {}
    for name, t_us in kernels:
        acc = by_name.setdefault(name, [0.0, 0])
        acc[0] += t_us
        acc[1] += 1
    if not by_name:
        return {}
    families: dict[str, float] = {}
    for name, (t_us, _) in by_name.items():
        fam = "collective" if is_collective_kernel(name) else classify_transformer(name)
        families[fam] = families.get(fam, 0.0) + t_us
    top = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]
    return {
        "decode_kernel_ms": sum(t for t, _ in by_name.values()) / steps / 1e3,
        "decode_profiled_step_ms": wall_s / steps * 1e3,
        "decode_kernel_families": "; ".join(
            f"{fam} {t / steps / 1e3:.3f} ms" for fam, t in sorted(families.items(), key=lambda kv: -kv[1])
        ),
        "decode_top_kernels": "; ".join(
            f"{_short(name)} {t / steps / 1e3:.3f} ms x{n / steps:g}" for name, (t, n) in top
        ),
    }


def _short(name: str) -> str:
    """A kernel's name without its return type and arguments (the first ``(`` outside template brackets: a template
    argument may hold ``(anonymous namespace)``), at most 80 characters."""
    name, depth = name.removeprefix("void "), 0
    for i, c in enumerate(name):
        depth += (c == "<") - (c == ">")
        if c == "(" and depth == 0:
            name = name[:i]
            break
    name = name.strip()
    return name if len(name) <= 80 else name[:79] + "…"


def _kernels(prof) -> list[tuple[str, float]]:
    """``(name, device time µs)`` of the profile's device activities: kernels, copies and fills; not the GPU spans of
    user annotations (record_function ranges: the profiler's steps, a compiled region), which cover kernels already
    counted."""
    from torch.autograd import DeviceType

    return [
        (e.name, e.self_device_time_total)
        for e in prof.events
        if e.device_type != DeviceType.CPU and not getattr(e, "is_user_annotation", False)
    ]


def _none(why: str | None) -> dict[str, Any]:
    return {"allreduce_share": None, "allreduce_share_note": why}


def _host_share(prof) -> float | None:
    """The share of the recorded steps' host time in the collectives (CPUs, gloo: the module docstring)."""
    from torch.autograd import DeviceType

    from accelbench.core.parallel import host_collective_share, is_collective_op

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
