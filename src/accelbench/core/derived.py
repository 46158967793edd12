"""Moved to :mod:`accelbench.sweep.derived` (issue 22: the derived columns are the sweep layer's). This module keeps
the import path the README of accelbench 0.2 names working; nothing inside accelbench imports it."""

from accelbench.sweep.derived import SweepContext, derived_columns, sweep_context  # noqa: F401

__all__ = ["SweepContext", "derived_columns", "sweep_context"]
