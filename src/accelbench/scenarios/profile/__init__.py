"""The ``profile`` scenario (``accelbench profile``): one step's roofline from analytic and measured FLOPs, DRAM bytes,
machine ceilings and kernel families.

| module | what |
| --- | --- |
| :mod:`.scenario` | the scenario: cases (a sweep case plus a step kind), ceilings per device, the measurement |
| :mod:`.ceilings` | measured matmul / DRAM ceilings, datasheet peaks |
| :mod:`.ncu` | Nsight Compute command and CSV parser (by metric name), the target's payload |
| :mod:`.kernels` | kernel families from names, sums per family / step |
| :mod:`.results` | flat records (units in names) |
| :mod:`.step` / :mod:`.target` | the profiled step, the ncu child process |
| :mod:`.storage` / :mod:`.reprocess` | the ``ceilings`` and ``profile_kernels`` extension tables; a stored CSV parsed again |

The pure maths it shares live on the ground floor: :mod:`accelbench.core.roofline` (ridge point, bound, attainable
FLOP/s) and :mod:`accelbench.core.analytic` (FLOPs from FlopCounterMode, parameters, minimum bytes). Charts live in
:mod:`accelbench.report.roofline` (the only place matplotlib is imported); :func:`accelbench.api.profile` draws them.
"""

from accelbench.scenarios.profile import scenario  # noqa: F401  (registers the profile scenario)
