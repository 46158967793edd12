"""LoadGen itself (the ``mlcommons-loadgen`` package), imported only here."""

from __future__ import annotations


def loadgen():
    """The ``mlperf_loadgen`` module.

    Raises:
        MissingDependencyError: ``mlcommons-loadgen`` is not installed (names the ``loadgen`` extra).
    """
    try:
        import mlperf_loadgen
    except ImportError:
        from accelbench.core.errors import MissingDependencyError

        raise MissingDependencyError("mlcommons-loadgen", "loadgen") from None
    return mlperf_loadgen
