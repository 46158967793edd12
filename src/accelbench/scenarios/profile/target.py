"""The process Nsight Compute profiles: ``python -m accelbench.scenarios.profile.target '<json>'``.

The JSON argument (:func:`accelbench.scenarios.profile.ncu.payload`) holds ``spec`` (the profile :class:`~accelbench.core.spec.Spec` as a dict), ``case`` (its
:class:`~accelbench.core.spec.Case` as a dict, the step in its extras) and ``warmup``. The target builds the same workload as ``accelbench profile``, runs
``warmup`` untimed steps, then exactly one step inside the NVTX push/pop range ``NVTX_RANGE``, which
``ncu --nvtx --nvtx-include accelbench_step/`` limits the profile to. Errors end the process with
exit status 3 and a one-line message on stderr.
"""

from __future__ import annotations

import json
import sys

from accelbench.scenarios.profile.ncu import NVTX_RANGE


def _load(text: str):
    from accelbench.core.spec import case_from_dict, spec_from_dict
    from accelbench.scenarios.profile.scenario import Profile

    doc = json.loads(text)
    scenario = Profile()
    return spec_from_dict(scenario, doc["spec"]), case_from_dict(scenario, doc["case"]), int(doc.get("warmup", 2))


def main(argv: list[str] | None = None) -> int:
    import torch

    from accelbench.core.device import cudnn_benchmark
    from accelbench.core.errors import one_line
    from accelbench.scenarios.profile import step as stepmod
    from accelbench.scenarios.profile.scenario import Profile

    argv = sys.argv[1:] if argv is None else argv
    try:
        spec, case, warmup = _load(argv[0])
        device = torch.device(case.device)
        with cudnn_benchmark(Profile().cudnn_benchmark(case, spec)):  # as the timed step ran
            work = stepmod.build(case, spec, device)
            reset = getattr(work, "reset", None)  # a language model's step: the cache position set back
            for _ in range(warmup):
                reset and reset()
                work.run()
            reset and reset()  # outside the range: the profile holds the step's own kernels only
            torch.cuda.synchronize(device)
            with torch.cuda.nvtx.range(NVTX_RANGE):
                work.run()
                torch.cuda.synchronize(device)
    except Exception as exc:  # one line for the parent to show
        print(f"accelbench target failed: {one_line(exc)}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
