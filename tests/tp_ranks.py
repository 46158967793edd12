"""One rank of the tensor-parallel check (started by torchrun, gloo on CPUs): the bundled tiny model split over the
job's ranks, a greedy generation of fixed random prompts (with ``compile``: its prefill and decode steps
``torch.compile``-d, as static-compile runs them), its tokens and the shard shapes written by rank 0 as JSON; eager,
also the collectives of the prefill and of one decode step (``CommDebugMode``: op name -> calls) and how many of the
model's parameters are DTensors."""

import contextlib
import json
import sys


def _counts(comm) -> dict:
    """A ``CommDebugMode``'s collectives by op name (``all_reduce``) -> calls."""
    return {str(op).rsplit(".", 1)[-1]: n for op, n in comm.get_comm_counts().items()}


def main(out: str, name: str, compile_mode: str | None = None) -> None:
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode

    from accelbench.backends.lm_loop import StaticLoop, compiled_steps
    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.models.lm_load import load_lm

    dist.init_process_group("gloo")
    dev = torch.device("cpu")
    lm = load_lm(name, dev, torch.float32, 0, dims=ParallelDims(tp=dist.get_world_size()))
    q = lm.module.model.layers[0].self_attn.q_proj.weight
    prompts = torch.randint(0, lm.info.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    loop = StaticLoop(lm.module, 2, 16, 8, dev, steps=compiled_steps(compile_mode))
    eager = compile_mode is None
    with torch.no_grad(), CommDebugMode() if eager else contextlib.nullcontext() as prefill_comm:
        tokens = [loop.prefill(prompts)]
    with torch.no_grad(), CommDebugMode() if eager else contextlib.nullcontext() as decode_comm:
        tokens.append(loop.decode(tokens[-1], 0))  # one decode step
    with torch.no_grad():
        for i in range(1, 7):
            tokens.append(loop.decode(tokens[-1], i))
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, torch.cat(tokens, 1).tolist())
    keys = loop.cache.layers[0].keys
    if dist.get_rank() == 0:
        doc = {"tokens": every, "q_local": list(q.shape), "kv_heads": keys.shape[1], **lm.parallel}
        if eager:
            doc["prefill_collectives"], doc["decode_collectives"] = _counts(prefill_comm), _counts(decode_comm)
            doc["dtensors"] = sum(isinstance(p, DTensor) for p in lm.module.parameters())
        with open(out, "w") as f:
            json.dump(doc, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
