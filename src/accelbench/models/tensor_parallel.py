"""Tensor parallelism of a Llama-family ``transformers`` causal LM, with PyTorch's own
``torch.distributed.tensor.parallel`` (``parallelize_module``): Megatron-LM's split (Shoeybi et al. 2019, s. 3), the
plan torchtitan applies to Llama (``torchtitan/models/llama3/infra/parallelize.py``, ``apply_tp``).

Per decoder layer: ``q_proj``, ``k_proj``, ``v_proj`` and the MLP's ``gate_proj`` and ``up_proj`` are column-parallel
(``ColwiseParallel``: each rank computes its own heads and its own slice of the MLP's hidden units, no
communication), ``o_proj`` and ``down_proj`` row-parallel (``RowwiseParallel``: partial sums all-reduced), so a layer
costs two all-reduces of ``batch x tokens x hidden`` values. Each rank holds ``heads / tp`` query and ``kv_heads / tp``
key-value heads: the static KV cache, allocated from the first keys it is given (``transformers``' ``StaticLayer``),
holds this rank's heads only. Attention modules that keep head counts as attributes get theirs divided; the config
keeps the whole model's (the counts of :mod:`accelbench.core.lm_analytic` are the whole model's).

The LM head, read whole by every decode step, is column-parallel over the vocabulary (its logits all-gathered): it
pays, a step reads ``1 / tp`` of it a GPU. The input embedding, of which a step reads one row a token, stays
replicated: sharding it would save memory only, for an all-reduce a forward pass. A tied head (the embedding table)
stays replicated too. Every module and activation outside the projections is replicated; the projections' outputs
are plain tensors (``use_local_output``), so the model's own reshapes (``view(..., -1, head_dim)``) see this rank's
heads.

Random weights of a large model are never built whole: the model is built on the ``meta`` device, sharded there,
then each rank allocates its shards on its GPU (``to_empty``) and draws them (:func:`materialize`).
"""

from __future__ import annotations

import inspect
import zlib
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


def layer_plan() -> dict[str, Any]:
    """The plan of one decoder layer: its projections' module names -> ``ColwiseParallel`` / ``RowwiseParallel``."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    plan: dict[str, Any] = {}
    for name in COLUMN:
        plan[f"{'self_attn' if name.endswith(('q_proj', 'k_proj', 'v_proj')) else 'mlp'}.{name}"] = ColwiseParallel()
    plan["self_attn.o_proj"] = RowwiseParallel()
    plan["mlp.down_proj"] = RowwiseParallel()
    return plan


def apply_tp(lm, mesh) -> dict[str, Any]:
    """Split ``lm`` in place over the 1-D ``mesh`` (see the module docstring); the row's columns.

    Returns:
        ``{"tp_degree", "tp_sharded_head"}``: ranks the model is split over, whether the LM head was split.
    Raises:
        Unsupported: :func:`tp_reason`.
    """
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, parallelize_module

    from accelbench.core.errors import Unsupported
    from accelbench.models.lm_shape import decoder_layers

    tp = mesh.size()
    why = tp_reason(lm, tp)
    if why:
        raise Unsupported(why)
    # weights on the meta device hold no data: each rank splits its own, no scatter from rank 0 (torch >= 2.7)
    meta = next(lm.parameters()).is_meta and "src_data_rank" in inspect.signature(parallelize_module).parameters
    kw = {"src_data_rank": None} if meta else {}
    for layer in decoder_layers(lm):
        parallelize_module(layer, mesh, layer_plan(), **kw)
        attn = layer.self_attn
        for attr in ("num_heads", "num_key_value_heads"):  # families that reshape by an attribute, not by -1
            if isinstance(getattr(attn, attr, None), int):
                setattr(attn, attr, getattr(attn, attr) // tp)
    head, embed = lm.get_output_embeddings(), lm.get_input_embeddings()
    split_head = head is not None and head.weight is not embed.weight and head.weight.shape[0] % tp == 0
    if split_head:
        parallelize_module(head, mesh, ColwiseParallel(output_layouts=Replicate()), **kw)
    return {"tp_degree": tp, "tp_sharded_head": split_head}


def degree(lm) -> int:
    """GPUs ``lm`` is split over by :func:`apply_tp`: the mesh of its first sharded weight (1: not split)."""
    from torch.distributed.tensor import DTensor

    for m in lm.modules():
        w = getattr(m, "weight", None)
        if isinstance(w, DTensor):
            return w.device_mesh.size()
    return 1


def materialize(lm, device, seed: int) -> None:
    """Allocate ``lm``'s (meta-device, sharded) weights on ``device`` and draw them there: each rank only its shards.

    Weights are drawn as ``transformers`` initialises a Llama (``normal(0, initializer_range)`` for linears and
    embeddings, ones for norms, zeros for biases), each tensor from its own generator seeded by ``seed`` and its
    name (and, for a shard, the rank): replicated tensors are the same on every rank, as the split model needs.
    Rotary-embedding buffers, computed at construction, are rebuilt on ``device``.
    """
    import torch
    from torch.distributed.tensor import DTensor

    lm.to_empty(device=device)
    std = float(getattr(lm.config, "initializer_range", 0.02))
    with torch.no_grad():
        for name, p in lm.named_parameters():
            local = p.to_local() if isinstance(p, DTensor) else p
            shard = isinstance(p, DTensor) and any(pl.is_shard() for pl in p.placements)
            rank = torch.distributed.get_rank() if shard else 0
            g = torch.Generator(device=local.device).manual_seed(seed * 1_000_003 + zlib.crc32(name.encode()) + rank)
            if name.endswith("bias"):
                local.zero_()
            elif local.dim() == 1:  # a norm's scale
                local.fill_(1.0)
            else:
                local.normal_(0.0, std, generator=g)
    _rebuild_rotary(lm, device)


def _rebuild_rotary(lm, device) -> None:
    """Replace every rotary-embedding module (its ``inv_freq`` buffers were left empty by ``to_empty``) by a new one
    built on ``device`` from its config."""
    import torch

    for parent in list(lm.modules()):
        for child_name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                with torch.device(device):
                    setattr(parent, child_name, type(child)(child.config))
