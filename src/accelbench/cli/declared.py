"""A scenario's declared options (:mod:`accelbench.core.options`) as a command's flags.

A command takes them by a parameter whose default is :func:`declared`; :func:`accelbench.cli.options.expand` puts
one typer option per declaration into the command's signature (flag, short flag, help panel, help with the default
stated from the declaration) and calls the command with a :class:`Given`::

    @command()
    def generate(..., settings: Given = declared(OPTIONS), ...):
        flags = {**what.fields(), **settings.fields()}   # the given options, as spec fields
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelbench.cli.help import typer_option
from accelbench.cli.options import Take
from accelbench.core.options import Option


def annotation(opt: Option) -> Any:
    """The parameter type typer parses a flag into: a list as its text (the spec parses it), else the type."""
    return (str if opt.many else opt.type) | None


@dataclass(frozen=True)
class Given:
    """The declared options a command was given (None: not given)."""

    values: dict[str, Any]

    def fields(self) -> dict[str, Any]:
        """The options given, as spec fields (a layer of :func:`accelbench.api.spec`)."""
        return {k: v for k, v in self.values.items() if v is not None}


@dataclass(frozen=True)
class DeclaredTake(Take):
    """The options of a declaration table a command takes (:func:`declared`)."""

    options: Mapping[str, Option] = None

    def parameters(self) -> list[inspect.Parameter]:
        kw = inspect.Parameter.KEYWORD_ONLY
        return [
            inspect.Parameter(n, kw, default=typer_option(self.options[n]), annotation=annotation(self.options[n]))
            for n in self.names
        ]

    def build(self, values: dict[str, Any]) -> Given:
        return Given(values)


def declared(options: Mapping[str, Option], *, only: tuple[str, ...] | None = None, omit: tuple[str, ...] = ()):
    """The command parameter default that takes ``options`` (every one, ``only`` these, or all but ``omit``).

    Raises:
        KeyError: a name ``options`` does not declare (a typo in a command module fails at import).
    """
    unknown = [n for n in (*(only or ()), *omit) if n not in options]
    if unknown:
        raise KeyError(f"no declared option {', '.join(unknown)}")
    kept = tuple(n for n in options if (only is None or n in only) and n not in omit)
    return DeclaredTake(group=Given, names=kept, overrides={}, options=options)
