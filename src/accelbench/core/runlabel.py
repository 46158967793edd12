"""A run's name and tags (``--name nightly --tag branch=main``): what a person calls a run, so a baseline can be
named (``compare --baseline nightly``) rather than remembered by its id.

Pure code: the checks every entry point shares (flags, TOML ``name`` / ``tags``, :mod:`accelbench.api`), each a
one-line :class:`accelbench.core.errors.ConfigError` (exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelbench.core.errors import ConfigError

# Letters, digits and . _ - + / @: no colon (``PATH:name:NAME`` splits on it), no space (a shell word)
_NAME = re.compile(r"[\w.+/@-]{1,100}")
_KEY = re.compile(r"[A-Za-z_][\w.-]{0,63}")
NAME_ALLOWED = "1 to 100 letters, digits or . _ - + / @, not only digits (a run id)"
TAG_ALLOWED = "key=value, the key a letter or _ then letters, digits, . _ - (up to 64), the value one line, not empty"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunLabel:
    """A run's ``name`` (None: unnamed) and ``tags`` (key -> value, both strings; empty: none)."""

    name: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.name is not None or bool(self.tags)


def check_name(name: Any) -> str:
    """``name`` when it can name a run (:data:`NAME_ALLOWED`).

    Raises:
        ConfigError: anything else (field ``name``).
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name) or name.isdigit():
        raise ConfigError("name", name, NAME_ALLOWED)
    return name


def parse_tags(tags: Any) -> dict[str, str]:
    """Tags as a dict: from ``key=value`` strings (the repeatable ``--tag``; a later one of a key wins) or a mapping
    (TOML ``tags = {branch = "main"}``; numbers and booleans there are written as text).

    Raises:
        ConfigError: an entry without ``=``, a bad key, an empty or multi-line value (field ``tag``).
    """
    if tags is None:
        return {}
    if isinstance(tags, Mapping):
        pairs = [(k, v if isinstance(v, str) else _scalar(k, v)) for k, v in tags.items()]
    elif isinstance(tags, (list, tuple)):
        pairs = [_split(t) for t in tags]
    else:
        raise ConfigError("tags", tags, "key=value strings or a table of key = value")
    out: dict[str, str] = {}
    for key, value in pairs:
        if not isinstance(key, str) or not _KEY.fullmatch(key) or not value or "\n" in value:
            raise ConfigError("tag", f"{key}={value}", TAG_ALLOWED)
        out[key] = value
    return out


def _split(text: Any) -> tuple[str, str]:
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError("tag", text, TAG_ALLOWED)
    key, value = text.split("=", 1)
    return key.strip(), value.strip()


def _scalar(key: str, value: Any) -> str:
    if isinstance(value, (bool, int, float)):
        return str(value).lower() if isinstance(value, bool) else str(value)
    raise ConfigError("tag", f"{key}={value!r}", TAG_ALLOWED)


def run_label(name: Any = None, tags: Any = None, *layers: Mapping[str, Any]) -> RunLabel:
    """The label of a run: each layer's ``name`` and ``tags`` (a TOML table; later wins, tags merged), then ``name``
    and ``tags`` given directly (flags, keyword arguments) over them.

    Raises:
        ConfigError: a bad name or tag (:func:`check_name`, :func:`parse_tags`).
    """
    final, merged = None, {}
    for layer in (*layers, {"name": name, "tags": tags}):
        if layer.get("name") is not None:
            final = check_name(layer["name"])
        merged.update(parse_tags(layer.get("tags")))
    return RunLabel(name=final, tags=merged)
