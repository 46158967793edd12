"""Telemetry sources: one file per thing the monitor reads, behind one registry.

| name | reads | file | record columns | series |
| --- | --- | --- | --- | --- |
| nvml | each CUDA GPU in use (NVML; GPM on Hopper and newer) | ``nvml.py``, ``gpm.py`` | ``power_*_w``, ``gpu_util_*_pct``, ``gpm_*_pct``, ``energy_j``, ... | ``nvml_*`` (``nvml<i>_*``) |
| cpu | this process, its children and the host (psutil) | ``cpu.py`` | ``process_cpu_util_pct``, ``cpu_other_util_pct``, ``process_rss_max_bytes``, ... | ``cpu_*`` |
| rapl | CPU package energy (Linux powercap) | ``rapl.py`` | ``cpu_energy_j``, ``cpu_power_mean_w``, ``cpu_energy_source`` | none |

A source is one file here (a :class:`Source` subclass and a factory
``(devices, period_s, pids) -> list[Source]``: what it reads for the watched devices, ``[]`` when it
does not apply, as NVML without a CUDA device) plus one :func:`register` line in this package's
``__init__``. :class:`~accelbench.telemetry.Monitor` asks every factory in :data:`SOURCES`, in order, samples
what they return through :class:`~accelbench.telemetry.sampler.Sampler`, and merges their
:meth:`Source.record` and :meth:`Source.series`; it knows no source by name.
"""

from accelbench.telemetry.sources import cpu, nvml, rapl  # each takes Source from base
from accelbench.telemetry.sources.base import SOURCES, Source, SourceFactory, Unavailable, columns, register

register("nvml", nvml.gpu_sources)
register("cpu", cpu.cpu_sources)
register("rapl", rapl.rapl_sources)

__all__ = ["SOURCES", "Source", "SourceFactory", "Unavailable", "columns", "register"]
