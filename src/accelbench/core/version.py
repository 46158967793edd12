"""accelbench's version (``accelbench.__version__``; the same as ``pyproject.toml``'s)."""

__version__ = "0.2.0"
