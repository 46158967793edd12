"""Tensor parallelism of a Llama-family ``transformers`` causal LM for inference, as gpt-fast's ``tp.py`` and vLLM's
parallel linears do it: every rank holds its shards as plain tensors, and the step is the model's own forward on
them plus two all-reduces a layer. Megatron-LM's split (Shoeybi et al. 2019, s. 3), the plan torchtitan applies to
Llama (``torchtitan/models/llama3/infra/parallelize.py``, ``apply_tp``).

Per decoder layer: ``q_proj``, ``k_proj``, ``v_proj`` and the MLP's ``gate_proj`` and ``up_proj`` are column-parallel
(each rank keeps its slice of the output rows: its own heads and its own slice of the MLP's hidden units, no
communication), ``o_proj`` and ``down_proj`` row-parallel (each rank keeps its slice of the input columns and
computes a partial sum, all-reduced by a forward hook), so a layer costs two all-reduces of
``batch x tokens x hidden`` values. A row-parallel bias is kept by rank 0 only (zeros elsewhere), so the sum adds it
once. Each rank holds ``heads / tp`` query and ``kv_heads / tp`` key-value heads: the static KV cache
(:func:`accelbench.backends.lm_loop.allocate`, sized by :func:`degree`) holds this rank's heads only. Attention
modules that keep head counts as attributes get theirs divided; the config keeps the whole model's (the counts of
:mod:`accelbench.core.lm_analytic` are the whole model's).

The LM head, read whole by every decode step, is split over the vocabulary (column-parallel, its logits all-gathered
once a forward pass): it pays, a step reads ``1 / tp`` of it a GPU. The input embedding, of which a step reads one
row a token, stays replicated: sharding it would save memory only, for an all-reduce a forward pass. A tied head (the
embedding table) stays replicated too. Every module and activation outside the projections is replicated.

Why plain tensors and not ``torch.distributed.tensor.parallel``'s DTensor modules: eager, a DTensor linear goes
through DTensor's dispatch (sharding propagation, input and output redistribution) on every call, seven a layer, which
made an eager decode step host-bound (``benchmarks/tp_step_overhead.py`` measures it); here nothing in the step but the
collectives differs from the whole model's. The collectives are ``torch.distributed``'s functional ones
(``_c10d_functional``: ``all_reduce``, ``all_gather_into_tensor`` and ``wait_tensor``, the ops
``torch.distributed._functional_collectives`` is made of): plain tensors eager, traced by ``torch.compile``
(fullgraph: the static-compile engine's steps), and with NCCL capturable in CUDA graphs (gpt-fast's ``tp.py`` uses
the same ops).

Every split parameter carries :data:`accelbench.models.lm_shape.SHARDS` (the ranks it is split over), so parameter
counts stay the whole model's (:func:`accelbench.models.lm_shape.whole_numel`). Random weights of a large model are
never built whole: the model is built on the ``meta`` device, split there, then each rank allocates its shards on its
GPU and draws them (:func:`accelbench.models.lm_load.materialize`); a checkpoint's model, built whole, keeps each
rank's slices.

A weight-only precision quantizes after the split, each rank its own shards, a decoder layer at a time as its
shards are drawn (:func:`accelbench.quant.weight_only.replace_linears`, which moves the hooks above and the shard
marks onto the quantized linears): a column-parallel shard (and a vocabulary-split head's) holds whole output
rows, so its per-row scales are the whole weight's; a row-parallel shard's are taken over its slice of the input
dimension (per-shard scales, as an engine quantizing on the fly after sharding does: vLLM's dynamic fp8 of loaded
shards).
"""

from __future__ import annotations

from typing import Any

COLUMN = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")
ROW = ("o_proj", "down_proj")


def tp_reason(lm, tp: int) -> str | None:
    """Why ``lm`` cannot be split ``tp`` ways by :func:`apply_tp`, or None: not built like Llama (separate q/k/v,
    o, gate/up, down projections; fused projections included), or ``tp`` does not divide its heads."""
    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.models.lm_shape import decoder_layers

    names = {n.rsplit(".", 1)[-1] for n, _ in decoder_layers(lm)[0].named_modules()}
    missing = [n for n in (*COLUMN, *ROW) if n not in names]
    if missing:
        return f"tensor parallelism needs a Llama-family model ({type(lm).__name__} has no {missing[0]})"
    cfg = lm.config
    heads = cfg.num_attention_heads
    return ParallelDims(tp=tp).tp_reason(heads, getattr(cfg, "num_key_value_heads", None) or heads)


