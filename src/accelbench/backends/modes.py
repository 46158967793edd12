"""What a ``--modes`` name stands for: a backend (:data:`accelbench.backends.base.BACKENDS`: how an image model's
forward pass or training step runs) or an engine (:data:`accelbench.backends.engine.ENGINES`: how a language model
generates). The two registries share one namespace (an engine refuses a backend's name; the engines register after
the backends), so a name is one mode;
what any mode says of itself (its ``name``, ``about``, ``workloads``, ``requires``, ``host_bound``, ``options()``,
``unsupported_reason(device, workload)``) is read through :func:`mode`, and everything that lists modes (help,
completion, ``--modes`` validation, the docs' tables) asks :func:`names`.
"""

from __future__ import annotations

from accelbench.backends.base import BACKENDS, Backend
from accelbench.backends.engine import ENGINES, Engine
from accelbench.core.config import pick


def mode(name: str) -> Backend | Engine:
    """The backend or engine called ``name``.

    Raises:
        ConfigError: no such mode (the message lists every one).
    """
    return pick({**BACKENDS, **ENGINES}, name, "mode")


def names(workload: str | None = None) -> tuple[str, ...]:
    """Every mode name, backends first then engines, each in registration order (only those serving ``workload``,
    when given: ``inference``, ``train``, ``generate``)."""
    both: list[Backend | Engine] = [*BACKENDS.values(), *ENGINES.values()]
    return tuple(m.name for m in both if workload is None or workload in m.workloads)


def adopt(name: str, obj: object) -> None:
    """Register what an ``accelbench.backends`` entry point names: an :class:`Engine` (subclass or instance) in
    :data:`ENGINES`, else a :class:`Backend` in :data:`BACKENDS`.

    Raises:
        TypeError: it is neither.
        ValueError: its name is a mode's already, a backend's or an engine's (the two registries share one namespace).
    """
    from accelbench.backends import base, engine
    from accelbench.core.plugins import instance

    if isinstance(obj, Engine) or (isinstance(obj, type) and issubclass(obj, Engine)):
        engine.register(instance(obj, Engine))
        return
    backend = instance(obj, Backend)
    if backend.name in ENGINES:
        raise ValueError(f"mode {backend.name} is registered already (an engine)")
    base.register(backend)
