"""``accelbench interconnect``: collectives over message sizes, GPU pair copy bandwidth, link topology.

``run_interconnect(settings, opts, store)`` launches one rank per GPU (gloo + CPU processes without
GPUs); the ranks run :func:`run_ranks`. Rows: ``workload`` ``collective`` (one per op and size) and
``p2p`` (one per ordered GPU pair, with the NVML link label).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from accelbench.distributed.results import add_row
from accelbench.distributed.collectives import OPS, collective_rows, p2p_rows
from accelbench.distributed.context import RankContext
from accelbench.distributed.job import DistOptions, Job, note_progress
from accelbench.errors import ConfigError

KIND = "interconnect"


@dataclass(frozen=True, kw_only=True, slots=True)
class InterconnectSpec:
    """What to measure.

    Attributes:
        ops: collectives, a subset of ``all_reduce``, ``all_gather``, ``broadcast``.
        sizes: message sizes in bytes (``S`` as nccl-tests counts it).
        warmup, iters: untimed and timed operations per size (nccl-tests defaults: 5 and 20).
        p2p_bytes: buffer copied between every GPU pair (0: no pair copies).
        p2p_iters: timed copies per pair.
    """

    ops: tuple[str, ...] = OPS
    sizes: tuple[int, ...] = ()
    warmup: int = 5
    iters: int = 20
    p2p_bytes: int = 256 * 1024 * 1024
    p2p_iters: int = 10

    def __post_init__(self) -> None:
        for op in self.ops:
            if op not in OPS:
                raise ConfigError("op", op, ", ".join(OPS))
        if not self.ops or not self.sizes or any(s < 4 for s in self.sizes):
            raise ConfigError("sizes", self.sizes, "one or more sizes of at least 4 bytes")
        if self.iters < 1 or self.warmup < 0 or self.p2p_bytes < 0 or self.p2p_iters < 1:
            raise ConfigError("iters", self.iters, "iters >= 1, warmup >= 0, p2p_bytes >= 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_ranks(ctx: RankContext, job: Job, store, run_id: int | None, echo=print) -> list[dict]:
    """On every rank: collectives; then rank 0 alone times GPU pair copies while the others wait."""
    s = InterconnectSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in job.spec.items()})

    def progress(event: str, key: str) -> None:
        if ctx.info.local_rank == 0:
            note_progress(ctx.workdir, event, key)

    rows = []
    for op in s.ops:
        progress("start", op)
        rows += collective_rows(ctx, (op,), s.sizes, s.warmup, s.iters)
        progress("done", op)
    if ctx.rank == 0 and ctx.device.type == "cuda" and s.p2p_bytes:
        progress("start", "p2p")
        rows += p2p_rows(s.p2p_bytes, s.p2p_iters)
        progress("done", "p2p")
    ctx.host_barrier()
    if ctx.rank == 0:
        for r in rows:
            if store is not None:
                r["case_id"] = add_row(store, run_id, r)
        echo(f"interconnect: {len(rows)} rows over {ctx.world} ranks ({ctx.backend})")
    return rows


def run_interconnect(spec: InterconnectSpec, opts: DistOptions, store, echo: bool = True) -> tuple[int, list[dict]]:
    """Launch the interconnect measurement; returns ``(run_id, rows)``.

    The run ends ``complete``, ``failed`` (a rank failed or timed out: an error row says why) or
    ``interrupted`` (Ctrl-C or SIGTERM: every rank stopped, the rows measured so far are lost with them,
    as rank 0 stores them at the end).
    """
    from accelbench.distributed.launch import failure, launch
    from accelbench.distributed.runner import begin

    run_id = begin(store, KIND, {"interconnect": spec.to_dict(), "distributed": opts.to_dict()}, opts)
    try:
        res = launch(Job(workload=KIND, spec=spec.to_dict(), db=store.path, run_id=run_id), opts, echo=echo)
    except KeyboardInterrupt:
        store.finish_run(run_id, "interrupted")
        return run_id, store.cases(run_id).to_dict("records")
    if not res.ok:
        status, reason = failure(res)
        add_row(store, run_id, {"case_key": f"interconnect|{res.current}|n={opts.world_size}", "workload": "collective",
                                "status": status, "error": reason, "op": res.current, "world_size": opts.world_size})
    store.finish_run(run_id, "complete" if res.ok else "failed")
    return run_id, store.cases(run_id).to_dict("records")