def layer_plan() -> dict[str, int]:
    """The plan of one decoder layer: its projections' module names -> the weight dimension split (0: output rows,
    column-parallel; 1: input columns, row-parallel)."""
    plan = {f"{'self_attn' if n in ('q_proj', 'k_proj', 'v_proj') else 'mlp'}.{n}": 0 for n in COLUMN}
    return {**plan, "self_attn.o_proj": 1, "mlp.down_proj": 1}


def apply_tp(lm, mesh) -> dict[str, Any]:
    """Split ``lm`` in place over the 1-D ``mesh`` (see the module docstring); the row's columns.

    Returns:
        ``{"tp_degree", "tp_sharded_head"}``: ranks the model is split over, whether the LM head was split.
    Raises:
        Unsupported: :func:`tp_reason`.
    """
    from accelbench.core.errors import Unsupported
    from accelbench.models.lm_shape import decoder_layers

    tp, rank, group = mesh.size(), mesh.get_local_rank(), mesh.get_group().group_name
    why = tp_reason(lm, tp)
    if why:
        raise Unsupported(why)
    for layer in decoder_layers(lm):
        for path, dim in layer_plan().items():
            linear = layer.get_submodule(path)
            _keep_shard(linear, dim, rank, tp)
            if dim == 1:
                linear.register_forward_hook(_summed(group))
        attn = layer.self_attn
        for attr in ("num_heads", "num_key_value_heads"):  # families that reshape by an attribute, not by -1
            if isinstance(getattr(attn, attr, None), int):
                setattr(attn, attr, getattr(attn, attr) // tp)
    head, embed = lm.get_output_embeddings(), lm.get_input_embeddings()
    split_head = head is not None and head.weight is not embed.weight and head.weight.shape[0] % tp == 0
    if split_head:
        _keep_shard(head, 0, rank, tp)
        head.register_forward_hook(_gathered(group, tp))
    return {"tp_degree": tp, "tp_sharded_head": split_head}


def _keep_shard(linear, dim: int, rank: int, tp: int) -> None:
    """Replace ``linear``'s weight (and bias) by this rank's slice along ``dim`` (0: output rows, with the bias's
    slice; 1: input columns, the bias kept by rank 0 only), plain parameters marked with the ranks they are split
    over and their slice. A meta-device weight gets a meta-device slice (no data:
    :func:`accelbench.models.lm_load.materialize` draws it)."""
    import torch

    from accelbench.models.lm_shape import SHARD_SLICE, SHARDS

    def part(t, along: int):
        p = torch.nn.Parameter(t.detach().chunk(tp, along)[rank].clone(), requires_grad=False)
        setattr(p, SHARDS, tp)
        setattr(p, SHARD_SLICE, (along, rank))
        return p

    linear.weight = part(linear.weight, dim)
    if linear.bias is not None:
        if dim == 0:
            linear.bias = part(linear.bias, 0)
        elif rank:
            with torch.no_grad():
                linear.bias.zero_()
    linear.out_features, linear.in_features = linear.weight.shape


def _summed(group: str):
    """A forward hook that all-reduces (sums) a row-parallel linear's partial output over the process group named
    ``group``."""
    import torch

    ops = torch.ops._c10d_functional

    def hook(module, args, out):
        return ops.wait_tensor(ops.all_reduce(out, "sum", group))

    return hook


def _gathered(group: str, tp: int):
    """A forward hook that all-gathers a vocabulary-split head's logits ``(..., vocab / tp)`` into ``(..., vocab)``
    over the ``tp`` ranks of the process group named ``group``, rank ``r``'s slice at ``r x vocab / tp``."""
    import torch

    ops = torch.ops._c10d_functional

    def hook(module, args, out):
        every = ops.wait_tensor(ops.all_gather_into_tensor(out.contiguous(), tp, group))  # (tp x d0, ...)
        every = every.view(tp, *out.shape)
        return every.movedim(0, -2).reshape(*out.shape[:-1], tp * out.shape[-1])

    return hook


def degree(lm) -> int:
    """GPUs ``lm`` is split over by :func:`apply_tp`: the ranks of its first split weight, a parameter or (weight-only
    quantized: :mod:`accelbench.quant.weight_only`) a buffer (1: not split)."""
    from itertools import chain

    from accelbench.models.lm_shape import SHARDS

    for t in chain(lm.parameters(), lm.buffers()):
        if getattr(t, SHARDS, 1) > 1:
            return getattr(t, SHARDS)
    return 1
