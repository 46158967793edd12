"""One rank of the tensor-parallel check (started by torchrun, gloo on CPUs): the bundled tiny model split over the
job's ranks, a greedy generation of fixed random prompts (with a compile mode: its prefill and decode steps
``torch.compile``-d, as static-compile runs them; several modes, comma-separated, generate in turn on one split), its tokens and the shard shapes written by rank 0 as JSON; eager,
also the collectives of the prefill and of one decode step (``CommDebugMode``: op name -> calls) and how many of the
model's parameters are DTensors. Each precision named after the compile mode (``eager`` for none) is then loaded
split by the generate scenario's own path (:func:`accelbench.backends.generation.load_model`, static-cache's) in the
same processes and generates the same prompts, eager: its tokens, last-prompt-token logits and every rank's layer-0
linears (weight dtype and shape, scale shape). ``fused`` in their place fuses a split's projections as the
static-compile-fused engine does (:func:`fused_run`); ``random:PRECISION`` draws the architecture's random weights on
the shards, quantized a layer at a time where PRECISION quantizes (:func:`random_run`)."""

import contextlib
import json
import sys

PROMPTS, PROMPT_LEN, NEW_TOKENS = 2, 16, 8


def _counts(comm) -> dict:
    """A ``CommDebugMode``'s collectives by op name (``all_reduce``) -> calls."""
    return {str(op).rsplit(".", 1)[-1]: n for op, n in comm.get_comm_counts().items()}


def prompts_of(lm):
    """The fixed random prompts ``(PROMPTS, PROMPT_LEN)`` of ``lm`` (a ``LoadedLM``)."""
    import torch

    gen = torch.Generator().manual_seed(0)
    return torch.randint(0, lm.info.vocab_size, (PROMPTS, PROMPT_LEN), generator=gen)


def greedy(module, prompts, steps=None) -> list:
    """``module``'s greedy generation of ``prompts`` through a static-cache loop: ``NEW_TOKENS`` tokens a prompt."""
    import torch

    from accelbench.backends.lm_loop import StaticLoop

    loop = StaticLoop(module, PROMPTS, PROMPT_LEN, NEW_TOKENS, prompts.device, steps=steps)
    with torch.no_grad():
        tokens = [loop.prefill(prompts)]
        for i in range(NEW_TOKENS - 1):
            tokens.append(loop.decode(tokens[-1], i))
    return torch.cat(tokens, 1).tolist()


def quantized_run(name: str, precision: str, dims=None) -> dict:
    """``name`` loaded as the static-cache engine loads it in ``precision`` (split over ``dims`` when given): its
    greedy tokens, the logits of the prompts' last tokens (float32 values), its ``quant_*`` columns and its first
    layer's linears (module path -> weight dtype, weight shape, scale shape)."""
    import torch

    from accelbench.backends.engine import ENGINES
    from accelbench.backends.generation import load_model

    loaded = load_model(ENGINES["static-cache"], name, precision, torch.device("cpu"), 0, dims)
    prompts = prompts_of(loaded.lm)
    with torch.no_grad():
        logits = loaded.module(prompts).logits[:, -1].float().tolist()
    layer = loaded.module.model.layers[0]
    linears = {
        n: [str(m.weight.dtype), list(m.weight.shape), list(m.scale.shape)]
        for n, m in layer.named_modules()
        if hasattr(m, "scale")
    }
    head = loaded.module.get_output_embeddings()
    linears["lm_head"] = [str(head.weight.dtype), list(head.weight.shape), list(head.scale.shape)]
    cols = {k: v for k, v in loaded.columns.items() if k.startswith("quant_")}
    return {"tokens": greedy(loaded.module, prompts, loaded.steps), "logits": logits, "linears": linears, **cols}


def random_run(name: str, precision: str, dims=None) -> dict:
    """``name``'s architecture with random weights drawn from the meta device
    (:func:`accelbench.models.lm_load.materialize`; split over ``dims`` when given, each rank its shards), each decoder
    layer quantized as it is drawn when ``precision`` quantizes (``float32``: as drawn): its greedy tokens and the
    logits of the prompts' last tokens (float32 values)."""
    import torch

    from accelbench.models import hf
    from accelbench.models.lm_load import load_lm, materialize
    from accelbench.quant.lm import layer_quantizer, quantize_lm

    cpu = torch.device("cpu")
    quantize = layer_quantizer(precision) if precision != "float32" else None
    if dims is None and quantize is None:  # whole, drawn as a split is
        lm = hf.load_hf(name, torch.device("meta"), torch.float32, random_init=True)
        materialize(lm.module, cpu, 0)
    else:
        lm = load_lm(name, cpu, torch.float32, 0, random_init=True, dims=dims, each_layer=quantize)
    if quantize is not None:
        quantize_lm(lm.module, precision)
    prompts = prompts_of(lm)
    with torch.no_grad():
        logits = lm.module(prompts).logits[:, -1].float().tolist()
    return {"tokens": greedy(lm.module, prompts), "logits": logits}


