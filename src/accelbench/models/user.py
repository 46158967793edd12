"""A user's model factory, ``package.module:factory``: its module imported and the factory called as user code.

Naming a factory runs code, as a Python import does: the module is imported (the current directory first on
``sys.path``, as ``python -m`` has it, so the ``accelbench`` script and ``python -m accelbench`` find the same
modules) and the factory is called with no arguments. Its code cannot take accelbench over:

- it sees ``sys.argv == [module]``, not accelbench's flags (an ``argparse`` parser at import or in the factory
  parses nothing it does not expect);
- a ``sys.exit`` (an ``argparse`` refusal is one) is an exception naming the factory and the last line it wrote
  to stderr, never accelbench's exit: at import, one line and exit 2; while a case builds the model, that
  case's ``error`` row;
- any exception at import (a ``SyntaxError``, a ``RuntimeError``) is "cannot import model factory", exit 2.

The factory, or its module, may declare ``model_kind`` (``image`` or ``lm``, :data:`accelbench.models.base.KINDS`):
a command that takes the other kind then refuses it before anything runs.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

from accelbench.core.errors import ModelFactoryError, UnknownModelError, one_line
from accelbench.models.base import KINDS


@contextlib.contextmanager
def as_user_code(name: str):
    """Run a factory's import or call (see the module docstring); what it writes to stderr is passed on after
    it returns, or ends in the message when it called ``sys.exit``.

    Raises:
        ModelFactoryError: the code called ``sys.exit``.
    """
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    argv, err, exited = sys.argv, io.StringIO(), None
    sys.argv = [name.partition(":")[0]]
    try:
        with contextlib.redirect_stderr(err):
            yield
    except SystemExit as exc:
        exited = exc
    finally:
        sys.argv = argv
        if exited is None:
            sys.stderr.write(err.getvalue())
    if exited is not None:
        said = [line.strip() for line in err.getvalue().splitlines() if line.strip()]
        raise ModelFactoryError(
            f"model factory {name!r} called sys.exit({exited.code!r})"
            + (f": {said[-1]}" if said else "")
            + " (a factory must return an nn.Module)"
        )


def factory(name: str) -> Callable:
    """The callable ``package.module:factory`` names, its module imported (not called).

    Raises:
        UnknownModelError: the module does not import (whatever it raised, a ``sys.exit`` too), has no such
            attribute, or the attribute is not callable.
    """
    mod_name, _, attr = name.partition(":")
    try:
        with as_user_code(name):
            found = getattr(importlib.import_module(mod_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UnknownModelError(f"cannot import model factory {name!r}: {exc}") from None
    except Exception as exc:  # the module raised while it was imported: a SyntaxError, its own RuntimeError
        raise UnknownModelError(f"cannot import model factory {name!r}: {one_line(exc)}") from None
    if not callable(found):
        raise UnknownModelError(f"model factory {name!r} is a {type(found).__name__}, not a callable")
    return found


def declared_kind(name: str) -> str | None:
    """The ``model_kind`` the factory (else its module) declares, or None; its module is imported, not called.

    Raises:
        UnknownModelError: as :func:`factory`, or a ``model_kind`` that is no kind.
    """
    found = factory(name)
    kind = getattr(found, "model_kind", getattr(sys.modules.get(name.partition(":")[0]), "model_kind", None))
    if kind is not None and kind not in KINDS:
        raise UnknownModelError(f"model factory {name!r} declares model_kind {kind!r}: use {' or '.join(KINDS)}")
    return kind


def build(name: str, attrs: Iterable[str]) -> tuple[Any, dict[str, Any]]:
    """Call the factory: ``(nn.Module, declared)``, where ``declared`` holds each of ``attrs`` that the module it
    returned declares, else that the factory's Python module declares (the README's place for them).

    Raises:
        UnknownModelError: as :func:`factory`. ModelFactoryError: the factory called ``sys.exit`` or returned
        something that is not an ``nn.Module``.
    """
    make = factory(name)
    with as_user_code(name):
        module = make()
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ModelFactoryError(f"model factory {name!r} returned {type(module).__name__}, not nn.Module")
    home = sys.modules.get(name.partition(":")[0])
    missing = object()
    declared = {}
    for attr in attrs:
        value = getattr(module, attr, getattr(home, attr, missing))
        if value is not missing:
            declared[attr] = value
    return module, declared
