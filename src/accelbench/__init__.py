"""accelbench: how fast, how efficient and how costly is this model on this hardware, and why.

The library API mirrors the CLI (:mod:`accelbench.api`: one function per command). The pipeline, visible in
the folders: spec -> cases (:mod:`~accelbench.core.spec`) -> launcher (:mod:`~accelbench.launchers`) ->
scenario (:mod:`~accelbench.scenarios`) measuring a model prepared by a backend (:mod:`~accelbench.backends`)
in a precision (:mod:`~accelbench.precisions`), watched by telemetry (:mod:`~accelbench.telemetry`) ->
record -> derived columns (:mod:`~accelbench.sweep.derived`) -> store (:mod:`~accelbench.store`) -> report
(:mod:`~accelbench.report`); ``docs/architecture.md`` maps it. Heavy dependencies (torch, pynvml,
matplotlib) are imported lazily by the modules that need them.
"""

from accelbench.core.version import __version__

__all__ = ["__version__", "api", "Store"]


def __getattr__(name: str):
    # Lazy so that `import accelbench` stays cheap and torch-free.
    if name == "api":
        import importlib

        return importlib.import_module("accelbench.api")
    if name == "Store":
        from accelbench.store import Store

        return Store
    raise AttributeError(name)
