"""matplotlib, imported only here and only when a chart is drawn (part of the base install)."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (charts are files, never windows).

    Raises:
        MissingDependencyError: matplotlib is not installed (``pip install matplotlib``).
    """
    from accelbench.core.errors import MissingDependencyError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib") from None
    return plt
