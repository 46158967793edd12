"""Moved to :mod:`accelbench.scenarios.train.step` (the training step). This module keeps the import path the README
of accelbench 0.2 names working (``accelbench.train.step.build_step``); nothing inside accelbench imports it."""

from accelbench.scenarios.train.step import *  # noqa: F401,F403
