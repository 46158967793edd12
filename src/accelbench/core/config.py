"""Reading settings: TOML files, comma lists from flags, and the checks every settings dataclass uses
(numbers that are finite, integers that are not booleans, choices from a list, the type a field declares).

Every check raises :class:`accelbench.core.errors.ConfigError`, whose one-line message names the field and
what is allowed. Pure code: no torch import.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from accelbench.core.errors import ConfigError, SettingsNote, did_you_mean

T = TypeVar("T")

# the shared list fields (a scenario's own lists are declared: accelbench.core.options)
LIST_FIELDS = {"models": str, "batch_sizes": int, "precisions": str, "modes": str}
# The largest integer the store holds (SQLite INTEGER: 8 bytes, signed); a count beyond it cannot be a row.
INT_MAX = 2**63 - 1


def is_number(v: Any, low: float = -math.inf, high: float = math.inf) -> bool:
    """``v`` is a finite int or float (not a bool) in ``[low, high]`` (NaN and infinities are not numbers here)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and low <= v <= high


def is_int(v: Any, low: int = -(2**63), high: int = INT_MAX) -> bool:
    """``v`` is an int (not a bool) in ``[low, high]`` (by default what a SQLite INTEGER holds)."""
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def check_choices(name: str, values: tuple, allowed: tuple[str, ...]) -> None:
    """Raise ConfigError unless ``values`` is a non-empty tuple of members of ``allowed``."""
    if not values:
        raise ConfigError(name, values, "a non-empty list of " + ", ".join(allowed))
    for v in values:
        if not isinstance(v, str) or v not in allowed:
            raise ConfigError(name, v, ", ".join(allowed))


def check_int(name: str, v: Any, low: int, high: int = INT_MAX) -> None:
    if not is_int(v, low, high):
        raise ConfigError(name, v, f"an integer >= {low}" + ("" if high == INT_MAX else f" and <= {high}"))


def check_number(name: str, v: Any, low: float = 0.0, allowed: str | None = None) -> None:
    if not is_number(v, low=low):
        raise ConfigError(name, v, allowed or f"a number >= {low:g}")


def check_bool(name: str, v: Any) -> None:
    if not isinstance(v, bool):
        raise ConfigError(name, v, "true or false")


def _type_name(hint: Any) -> str:
    import typing

    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is tuple:
        return f"a list of {_type_name(args[0]).removeprefix('a ').removeprefix('an ')}s"
    if args:
        return _type_name(args[0]) + " (or nothing)"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}.get(hint, str(hint))


def type_ok(value: Any, hint: Any) -> bool:
    """``value`` has the type a dataclass field's annotation names (``int | None``, ``tuple[int, ...]``...)."""
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if args and origin is not tuple:  # a union
        return any(type_ok(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(type_ok(v, args[0]) for v in value)
    if hint is type(None):
        return value is None
    if hint is float:
        return is_number(value)
    if hint is int:
        return is_int(value)
    return isinstance(value, hint) if isinstance(hint, type) else True


def check_types(cls: type, values: dict[str, Any]) -> None:
    """Raise ConfigError for the first of ``values`` whose type is not its field's in the dataclass ``cls``."""
    import typing

    hints = typing.get_type_hints(cls)
    for name, value in values.items():
        if name in hints and not type_ok(value, hints[name]):
            raise ConfigError(name, value, _type_name(hints[name]))


def parse_list(name: str, value: Any, kind: type | None = None) -> tuple:
    """Turn ``"1,8,32"``, ``[1, 8, 32]`` or ``8`` into a tuple of ``kind`` (default: the field's type in
    :data:`LIST_FIELDS`, else ``str``), or raise ConfigError."""
    kind = kind or LIST_FIELDS.get(name, str)
    items = [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        items = [items]
    if kind is not int:
        return tuple(items)
    out = []
    for x in items:
        if isinstance(x, bool) or (isinstance(x, float) and not x.is_integer()) or not isinstance(x, (int, float, str)):
            raise ConfigError(name, value, "a comma-separated list of integers")
        try:
            out.append(int(x))
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(name, value, "a comma-separated list of integers") from None
    return tuple(out)


def unique(name: str, values: tuple) -> tuple:
    """``values`` without repeats, in their order; a repeat is a :class:`SettingsNote` warning (one line).

    A repeated entry (``-b 2,2``) names the same case twice, and a run holds one row per case: measured once,
    it loses nothing a second measurement would add (``--repeats`` adds windows)."""
    import warnings

    try:
        kept = tuple(dict.fromkeys(values))
    except TypeError:  # an entry that is no name nor number (a table): validation names it
        return values
    if len(kept) < len(values):
        twice = [str(v) for v in kept if values.count(v) > 1]
        what = {"batch_sizes": "batch size", "models": "model", "precisions": "precision", "modes": "mode"}.get(
            name, name
        )
        warnings.warn(SettingsNote(f"{what} {', '.join(twice)} given more than once: each runs once"), stacklevel=2)
    return kept


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file into a dict (top-level keys, or a ``[sweep]`` table).

    Raises:
        ConfigError: unreadable file, TOML syntax error, not UTF-8, or ``sweep`` that is not a table.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]  # the same API
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError("config", str(path), f"a readable TOML file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", str(path), f"valid TOML ({' '.join(str(exc).split())})") from None
    except UnicodeDecodeError:
        raise ConfigError("config", str(path), "a UTF-8 TOML file") from None
    return table(raw, "sweep", path)


def table(raw: dict[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    """The ``[name]`` table of a TOML document, else its top level.

    Raises:
        ConfigError: ``name`` is present but not a table, or absent while a table of a close name is there
            (``[generat]`` for ``[generate]``: its settings would be refused one by one as unknown keys).
    """
    if name not in raw:
        for key, value in raw.items():
            if isinstance(value, dict) and did_you_mean(key, [name]):
                allowed = f"[{name}] or settings at the top level of {path}"
                raise ConfigError("config table", f"[{key}]", allowed, choices=[f"[{name}]"])
        return raw
    if not isinstance(raw[name], dict):
        raise ConfigError(name, raw[name], f"a [{name}] table in {path}")
    return raw[name]


def put(table: dict[str, T], name: str, entry: T, field: str) -> T:
    """Add ``entry`` to the registry ``table`` under ``name``; returns ``entry``.

    Raises:
        ValueError: another entry has that name (a plugin never replaces one silently).
    """
    if table.get(name, entry) is not entry:
        raise ValueError(f"{field} {name} is registered already")
    table[name] = entry
    return entry


def pick(table: Mapping[str, T], name: Any, field: str) -> T:
    """``table[name]``, the entry of a registry (precisions, backends, scenarios).

    Raises:
        ConfigError: no such entry; the message names ``field`` and every entry.
    """
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ConfigError(field, name, ", ".join(table)) from None
