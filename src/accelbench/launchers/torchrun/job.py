"""What a launcher hands its ranks: a :class:`Job` (JSON file), and the files ranks report back through.

The launcher writes ``job.json`` into a fresh work directory and starts torchrun on it. Local rank 0 of each node
appends ``{"event": "start"|"stage"|"done", "key": ...}`` lines to ``progress.jsonl`` (how the launcher times out a
hung case, and says where a stopped job was); a rank whose case raises writes ``error-rank<R>.json`` with a one-line
reason before exiting non-zero. The ranks' measurements travel through torch.distributed to global rank 0, which
writes one ``result-<NNNN>.json`` per finished case (every rank's record and raw series, and the detail rows the
scenario made); the launcher reads them as they appear and stores them: the launcher is the only process that writes
the SQLite store (the run's lease holder).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRESS = "progress.jsonl"


@dataclass(frozen=True, kw_only=True, slots=True)
class DistOptions:
    """How a distributed case is launched and timed.

    Attributes:
        gpus: processes per node (one per GPU; on a CPU machine, that many CPU processes with gloo).
        nnodes, node_rank, rdzv_endpoint, rdzv_backend, rdzv_id: passed to torchrun for multi-node runs.
        global_batch: batch sizes are global, split over the ranks (strong scaling); default: per
            process (weak scaling).
        timeout_s: seconds one case may run before its ranks are stopped and an error row is stored.
        startup_timeout_s: seconds from launch to the first case starting (imports, rendezvous).
        comm_share: also time DDP steps under ``no_sync()`` to measure the exposed communication share.
        device: ``auto`` (GPUs when visible), ``cpu`` (gloo even on a GPU machine) or ``cuda``.
    """

    gpus: int = 1
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_backend: str = "c10d"
    rdzv_id: str = "accelbench"
    global_batch: bool = False
    timeout_s: float = 900.0
    startup_timeout_s: float = 600.0
    comm_share: bool = True
    device: str = "auto"

    def __post_init__(self) -> None:
        from accelbench.core.errors import ConfigError

        if isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1:
            raise ConfigError("gpus", self.gpus, "an integer >= 1")
        if not isinstance(self.nnodes, int) or self.nnodes < 1:
            raise ConfigError("nnodes", self.nnodes, "an integer >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError("node_rank", self.node_rank, f"0..{self.nnodes - 1}")
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise ConfigError("rdzv_endpoint", self.rdzv_endpoint, "host:port of node 0 (needed with --nnodes > 1)")
        if self.timeout_s <= 0 or self.startup_timeout_s <= 0:
            raise ConfigError("timeout_s", self.timeout_s, "a number of seconds > 0")
        if self.device not in ("auto", "cpu", "cuda"):
            raise ConfigError("device", self.device, "auto, cpu, cuda (one GPU per rank)")

    @property
    def world_size(self) -> int:
        return self.gpus * self.nnodes

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """Everything a rank needs to run its share of a sweep.

    Attributes:
        scenario: the scenario's name (:data:`accelbench.scenarios.SCENARIOS`).
        spec: the scenario's spec as a dict (:meth:`accelbench.core.spec.Spec.to_dict`).
        cases: the cases to run, as dicts (:meth:`accelbench.core.spec.Case.to_dict`).
        options: :class:`DistOptions` as a dict.
        workdir: directory of the progress, error and result files; None when nobody listens.
    """

    scenario: str
    spec: dict[str, Any]
    cases: list[dict[str, Any]] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    workdir: str | None = None

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(dataclasses.asdict(self), default=str))

    @classmethod
    def load(cls, path: str | Path) -> Job:
        return cls(**json.loads(Path(path).read_text()))

    def dist_options(self) -> DistOptions:
        return DistOptions(**self.options)


def write_result(workdir: str | None, index: int, doc: dict[str, Any]) -> None:
    """Rank 0: write one finished case's result atomically (the launcher never reads half a file)."""
    if workdir:
        path = Path(workdir) / f"result-{index:04d}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, default=str))
        tmp.replace(path)


def read_results(workdir: str | Path, seen: set[str]) -> list[tuple[str, dict[str, Any]]]:
    """Result files not in ``seen`` yet, in case order: ``(file name, document)``; adds them to ``seen``."""
    out = []
    for p in sorted(Path(workdir).glob("result-*.json")):
        if p.name not in seen:
            seen.add(p.name)
            out.append((p.name, json.loads(p.read_text())))
    return out


def note_progress(workdir: str | None, event: str, key: str | None, what: str | None = None) -> None:
    """Append one progress event (called by local rank 0 only): ``start`` and ``done`` of the case ``key``, or a
    ``stage`` (``what``: :mod:`accelbench.core.stage`) of it (``key`` None: of the start-up)."""
    if workdir:
        doc = {"event": event, "key": key, "t": time.time(), **({"what": what} if what else {})}
        with open(Path(workdir) / PROGRESS, "a") as fh:
            fh.write(json.dumps(doc) + "\n")


def read_progress(workdir: str | Path) -> list[dict[str, Any]]:
    """Progress events so far (a partly written last line is ignored)."""
    path = Path(workdir) / PROGRESS
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def note_error(workdir: str | None, rank: int, key: str | None, error: str, oom: bool) -> None:
    """Record why ``rank`` failed (its first exception, one line)."""
    if workdir:
        doc = {"rank": rank, "key": key, "error": error, "oom": oom, "t": time.time()}
        (Path(workdir) / f"error-rank{rank}.json").write_text(json.dumps(doc))


def read_errors(workdir: str | Path) -> list[dict[str, Any]]:
    """Rank errors, earliest first (the first is the root cause; later ones are usually its echoes)."""
    out = []
    for p in Path(workdir).glob("error-rank*.json"):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, json.JSONDecodeError):
            pass
    return sorted(out, key=lambda d: d["t"])
