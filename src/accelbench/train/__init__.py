"""Moved to :mod:`accelbench.scenarios.train` (issue 22: the training scenarios are one package). ``accelbench.train.step``
keeps the import path the README of accelbench 0.2 names working; nothing inside accelbench imports it."""
