"""accelbench vs a careful hand-written inference loop, same settings, same device call, interleaved.

The hand loop is the usual reference (torch 2.11, random input, batch 256): model on the GPU
in eval mode, inputs on the device, warm-up, then ``n`` forward passes between two synchronisations;
throughput = n * batch / elapsed. accelbench runs the same (model, batch, precision, mode, layout)
through the inference scenario's ``measure`` (``accelbench.launchers.case.run_case``, what every ``accelbench run``
case runs) on random data. Each pair is repeated ``--reps`` times, alternating the
order, and the median ratio accelbench / hand is reported with the spread.

Usage: python benchmarks/handloop.py --out results.json [--settings fp32-eager,bf16-cl-eager,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import torchvision

from accelbench import api, precisions, scenarios
from accelbench.core.device import resolve_device
from accelbench.core.rank import Rank
from accelbench.core.spec import Case
from accelbench.data.batches import Inputs
from accelbench.launchers.case import run_case
from accelbench.models import SeededBuilds
from accelbench.scenarios.inference import InferenceExtras

SETTINGS = {
    # name: (precision, mode, channels_last)
    "fp32-eager": ("fp32", "eager", False),
    "bf16-cl-eager": ("amp-bf16", "eager", True),
    "bf16-cl-compile": ("amp-bf16", "compile", True),
    "bf16-cl-max-autotune": ("amp-bf16", "max-autotune", True),
    # the best hand-found configuration: bf16 weights and inputs, torch.compile with Inductor freezing
    "bf16w-cl-compile-freeze": ("bf16", "compile-freeze", True),
}


def hand_loop(precision: str, mode: str, cl: bool, batch: int, iters: int, compiled: dict, device) -> float:
    """Samples/s of the hand-written loop (the compiled module is cached across repetitions)."""
    precisions.set_tf32(False)
    key = (precision, mode, cl)
    if key not in compiled:
        m = torchvision.models.resnet50().to(device).eval()
        if cl:
            m = m.to(memory_format=torch.channels_last)
        if precision == "bf16":
            m = m.to(torch.bfloat16)
        if mode != "eager":
            m = torch.compile(m, mode="max-autotune" if mode == "max-autotune" else None)
        compiled[key] = m
    m = compiled[key]
    x = torch.randn(batch, 3, 224, 224, device=device)
    if cl:
        x = x.contiguous(memory_format=torch.channels_last)
    if precision == "bf16":
        x = x.to(torch.bfloat16)
    dtype = torch.bfloat16 if precision == "amp-bf16" else None
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    import torch._inductor.config as inductor_config

    with (
        torch.inference_mode(),
        torch.autocast(device.type, dtype=dtype, enabled=dtype is not None),
        inductor_config.patch(freezing=mode.endswith("-freeze")),
    ):
        for _ in range(10):
            m(x)
        sync()
        t0 = time.perf_counter()
        for _ in range(iters):
            m(x)
        sync()
        return iters * batch / (time.perf_counter() - t0)


def accel(precision: str, mode: str, cl: bool, batch: int, spec, inputs: Inputs, device) -> dict:
    case = Case(
        scenario="inference",
        model="resnet50",
        batch_size=batch,
        precision=precision,
        mode=mode,
        channels_last="on" if cl else "off",
        images=batch * 4,
        data="synthetic",
        image_size=224,
        device=str(device),
        extras=InferenceExtras(),
    )
    rec, _ = run_case(scenarios.get("inference"), case, spec, (inputs, SeededBuilds()), Rank(device), None)
    if rec["status"] != "ok":
        raise RuntimeError(rec["error"])
    return rec


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--settings", default="fp32-eager,bf16-cl-eager")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--device", default="cuda", help="cuda (the measurement) or cpu (a dry run of the script)")
    args = ap.parse_args()
    device = resolve_device(args.device)
    spec = api.spec(
        "inference",
        {
            "data": "synthetic",
            "images": args.batch * 4,
            "min_timed_batches": args.iters,
            "warmup_batches": 10,
            "min_time_s": 0.0,
        },
        cuda=device.type == "cuda",
    )
    inputs = Inputs.for_spec(spec, device)
    compiled: dict = {}
    out = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "batch": args.batch,
        "results": [],
    }
    for name in args.settings.split(","):
        precision, mode, cl = SETTINGS[name]
        hand, ours = [], []
        for rep in range(args.reps):
            order = ("hand", "accel") if rep % 2 == 0 else ("accel", "hand")
            for who in order:
                if who == "hand":
                    hand.append(hand_loop(precision, mode, cl, args.batch, args.iters, compiled, device))
                else:
                    ours.append(
                        accel(precision, mode, cl, args.batch, spec, inputs, device)["throughput_samples_per_s"]
                    )
        compiled.clear()
        row = {
            "setting": name,
            "hand_samples_per_s": hand,
            "accelbench_samples_per_s": ours,
            "hand_median": statistics.median(hand),
            "accelbench_median": statistics.median(ours),
            "ratio": statistics.median(ours) / statistics.median(hand),
        }
        out["results"].append(row)
        print(
            f"{name:24s} hand {row['hand_median']:10.1f}  accelbench {row['accelbench_median']:10.1f}  "
            f"ratio {row['ratio']:.3f}  hand range {min(hand):.0f}-{max(hand):.0f}  ours {min(ours):.0f}-{max(ours):.0f}",
            flush=True,
        )
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
