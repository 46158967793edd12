"""Scenarios: what is measured. One module each (a package for a large one: ``profile/``, ``loadgen/``, ``train/``)
plus one import line here (``docs/extending.md``).

| scenario | run kind (one process / torchrun) | what a case measures |
| --- | --- | --- |
| ``inference`` | inference / inference-dp | the offline window: timed steps over real images at a batch size |
| ``train_step`` | training / train-ddp | training-step throughput (forward, loss, backward, optimizer) |
| ``converge`` | convergence | training from scratch to accuracy, one case per batch size |
| ``profile`` | profile | one step's roofline: analytic FLOPs and bytes, time, Nsight Compute counters |
| ``input_pipeline`` | input-pipeline | DataLoader / device-resident input rates, storage reads |
| ``interconnect`` | - / interconnect | collectives and GPU pair copies over the ranks |
| ``loadgen`` | loadgen / - | MLPerf's SingleStream, MultiStream, Server and Offline through LoadGen |
| ``generate`` | generate / - | language-model prefill and decode: TTFT, TPOT, tokens/s, KV cache, MBU/MFU |

A scenario's ``measure(case, spec, state, rank, sink)`` runs one case on a :class:`accelbench.core.rank.Rank`
(one process, or one rank of a torchrun job: the same code) and returns ``(record, series)``; the case runner
(:func:`accelbench.launchers.case.run_case`) guards it and records the settings it ran under, and the loop
(:mod:`accelbench.sweep.loop`) does the rest. A scenario of another distribution registers through the entry point
group ``accelbench.scenarios`` (:mod:`accelbench.core.plugins`); ``api.run(api.spec(name, ...))`` runs it.
"""

from accelbench.core import plugins as _plugins  # noqa: E402
from accelbench.scenarios import (  # noqa: E402,F401  (each registers its scenarios: one line per module)
    generate,
    inference,
    interconnect,
    loadgen,
    profile,
    serve,
    train,
)
from accelbench.scenarios.base import SCENARIOS, Scenario, adopt, by_kind, get, register

_plugins.load("accelbench.scenarios", adopt)  # scenarios of installed distributions (accelbench.core.plugins)

__all__ = ["SCENARIOS", "Scenario", "by_kind", "get", "register"]