def fused_run(name: str, dims) -> dict:
    """``name`` split over ``dims`` in float32, then fused as the static-compile-fused engine fuses it
    (:func:`accelbench.backends.lm_fuse.fuse_projections` after the split, each rank its own shards), generating
    eagerly: every rank's greedy tokens, its layer-0 fused q/k/v weight's shape, the layers fused and the parameters
    counted whole (:func:`whole_numel`). The compiled steps over a split are checked on the untied model."""
    import torch
    import torch.distributed as dist

    from accelbench.backends.lm_fuse import fuse_projections
    from accelbench.models.lm_load import load_lm
    from accelbench.models.lm_shape import whole_numel

    lm = load_lm(name, torch.device("cpu"), torch.float32, 0, dims=dims)
    layers = fuse_projections(lm.module)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, greedy(lm.module, prompts_of(lm)))
    qkv = lm.module.model.layers[0].self_attn.qkv_proj.weight
    params = sum(whole_numel(p) for p in lm.module.parameters())
    return {"tokens": every, "qkv_local": list(qkv.shape), "fused_layers": layers, "params": params}


def float_run(lm, compile_mode: str) -> dict:
    """The split float32 model ``lm``'s greedy generation (every rank's tokens), its layer-0 query shard's shape and
    its static cache's key-value heads; eager, also the collectives of the prefill and of one decode step and how
    many parameters are DTensors."""
    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode

    from accelbench.backends.lm_loop import StaticLoop, compiled_steps

    prompts, eager = prompts_of(lm), compile_mode == "eager"
    steps = compiled_steps(None if eager else compile_mode)
    loop = StaticLoop(lm.module, PROMPTS, PROMPT_LEN, NEW_TOKENS, prompts.device, steps=steps)
    with torch.no_grad(), CommDebugMode() if eager else contextlib.nullcontext() as prefill_comm:
        tokens = [loop.prefill(prompts)]
    with torch.no_grad(), CommDebugMode() if eager else contextlib.nullcontext() as decode_comm:
        tokens.append(loop.decode(tokens[-1], 0))  # one decode step
    with torch.no_grad():
        for i in range(1, NEW_TOKENS - 1):
            tokens.append(loop.decode(tokens[-1], i))
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, torch.cat(tokens, 1).tolist())
    q = lm.module.model.layers[0].self_attn.q_proj.weight
    doc = {"tokens": every, "q_local": list(q.shape), "kv_heads": loop.cache.layers[0].keys.shape[1], **lm.parallel}
    if eager:
        doc["prefill_collectives"], doc["decode_collectives"] = _counts(prefill_comm), _counts(decode_comm)
        doc["dtensors"] = sum(isinstance(p, DTensor) for p in lm.module.parameters())
    return doc


def main(out: str, name: str, compile_mode: str = "eager", *precisions: str) -> None:
    import torch
    import torch.distributed as dist

    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.models.lm_load import load_lm

    dist.init_process_group("gloo")
    dims = ParallelDims(tp=dist.get_world_size())
    lm = load_lm(name, torch.device("cpu"), torch.float32, 0, dims=dims)
    first, *more = compile_mode.split(",")  # the first mode's figures at the top, each further one under its name
    doc = float_run(lm, first)
    for mode in more:
        doc[mode] = float_run(lm, mode)
    for precision in precisions:
        if precision == "fused":  # the static-compile-fused engine on the split
            doc["fused"] = fused_run(name, dims)
            continue
        if precision.startswith("random:"):  # the architecture's random weights, drawn on the shards
            doc[precision] = random_run(name, precision.split(":", 1)[1], dims)
            continue
        run = quantized_run(name, precision, dims)
        ranks = [None] * dist.get_world_size()
        dist.all_gather_object(ranks, {"tokens": run["tokens"], "linears": run.pop("linears")})
        doc[precision] = {**run, "ranks": ranks}
    if dist.get_rank() == 0:
        with open(out, "w") as f:
            json.dump(doc, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    import os

    main(*sys.argv[1:])
    # Out without the interpreter's finalization: a gloo worker thread may still be releasing the last
    # all_gather_object's work, whose tensors hold Python objects; released during finalization it cannot take the
    # GIL and aborts the rank ("terminate called without an active exception", after the JSON is written: seen about
    # once in ten launches on a loaded 2-core machine; the core's stack: ProcessGroupGloo::runLoop ->
    # ~AsyncAllgatherWork -> THPVariable_dealloc -> take_gil -> pthread_exit). pytorch/pytorch#179291 describes it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
