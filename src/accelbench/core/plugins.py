"""Third-party backends, precisions, models and scenarios through Python entry points, and drop-in files.

A distribution declares its additions in its ``pyproject.toml`` (Python packaging guide, "Creating and discovering
plugins": entry points), one group per registry:

.. code-block:: toml

    [project.entry-points."accelbench.backends"]
    tensorrt = "accelbench_trt.backend"           # a module: importing it registers, as a built-in file does
    openvino = "accelbench_ov:OpenVino"           # or an object: a Backend class or instance

| group | an object entry point names |
| --- | --- |
| ``accelbench.backends`` | a :class:`accelbench.backends.Backend` subclass or instance |
| ``accelbench.precisions`` | a :class:`accelbench.precisions.Precision` |
| ``accelbench.models`` | a factory ``fn(pretrained: bool) -> LoadedModel``, registered under the entry point's name |
| ``accelbench.scenarios`` | a :class:`accelbench.scenarios.Scenario` subclass or instance |

Each group is loaded once, when its registry is first imported (``accelbench --help`` imports none). A plugin that
cannot be loaded (an import error, a name already taken, a precision without a roofline ceiling) is one
:class:`~accelbench.core.errors.PluginWarning` naming it, and everything else goes on: a broken plugin never
stops accelbench.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import types
import warnings
from collections.abc import Callable, Iterable
from typing import TypeVar

from accelbench.core.errors import PluginWarning, one_line

T = TypeVar("T")
GROUPS = ("accelbench.backends", "accelbench.precisions", "accelbench.models", "accelbench.scenarios")
_loaded: set[str] = set()
_pending: list[tuple[str, Callable]] = []  # the group loading now first, then those asked for meanwhile


@functools.lru_cache(maxsize=1)
def _entry_points():
    """Every installed entry point, read once (each read scans every installed distribution: ~30 ms)."""
    from importlib.metadata import entry_points

    return entry_points()


def _warn(what: str, exc: BaseException) -> None:
    warnings.warn(PluginWarning(f"{what} not loaded: {one_line(exc)}"), stacklevel=3)


def instance(obj: object, cls: type[T]) -> T:
    """``obj`` as an instance of ``cls`` (an entry point may name the class or an instance).

    Raises:
        TypeError: it is neither.
    """
    made = obj() if isinstance(obj, type) and issubclass(obj, cls) else obj
    if not isinstance(made, cls):
        raise TypeError(f"{obj!r} is not a {cls.__module__}.{cls.__qualname__}")
    return made


def load(group: str, adopt: Callable[[str, object], None]) -> list[str]:
    """Load the entry points of ``group`` (one of :data:`GROUPS`) once; ``adopt(name, obj)`` registers an object
    an entry point names (a module registered itself when imported).

    A group asked for while another is loading (a plugin module that adds a precision imports the backends, whose
    registry then asks for its group) waits until that one is done: its entry points may name the module being
    imported, whose names do not exist yet.

    Returns:
        The names of the entry points loaded now (empty when the group was loaded before, or waits).
    """
    if group in _loaded:
        return []
    _loaded.add(group)
    _pending.append((group, adopt))
    if len(_pending) > 1:
        return []  # loading: the outer call takes it next
    done = []
    while _pending:
        done += _load(*_pending[0])
        _pending.pop(0)
    return done


def _load(group: str, adopt: Callable[[str, object], None]) -> list[str]:
    done = []
    for ep in _entry_points().select(group=group):
        try:
            obj = ep.load()
            if not isinstance(obj, types.ModuleType):
                adopt(ep.name, obj)
        except (Exception, SystemExit) as exc:  # a plugin's failure is its own: one warning, never our crash
            dist = getattr(getattr(ep, "dist", None), "name", None)
            _warn(f"plugin {ep.name} ({ep.value}{', from ' + dist if dist else ''}; {group})", exc)
        else:
            done.append(ep.name)
    return done


def import_drop_ins(package: str, path: Iterable[str]) -> list[str]:
    """Import every module of ``package`` (its ``__path__``) not imported yet: a file dropped into a registry's
    folder registers itself as the built-in files do, with no other edit. A module that fails to import is one
    :class:`PluginWarning` naming it.

    Returns:
        The modules imported.
    """
    import sys

    done = []
    for info in pkgutil.iter_modules(path):
        if f"{package}.{info.name}" in sys.modules or info.name.startswith("_"):
            continue
        try:
            importlib.import_module(f"{package}.{info.name}")
        except (Exception, SystemExit) as exc:
            _warn(f"{package}.{info.name} (a file in {package})", exc)
        else:
            done.append(info.name)
    return done
