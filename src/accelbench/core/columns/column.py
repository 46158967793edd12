"""One column of a result row: its declaration (:class:`Column`) and the rules that combine it.

Pure: no torch, no pandas, no store. The declarations themselves are in this package's area modules
(``case.py``, ``measure.py``, ...); :mod:`accelbench.core.columns.registry` gathers them into THE table.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

INT, FLOAT, STR, BOOL, JSON = "int", "float", "str", "bool", "json"
TYPES = (INT, FLOAT, STR, BOOL, JSON)

# How a column combines over several rows of one case: the ranks of a --gpus case (into its aggregate row) and
# the GPUs one process watches (into one set of telemetry columns). Missing values are skipped, except by SUM.
SUM = "sum"  # a total (energy, power, samples): None unless every row has the value
MEAN = "mean"  # an average (utilisation, clocks)
MAX = "max"  # the worst or largest (peak memory, temperature, throttled share, spread): any GPU shows
MIN = "min"  # the least (a minimum; a flag that must hold on every rank: outputs finite)
FIRST = "first"  # a setting of the case, the same on every row (model, precision, backend settings)
ANY = "any"  # a flag true when any row's is (input-bound, noisy)
JOIN = "join"  # text: the distinct values joined with "," (sources, hosts)
RANK = "rank"  # per-rank only: not carried to the aggregate (a rank's own window, or what the aggregate computes)
RULES = (SUM, MEAN, MAX, MIN, FIRST, ANY, JOIN, RANK)

WORD = "*"  # in a column name: one word of a family of columns (``family_*_time_s``)


@dataclass(frozen=True, kw_only=True, slots=True)
class Column:
    """A column a result row can carry.

    Attributes:
        name: the stored name, the unit in it (``latency_p99_ms``); a ``*`` stands for one word of a family of
            columns (``family_*_time_s``: one per kernel family).
        type: ``int``, ``float``, ``str``, ``bool`` (stored 0/1) or ``json`` (JSON text).
        label: the header of the wide tables and the HTML report (``Latency p99 (ms)``).
        short: the header of the compact (80-column) tables; default ``label``.
        fmt: the display format, a :data:`accelbench.report.units.FORMATS` kind with its argument (``number``,
            ``rate``, ``usd``, ``pct:2``, ``fixed:,.1f``, ``si:FLOP/s``...); applied to ``value * scale``.
        short_fmt: the compact tables' format; default ``fmt``.
        scale: the shown value is the stored one times this (1e3: J shown in mJ).
        combine: the rule over ranks and GPUs (:data:`RULES`).
        scenarios: the scenarios (and studies) that fill it; empty: every one.
        views: the report tables that show it (``inference``, ``inference-compact``, ``telemetry``...), ordered
            as the columns are declared.
        titles: ``(view, header)`` pairs where a table words its header otherwise (``Samples/s`` in loadgen's).
        levels: the closed set of a text column's values, least first (MIN/MAX compare by this order).
        doc: what it holds, beyond its label (the JSON Schema's description).
        stored: False for a display column a report computes from others (never in the store or the schema).
    """

    name: str
    type: str
    label: str
    short: str = ""
    fmt: str = "text"
    short_fmt: str = ""
    scale: float = 1.0
    combine: str = FIRST
    scenarios: tuple[str, ...] = ()
    views: tuple[str, ...] = ()
    titles: tuple[tuple[str, str], ...] = ()
    levels: tuple[str, ...] = ()
    doc: str = ""
    stored: bool = True

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"column {self.name}: type {self.type!r} is not one of {', '.join(TYPES)}")
        if self.combine not in RULES:
            raise ValueError(f"column {self.name}: rule {self.combine!r} is not one of {', '.join(RULES)}")
        if not re.fullmatch(r"[a-z_][a-z0-9_*]*", self.name):
            raise ValueError(f"column {self.name!r}: lowercase words and digits joined by _ (unit last)")

    def header(self, view: str, compact: bool = False) -> str:
        """The header in table ``view``: its own title there, else the compact or the wide label."""
        own = dict(self.titles).get(view)
        return own if own is not None else (self.short or self.label) if compact else self.label

    def format_kind(self, compact: bool = False) -> str:
        return (self.short_fmt or self.fmt) if compact else self.fmt


# unit suffixes of column names -> the unit a default label shows
UNITS = (
    ("_flop_per_byte", "FLOP/B"),
    ("_bytes_per_s", "B/s"),
    ("_samples_per_s", "samples/s"),
    ("_per_s", "/s"),
    ("_bytes", "B"),
    ("_usd", "USD"),
    ("_pct", "%"),
    ("_mhz", "MHz"),
    ("_ms", "ms"),
    ("_us", "µs"),
    ("_ns", "ns"),
    ("_s", "s"),
    ("_w", "W"),
    ("_j", "J"),
    ("_c", "°C"),
    ("_pts", "points"),
)


def default_label(name: str) -> str:
    """A label from the name: ``cpu_energy_j -> "Cpu energy (J)"``, ``throttle_power_s -> "Throttle power (s)"``."""
    for suffix, unit in UNITS:
        if name.endswith(suffix) and len(name) > len(suffix):
            words = name[: -len(suffix)].replace("_", " ").replace("*", "<name>")
            return f"{words[0].upper()}{words[1:]} ({unit})"
    words = name.replace("_", " ").replace("*", "<name>")
    return words[0].upper() + words[1:]


def col(name: str, type: str, label: str = "", fmt: str = "text", **kw: Any) -> Column:
    """A :class:`Column` in one line: ``col("latency_p99_ms", FLOAT, "Latency p99 (ms)", "number", short="p99 ms")``.
    The label defaults to :func:`default_label`; ``scenarios``, ``views`` and ``levels`` may be given as one
    space-separated string."""
    for key in ("scenarios", "views", "levels"):
        if isinstance(kw.get(key), str):
            kw[key] = tuple(kw[key].split())
    return Column(name=name, type=type, label=label or default_label(name), fmt=fmt, **kw)


def pattern(name: str) -> re.Pattern:
    """The names a family column (``family_*_time_s``) stands for."""
    return re.compile("^" + re.escape(name).replace(re.escape(WORD), "[a-z0-9_]+?") + "$")


def _present(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]


def _ordered(levels: tuple[str, ...]):
    return (lambda v: levels.index(v) if v in levels else -1) if levels else None


def fold(rule: str, values: Sequence[Any], levels: tuple[str, ...] = ()) -> Any:
    """One value from several rows' values of a column, by ``rule`` (:data:`RULES`; ``levels`` orders text).

    Raises:
        ValueError: ``RANK`` (a per-rank column has no combined value) or an unknown rule.
    """
    present = _present(values)
    if rule == RANK:
        raise ValueError("a per-rank column has no combined value")
    if not present:
        return None
    if rule == FIRST:
        return present[0]
    if rule == JOIN:
        return ",".join(dict.fromkeys(str(v) for v in present))
    if rule == ANY:
        return any(bool(v) for v in present)
    if rule == SUM:  # a total over GPUs is only meaningful when every GPU gave the value
        return sum(present) if len(present) == len(values) else None
    if rule == MEAN:
        return statistics.fmean(present)
    if rule in (MAX, MIN):
        pick = max if rule == MAX else min
        return pick(present, key=_ordered(levels))
    raise ValueError(f"unknown rule {rule!r}")
