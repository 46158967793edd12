"""Roofline profiling: analytic and measured FLOPs, DRAM bytes, machine ceilings, kernel families.

| module | what |
| --- | --- |
| :mod:`~accelbench.profile.roofline` | pure roofline maths (ridge point, bound, attainable FLOP/s) |
| :mod:`~accelbench.profile.analytic` | FLOPs (FlopCounterMode), parameters, minimum bytes |
| :mod:`~accelbench.profile.ceilings` | measured matmul / DRAM ceilings, datasheet peaks |
| :mod:`~accelbench.profile.ncu` | Nsight Compute command and CSV parser (by metric name) |
| :mod:`~accelbench.profile.kernels` | kernel families from names, sums per family / step |
| :mod:`~accelbench.profile.results` | flat records (units in names) |
| :mod:`~accelbench.profile.step` / :mod:`~accelbench.profile.target` | the profiled step, the ncu child process |
| :mod:`~accelbench.profile.storage` | the ``ceilings`` and ``profile_kernels`` extension tables |

The ``accelbench profile`` scenario itself is :mod:`accelbench.scenarios.profile`. Charts live in
:mod:`accelbench.report.roofline` (the only place matplotlib is imported).
"""

from accelbench.scenarios.profile import scenario  # noqa: E402,F401  (registers the profile scenario)
