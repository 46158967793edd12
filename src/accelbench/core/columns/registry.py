"""THE table of columns, and what everyone asks it: a stored value typed, a row as exports write it, several rows
combined by each column's rule.

Typed values: None for missing (never NaN), ``int``/``float``/``str``/``bool`` by the declared type, ``json``
columns decoded; a column the table does not declare (a third party's, or one an older accelbench wrote) passes
through as stored.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from typing import Any

from accelbench.core.columns import (
    case,
    derived,
    generate,
    loadgen,
    measure,
    multi,
    profile,
    serve,
    telemetry,
    train,
    train_lm,
)
from accelbench.core.columns.column import BOOL, FIRST, FLOAT, INT, JSON, RANK, STR, WORD, Column, fold, pattern

COLUMNS: dict[str, Column] = {}


def declare(*columns: Column) -> None:
    """Add columns to the table.

    Raises:
        ValueError: a column of that name is declared already.
    """
    for c in columns:
        if c.name in COLUMNS:
            raise ValueError(f"column {c.name} is declared twice")
        COLUMNS[c.name] = c


# the areas, in pipeline order: each module's DECLARED columns (and METRIC_MAPS: accelbench.core.columns.maps)
AREAS = (case, measure, telemetry, derived, train, train_lm, profile, loadgen, generate, serve, multi)
for _area in AREAS:
    declare(*_area.DECLARED)


@cache
def _family(template: str):
    return pattern(template)


def get(name: str) -> Column | None:
    """The declaration of ``name`` (a family's, ``family_*_time_s``, for ``family_gemm_conv_time_s``), or None."""
    c = COLUMNS.get(name)
    if c is not None:
        return c
    return next((t for key, t in COLUMNS.items() if WORD in key and _family(key).match(name)), None)


def rule(name: str) -> str:
    """How ``name`` combines over ranks and GPUs (an undeclared column: its first value)."""
    c = get(name)
    return c.combine if c is not None else FIRST


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, str):  # numbers kept as text by an older store
        try:
            value = float(value)
        except ValueError:
            return value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if kind is int and isinstance(value, (int, float)) and float(value).is_integer():
        return int(value)
    return float(value) if kind is float and isinstance(value, (int, float)) else value


def typed(name: str, value: Any) -> Any:
    """``value`` of column ``name`` as its declared type: None for missing (None, NaN, inf), ints as ``int``,
    0/1 as ``bool``, JSON text decoded. A value that does not convert is returned as it is."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    c = get(name)
    kind = c.type if c is not None else None
    if kind in (INT, FLOAT):
        return _number(value, int if kind == INT else float)
    if kind == BOOL:
        n = _number(value, int)
        return bool(n) if isinstance(n, (int, float)) else value
    if kind == STR:
        return value if isinstance(value, str) else str(value)
    if kind == JSON and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def typed_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every value of a row typed (:func:`typed`), its keys in the table's order: declared columns as declared
    (a family's members at their template's place, by name), then undeclared ones by name. A store adds a column
    when a first row has it, so its own column order depends on its history (an imported run, an older store);
    a row read from any store lists its keys the same way."""
    return {k: typed(k, row[k]) for k in sorted(row, key=lambda k: (_position(k), k))}


@lru_cache(maxsize=4096)
def _position(name: str) -> int:
    c = get(name)
    return list(COLUMNS).index(c.name) if c is not None else len(COLUMNS)


def exported(row: dict[str, Any]) -> dict[str, Any]:
    """A typed row as the CSV and JSON exports write it (what ``accelbench schema`` describes): booleans as 0/1
    (as stored), JSON columns as their JSON text, the rest as typed."""
    out = {}
    for k, v in row.items():
        c = get(k)
        if isinstance(v, bool) and (c is None or c.type == BOOL):
            v = int(v)
        elif c is not None and c.type == JSON and v is not None and not isinstance(v, str):
            v = json.dumps(v, default=str)
        out[k] = v
    return out


def combine(rows: Sequence[dict[str, Any]], skip: Iterable[str] = ()) -> dict[str, Any]:
    """One row from several rows of one case (its ranks; the GPUs of one process): every column by its rule
    (:data:`accelbench.core.columns.column.RULES`); per-rank columns, ``_``-prefixed keys and ``skip`` left out.

    Returns:
        ``{column: combined value}`` for every column some row has (a rule over missing values gives None).
    """
    keys = dict.fromkeys(k for r in rows for k in r if not k.startswith("_") and k not in set(skip))
    out = {}
    for k in keys:
        c = get(k)
        how = c.combine if c is not None else FIRST
        if how != RANK:
            out[k] = fold(how, [r.get(k) for r in rows], c.levels if c is not None else ())
    return out


def in_view(view: str) -> list[Column]:
    """The declared columns that ask to be in report table ``view`` (``Column.views``), in declaration order."""
    return [c for c in COLUMNS.values() if view in c.views]


__all__ = [
    "COLUMNS",
    "declare",
    "get",
    "rule",
    "typed",
    "typed_row",
    "exported",
    "combine",
    "in_view",
    "BOOL",
    "FLOAT",
    "INT",
    "JSON",
    "STR",
]
