"""The space ``accelbench tune`` searches: the configurations (precision, backend[, optimizer kernels]) of a
device and workload, the default configuration the winner is compared with, and their labels."""

from __future__ import annotations

from accelbench.studies import tune_search as ts
from accelbench.studies.tune_budget import UNCOMPILED_MODES


def default_fused(cuda: bool) -> tuple[bool | None, ...]:
    """The optimizer kernels a ``train`` tune searches: fused and ``foreach`` on CUDA (fused kernels exist there
    for SGD and AdamW, torch >= 2.4); on a CPU the default only (None: ``foreach``)."""
    return (True, False) if cuda else (None,)


def default_space(cuda: bool, objective: str, workload: str = "inference") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(precisions, modes)`` searched by default. CUDA: autocast and pure bf16/fp16 weights x compile (the
    default ``run`` mode), compile with Inductor freezing, and CUDA graphs (``reduce-overhead`` with freezing;
    for latency also the eager capture, ``cudagraphs``). CPU: fp32 and bf16, eager and compile.
    ``train``: CUDA amp-bf16, amp-fp16, bf16 x eager, compile, reduce-overhead (CUDA graphs of the compiled
    forward and backward), cudagraphs and compile-cudagraphs (the whole step with the fused optimizer in one CUDA
    graph, eager or compiled module; the caller keeps the trainable backends only); CPU as inference."""
    if workload == "train" and cuda:
        return ("amp-bf16", "amp-fp16", "bf16"), ("eager", "compile", "reduce-overhead", "cudagraphs",
                                                  "compile-cudagraphs")
    if not cuda:
        return ("fp32", "bf16"), ("eager", "compile")
    modes = ("compile", "compile-freeze", "reduce-overhead-freeze")
    if objective == "latency":
        modes = ("cudagraphs", "reduce-overhead-freeze", "compile-freeze")
    return ("amp-bf16", "bf16", "fp16", "amp-fp16"), modes


def configs(settings: ts.TuneSettings, cuda: bool) -> list[tuple]:
    """The (precision, mode) pairs searched (``train``: (precision, mode, fused optimizer) triples, default modes
    limited to the backends that train): the default configuration first when it is in the space, then those that
    compile nothing (eager: seconds a trial, where a first compile takes tens), so a small budget still screens
    every precision."""
    from accelbench import backends

    precs, modes = default_space(cuda, settings.objective, settings.workload)
    if settings.workload == "train":
        modes = tuple(m for m in modes if m in backends.names(trainable=True))
    precs, modes = settings.precisions or precs, settings.modes or modes
    out = [(p, m) for p in precs for m in modes]
    if settings.workload == "train":
        out = [(p, m, f) for p, m in out for f in settings.fused_optimizers or default_fused(cuda)]
    base = default_config(cuda, settings.workload)
    return sorted(out, key=lambda c: (c != base, c[1] not in UNCOMPILED_MODES))


def default_config(cuda: bool, workload: str = "inference") -> tuple:
    """The default configuration on the device: ``run``'s (amp-bf16 compiled on CUDA, fp32 eager on a CPU);
    ``train``: the plain training step, amp-bf16 eager with torch's fused optimizer on CUDA (its default there),
    fp32 eager with the default (``foreach``) optimizer on a CPU."""
    if workload == "train":
        return ("amp-bf16", "eager", True) if cuda else ("fp32", "eager", None)
    return ("amp-bf16", "compile") if cuda else ("fp32", "eager")


def label(cfg: tuple) -> str:
    """``amp-bf16 compile`` (``amp-bf16 compile fused`` / ``... foreach`` with an explicit optimizer kernel)."""
    kernels = ts.KERNEL_WORDS.get(cfg[2]) if len(cfg) > 2 else None
    return " ".join([*cfg[:2], *([kernels] if kernels else [])])
