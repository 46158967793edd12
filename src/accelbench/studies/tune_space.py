"""The space ``accelbench tune`` searches: the configurations (precision, backend[, optimizer kernels]) of a
device and workload, the default configuration the winner is compared with, and their labels."""

from __future__ import annotations

from accelbench.studies import tune_search as ts


def default_fused(cuda: bool) -> tuple[bool | None, ...]:
    """The optimizer kernels a ``train`` tune searches: fused and ``foreach`` on CUDA (fused kernels exist there
    for SGD and AdamW, torch >= 2.4); on a CPU the default only (None: ``foreach``)."""
    return (True, False) if cuda else (None,)


def search_words(cuda: bool, objective: str, workload: str) -> frozenset[str]:
    """What describes a search, in the words of the registries' ``tune`` attributes: the device (``cuda``,
    ``cpu``), the workload and ``latency`` or ``throughput`` (throughput, cost and energy all reward a full device)."""
    return frozenset(("cuda" if cuda else "cpu", workload, "latency" if objective == "latency" else "throughput"))


def _wanted(tune: tuple[str, ...] | None, words: frozenset[str]) -> bool:
    """An entry's ``tune`` attribute asks for a search described by ``words`` (None: every search)."""
    return tune is None or any(set(entry.split()) <= words for entry in tune)


def default_space(cuda: bool, objective: str, workload: str = "inference") -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(precisions, modes)`` searched by default: the registered ones that can run the search (the device, the
    workload: a precision that trains, a backend serving it) and whose ``tune`` attribute asks for it
    (:attr:`accelbench.precisions.Precision.tune`, :attr:`accelbench.backends.Backend.tune`), in registry order. A
    backend file dropped in, or installed as a plugin, is tried wherever it runs unless its ``tune`` says otherwise.

    Today's registries give: CUDA inference amp-fp16, amp-bf16, fp16, bf16 x compile (``run``'s), compile-freeze
    and reduce-overhead-freeze (CUDA graphs with Inductor freezing), for latency compile-freeze,
    reduce-overhead-freeze and cudagraphs (the eager capture); CUDA train amp-fp16, amp-bf16, bf16 x eager,
    compile, reduce-overhead (CUDA graphs of the compiled forward and backward), compile-cudagraphs and
    cudagraphs (the whole step with the fused optimizer in one graph); CPU fp32, bf16 x eager, compile."""
    from accelbench import backends, precisions

    words, device = search_words(cuda, objective, workload), "cuda" if cuda else "cpu"
    precs = [
        p
        for p in precisions.PRECISIONS.values()
        if _wanted(p.tune, words) and p.runs_on(device) and (p.trainable or workload != "train")
    ]
    modes = tuple(
        n
        for n, b in backends.BACKENDS.items()
        if workload in b.workloads and b.runs_on(device) and _wanted(b.tune, words)
    )
    return tuple(p.name for p in precs), modes


def configs(settings: ts.TuneSettings, cuda: bool) -> list[tuple]:
    """The (precision, mode) pairs searched (``train``: (precision, mode, fused optimizer) triples): the default
    configuration first when it is in the space, then those that compile nothing (eager: seconds a trial, where a
    first compile takes tens), so a small budget still screens every precision."""
    from accelbench import backends

    precs, modes = default_space(cuda, settings.objective, settings.workload)
    precs, modes = settings.precisions or precs, settings.modes or modes
    out = [(p, m) for p in precs for m in modes]
    if settings.workload == "train":
        out = [(p, m, f) for p, m in out for f in settings.fused_optimizers or default_fused(cuda)]
    base = default_config(cuda, settings.workload)
    return sorted(out, key=lambda c: (c != base, c[1] in backends.BACKENDS and backends.get(c[1]).compiles))


def describe_defaults(field: str) -> str:
    """``field``'s (``precisions`` or ``modes``) default spaces as help states them: ``CUDA a,b (latency: ...;
    train: ...); CPU ...``, from the registries."""
    parts = []
    for cuda in (True, False):
        spaces = {
            (w, o): default_space(cuda, o, w)[0 if field == "precisions" else 1]
            for w in ts.WORKLOADS
            for o in ("throughput", "latency")
        }
        base = spaces[("inference", "throughput")]
        extra = [
            f"{w if w != 'inference' else ''} {o if o != 'throughput' else ''}".strip() + ": " + ",".join(v)
            for (w, o), v in spaces.items()
            if v != base and not (o == "latency" and v == spaces[(w, "throughput")])
        ]
        parts.append(f"{'CUDA' if cuda else 'CPU'} {','.join(base)}" + (f" ({'; '.join(extra)})" if extra else ""))
    return "; ".join(parts)


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
