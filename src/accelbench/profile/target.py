"""The process Nsight Compute profiles: ``python -m accelbench.profile.target '<json>'``.

The JSON argument holds ``spec`` (a :class:`SweepSpec` as a dict), ``case`` (a :class:`Case` as a
dict), ``step`` and ``warmup``. The target builds the same workload as ``accelbench profile``, runs
``warmup`` untimed steps, then exactly one step inside the NVTX push/pop range ``NVTX_RANGE``, which
``ncu --nvtx --nvtx-include accelbench_step/`` limits the profile to. Errors end the process with
exit status 3 and a one-line message on stderr.
"""

from __future__ import annotations

import json
import sys

NVTX_RANGE = "accelbench_step"


def payload(spec, case, step: str, warmup: int) -> str:
    """The JSON argument for one profiled step."""
    import dataclasses

    return json.dumps({"spec": spec.to_dict(), "case": dataclasses.asdict(case), "step": step, "warmup": warmup},
                      default=str)


def _load(text: str):
    from accelbench.spec import Case, SweepSpec
    from accelbench.profile.step import ProfileCase

    doc = json.loads(text)
    spec_d = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["spec"].items()}
    spec = SweepSpec(**spec_d)
    pc = ProfileCase(case=Case(**doc["case"]), step=doc["step"])
    return spec, pc, int(doc.get("warmup", 2))


def main(argv: list[str] | None = None) -> int:
    import torch

    from accelbench.measure import one_line
    from accelbench.profile import step as stepmod

    argv = sys.argv[1:] if argv is None else argv
    try:
        spec, pc, warmup = _load(argv[0])
        device = torch.device(pc.case.device)
        work = stepmod.build(pc, spec, device)
        for _ in range(warmup):
            work.run()
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
