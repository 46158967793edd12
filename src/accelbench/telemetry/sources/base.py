"""What every telemetry source shares: the :class:`Source` base class, :class:`Unavailable`, :func:`columns`, and
the registry (:data:`SOURCES`, :func:`register`) that ``__init__`` fills with one line per source."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def columns(rows: Sequence[dict], prefix: str) -> dict[str, list]:
    """Samples (one dict per tick) as columns ``<prefix><key>``, in first-seen key order.

    Keys that were None in every row are left out (a signal the hardware never gave is not a series).
    """
    keys = list(dict.fromkeys(k for r in rows for k in r))
    cols = {f"{prefix}{k}": [r.get(k) for r in rows] for k in keys}
    return {k: v for k, v in cols.items() if any(x is not None for x in v)}


class Source:
    """Base class of a telemetry source: one thing read around a measured window (one GPU, the host).

    The sampler calls :meth:`begin` at the window start, :meth:`read` every tick (when ``sampled``) and
    :meth:`end` at the window end; its samples get ``t_s`` (s from the window start). The monitor then
    turns them into columns with :meth:`record` and :meth:`series`, and calls :meth:`close`.

    Attributes:
        name: key of its samples and counters in the sampler (unique within a monitor: ``gpu0``, ``cpu``).
        sampled: False for a source with only window-edge counters (an energy counter): never ``read``.
    """

    name: str = ""
    sampled: bool = True
    pid: int | None = None  # the process it reads for (:meth:`watch`); None: this one

    def begin(self) -> dict[str, Any]:
        """Counters at the window start (energy, CPU seconds, ``t`` in s of ``time.perf_counter``)."""
        return {}

    def read(self) -> dict[str, Any]:
        """One sample: signal name (unit in the name) -> value, None for a signal not given."""
        return {}

    def end(self) -> dict[str, Any]:
        """Counters at the window end (as :meth:`begin`)."""
        return {}

    def info(self) -> dict[str, Any]:
        """What this source offers (stored with raw captures, :meth:`Monitor.raw`); {} for nothing."""
        return {}

    def record(self, samples: Sequence[dict], begin: dict, end: dict, window_s: float | None) -> dict[str, Any]:
        """Per-case columns (unit in each name) from the samples and the window-edge counters.

        Args:
            samples: what :meth:`read` returned, in time order, each with ``t_s``.
            begin / end: what :meth:`begin` / :meth:`end` returned.
            window_s: length of the sampled window (s).
        """
        return {}

    def series(self, samples: Sequence[dict]) -> dict[str, list]:
        """Raw samples as columns stored with the case: ``<name>_<signal>`` and ``<name>_t_s``."""
        return columns(samples, f"{self.name}_")

    @staticmethod
    def combine(records: Sequence[dict]) -> dict[str, Any]:
        """One set of columns from the records of the sources one factory returned (e.g. one per GPU).

        The default merges them in order; a factory returning several sources overrides this.
        """
        out: dict[str, Any] = {}
        for r in records:
            out.update(r)
        return out

    def watch(self, pid: int) -> None:
        """Read for process ``pid`` instead of this one: the sampler process
        (:mod:`accelbench.telemetry.process`) reads for the measured process (a GPU's "other processes" leave it
        out). A source that reads nothing of a process (an energy counter) needs nothing more."""
        self.pid = pid

    def close(self) -> None:
        """Free what the source holds (driver sample buffers); called once after the window."""


class Unavailable(Source):
    """Stands in for a source that applies but cannot be read (a CUDA device NVML does not answer for):
    no samples, only its fixed "not available" columns."""

    sampled = False

    def __init__(self, name: str, record_columns: dict[str, Any]):
        self.name, self.record_columns = name, dict(record_columns)

    def record(self, samples, begin, end, window_s) -> dict[str, Any]:
        return dict(self.record_columns)

    def series(self, samples) -> dict[str, list]:
        return {}


SourceFactory = Callable[[list, float, tuple], list[Source]]
SOURCES: dict[str, SourceFactory] = {}


def register(name: str, factory: SourceFactory) -> SourceFactory:
    """Add ``factory(devices, period_s, pids) -> list[Source]`` to :data:`SOURCES` under ``name``.

    ``devices`` are the watched ``torch.device`` s, ``period_s`` the sampling period (s, 0: no thread),
    ``pids`` the other processes of the measured job on this host. The factory returns [] when the
    source does not apply to those devices. Record columns come out in registration order.
    """
    SOURCES[name] = factory
    return factory
