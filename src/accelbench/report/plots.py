"""matplotlib, imported only here and only when a chart is drawn (the ``plot`` extra)."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (charts are files, never windows).

    Raises:
        MissingDependencyError: matplotlib is not installed (``pip install 'accelbench[plot]'``).
    """
    from accelbench.core.errors import MissingDependencyError

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MissingDependencyError("matplotlib", "plot") from None
    return plt
