"""Roofline profiling: analytic and measured FLOPs, DRAM bytes, machine ceilings, kernel families.

| module | what |
| --- | --- |
| :mod:`~accelbench.profile.roofline` | pure roofline maths (ridge point, bound, attainable FLOP/s) |
| :mod:`~accelbench.profile.analytic` | FLOPs (FlopCounterMode), parameters, minimum bytes |
| :mod:`~accelbench.profile.ceilings` | measured matmul / DRAM ceilings, datasheet peaks |
| :mod:`~accelbench.profile.ncu` | Nsight Compute command and CSV parser (by metric name) |
| :mod:`~accelbench.profile.kernels` | kernel families from names, sums per family / step |
| :mod:`~accelbench.profile.results` | flat records (units in names) |
| :mod:`~accelbench.profile.profiler` | ``run_profile``: the ``accelbench profile`` workload |
| :mod:`~accelbench.profile.step` / :mod:`~accelbench.profile.target` | the profiled step, the ncu child process |

Charts live in :mod:`accelbench.report.roofline` (the only place matplotlib is imported).
"""

__all__ = ["run_profile", "ProfileOptions"]


def __getattr__(name: str):
    if name in __all__:
        from accelbench.profile import profiler

        return getattr(profiler, name)
    raise AttributeError(name)
