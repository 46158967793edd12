"""Telemetry sources. Only :mod:`accelbench.telemetry.nvml` imports ``pynvml``."""
