"""Host time of one eager decode step of a tensor-parallel model against the same model whole, on CPUs (gloo).

A decode step at batch 1 does little arithmetic; on a GPU its time is the host's (Python, dispatch, launches) unless
it is captured in a graph. This script measures that host cost where it is the whole cost: small Llama shapes on
the CPU, one thread a rank, the model whole in one process (TP 1) and split over two gloo ranks (TP 2) by
:mod:`accelbench.models.tensor_parallel` as ``accelbench generate --gpus 2 --parallel tp`` splits it. For each it
prints the median wall time of a decode step (the static-cache loop, eager: ``step_ms``), its host time (the main
thread's CPU time, ``time.thread_time``: Python, dispatch and the CPU's arithmetic, not the time blocked waiting
for a collective's peer, which on a shared CPU is mostly the other rank being descheduled: ``host_ms``, and per
decoder layer), the collectives one decode step performs (``CommDebugMode``), and, for TP 2, the time of one all-reduce of a decode step's activations
(``1 x 1 x hidden``) so the step's expected cost (TP 1's plus two all-reduces a layer) can be read beside it.
With ``--profile``, the host operators that take most of a TP 2 step (``torch.profiler``, rank 0); with
``--no-collectives``, the split model's hooks made identities (its tokens are then wrong: only what the step costs
beside its collectives is measured; for the plain-shard split of :mod:`accelbench.models.tensor_parallel`).

    PYTHONPATH=src python benchmarks/tp_step_overhead.py                  # tiny model and a 16-layer Llama
    PYTHONPATH=src python benchmarks/tp_step_overhead.py --models llama16 --profile
    PYTHONPATH=src python benchmarks/tp_step_overhead.py --models llama16 --no-collectives

It measures the code as it is: run it before and after a change to the split.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# random-weight Llama shapes: small hidden sizes, so a step's arithmetic is small beside its host work
SHAPES = {
    "llama16": dict(hidden_size=256, intermediate_size=512, num_hidden_layers=16, num_attention_heads=8),
    "llama8": dict(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16),
}


def build(name: str, tp: int):
    """The model ``name`` (``tiny``: the bundled one; else a :data:`SHAPES` entry with random weights), split over
    the job's ranks when ``tp`` > 1."""
    import torch

    from accelbench.core.parallel_dims import ParallelDims

    dims = ParallelDims(tp=tp) if tp > 1 else None
    if name == "tiny":
        from accelbench.models.lm_load import load_lm

        return load_lm("hf:tiny-shakespeare", torch.device("cpu"), torch.float32, 0, dims=dims).module
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = SHAPES[name]["num_attention_heads"]
    config = LlamaConfig(vocab_size=4096, num_key_value_heads=heads // 2, tie_word_embeddings=False, **SHAPES[name])
    if tp == 1:
        torch.manual_seed(0)
        return LlamaForCausalLM(config).eval()
    from accelbench.models.lm_load import materialize
    from accelbench.models.tensor_parallel import apply_tp

    with torch.device("meta"):
        lm = LlamaForCausalLM(config).eval()
    apply_tp(lm, dims.build_mesh("cpu")["tp"])
    materialize(lm, torch.device("cpu"), 0)
    return lm


def rank_main(name: str, tp: int, steps: int, profile: bool, stub: bool = False) -> None:
    """One rank: the decode steps timed, counted and (``profile``) profiled, the split's collectives made identities
    when ``stub``; rank 0 prints a JSON line."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor.debug import CommDebugMode

    from accelbench.backends.lm_loop import StaticLoop

    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    if stub:
        from accelbench.models import tensor_parallel

        tensor_parallel._summed = tensor_parallel._gathered = lambda *a: lambda module, args, out: out
    lm = build(name, tp)
    warm, counted, profiled = 5, 1, 5 if profile else 0
    loop = StaticLoop(lm, 1, 16, warm + counted + profiled + steps, torch.device("cpu"))
    prompts = torch.randint(0, lm.config.vocab_size, (1, 16), generator=torch.Generator().manual_seed(0))
    out: dict = {"model": name, "tp": tp, "layers": lm.config.num_hidden_layers, "hidden": lm.config.hidden_size}
    with torch.no_grad():
        token, i = loop.prefill(prompts), 0
        for _ in range(warm):
            token, i = loop.decode(token, i), i + 1
        with CommDebugMode() as comm:
            token, i = loop.decode(token, i), i + 1
        out["collectives_per_step"] = {str(k): v for k, v in comm.get_comm_counts().items()}
        if profile:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(profiled):
                    token, i = loop.decode(token, i), i + 1
            out["profile"] = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
        times, host = [], []
        for _ in range(steps):
            dist.barrier()
            t0, c0 = time.perf_counter(), time.thread_time()
            token, i = loop.decode(token, i), i + 1
            times.append(time.perf_counter() - t0)
            host.append(time.thread_time() - c0)
        out["step_ms"], out["host_ms"] = statistics.median(times) * 1e3, statistics.median(host) * 1e3
        out["allreduce_ms"] = _allreduce_ms(lm.config.hidden_size) if tp > 1 else 0.0
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


def _allreduce_ms(hidden: int, iters: int = 200) -> float:
    """Median time of one gloo all-reduce of a decode step's activations (``1 x 1 x hidden`` float32), ms."""
    import torch
    import torch.distributed as dist

    x, times = torch.ones(1, 1, hidden), []
    for _ in range(iters):
        t0 = time.perf_counter()
        dist.all_reduce(x)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def run(name: str, tp: int, steps: int, profile: bool, stub: bool = False) -> dict:
    """This script on ``tp`` ranks (torchrun, gloo), rank 0's result."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={tp}", __file__]
    argv += ["--rank-job", name, str(tp), str(steps)] + (["--profile"] if profile else [])
    argv += ["--no-collectives"] if stub else []
    p = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=False)
    lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode or not lines:
        sys.exit(f"{name} tp={tp} failed:\n{p.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="tiny,llama16", help=f"comma-separated: tiny, {', '.join(SHAPES)}")
    ap.add_argument("--steps", type=int, default=30, help="timed decode steps (the median is printed)")
    ap.add_argument("--profile", action="store_true", help="print the TP 2 step's top host operators")
    ap.add_argument("--no-collectives", action="store_true", help="TP 2's collectives made identities (wrong tokens)")
    ap.add_argument("--rank-job", nargs=3, metavar=("MODEL", "TP", "STEPS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank_job:
        rank_main(args.rank_job[0], int(args.rank_job[1]), int(args.rank_job[2]), args.profile, args.no_collectives)
        return
    head = f"{'model':8} {'layers':>6} {'tp':>3} {'step_ms':>8} {'host_ms':>8} {'host_per_layer_ms':>17}"
    print(f"{head} {'allreduce_ms':>12}  collectives/step")
    for name in args.models.split(","):
        for tp in (1, 2):
            r = run(name, tp, args.steps, args.profile and tp == 2, args.no_collectives and tp == 2)
            colls = ", ".join(f"{k.rsplit('.', 1)[-1]} x{v}" for k, v in r["collectives_per_step"].items())
            print(
                f"{name:8} {r['layers']:>6} {tp:>3} {r['step_ms']:>8.2f} {r['host_ms']:>8.2f} "
                f"{r['host_ms'] / r['layers']:>17.3f} {r['allreduce_ms']:>12.3f}  {colls or 'none'}"
            )
            if r.get("profile"):
                print(r["profile"])


if __name__ == "__main__":
    main()
