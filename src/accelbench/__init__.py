"""accelbench: how fast, how efficient and how costly is this model on this hardware, and why.

The library API mirrors the CLI: ``run_sweep(spec)`` is ``accelbench run``; specs are frozen
dataclasses from :mod:`accelbench.spec`; results are stored in SQLite by :mod:`accelbench.store`.
Heavy dependencies (torch, pynvml, matplotlib) are imported lazily by the modules that need them.
"""

__version__ = "0.1.0"

__all__ = ["__version__", "run_sweep", "SweepSpec", "Store"]


def __getattr__(name: str):
    # Lazy so that `import accelbench` stays cheap and torch-free.
    if name == "run_sweep":
        from accelbench.runner import run_sweep

        return run_sweep
    if name == "SweepSpec":
        from accelbench.spec import SweepSpec

        return SweepSpec
    if name == "Store":
        from accelbench.store import Store

        return Store
    raise AttributeError(name)
