"""The :class:`~accelbench.core.lm_analytic.Shape` of a built ``transformers`` causal LM: layer and head
counts from its config, parameter counts and weight bytes from its modules (quantized linears counted as stored);
:func:`meta_shape` of a model name, built on the ``meta`` device.
"""

from __future__ import annotations

from accelbench.core.lm_analytic import Shape

# set on a tensor-parallel shard (a plain parameter: accelbench.models.tensor_parallel) to the ranks the whole
# tensor is split over
SHARDS = "tp_shards"
# set beside it to ``(dim, rank)``: the shard is the whole tensor's ``chunk(SHARDS, dim)[rank]`` (what lets random
# weights be drawn whole and sliced, so a split model's weights are the whole model's: accelbench.models.lm_load)
SHARD_SLICE = "tp_shard_slice"


def _config_int(config, *names: str) -> int | None:
    for n in names:
        v = getattr(config, n, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def _is_matmul(module) -> bool:
    from accelbench.quant.weight_only import WeightOnlyLinear

    kind = type(module).__name__
    return kind in ("Linear", "Conv1D") or isinstance(module, WeightOnlyLinear)  # Conv1D: GPT-2's linear layer


def stored_bytes(t) -> int:
    """Bytes ``t`` holds on its device: for a tensor subclass that wraps others (torchao's int8 and float8 weights:
    8-bit data, scales, zero points), the sum of its inner tensors (``__tensor_flatten__``), not its logical
    ``numel() x element_size()`` (the dtype it stands for: bf16's 2 bytes)."""
    import torch
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass

    if hasattr(t, "to_local"):  # a DTensor (an FSDP2 shard): the bytes of this process's shard
        return stored_bytes(t.to_local())
    if is_traceable_wrapper_subclass(t):
        inner = (getattr(t, name) for name in t.__tensor_flatten__()[0])
        return sum(stored_bytes(x) for x in inner if isinstance(x, torch.Tensor))
    return t.numel() * t.element_size()


def whole_numel(t) -> int:
    """Elements of the whole tensor ``t`` is part of: ``t.numel()`` times the ranks a tensor-parallel shard is split
    over (its :data:`SHARDS` mark; 1 unmarked). A DTensor's ``numel()`` is already the whole tensor's."""
    return t.numel() * getattr(t, SHARDS, 1)


def shape_of(model, kv_dtype=None) -> Shape:
    """Counts of ``model`` (see :class:`Shape`); ``kv_dtype`` is the KV cache's torch dtype (the activations'; None:
    the dtype of the model's parameters).

    Parameter counts are the whole model's (a tensor-parallel shard's parameters count as the tensor they shard);
    weight bytes are what this process holds (a shard's bytes: multiply by the tensor-parallel degree for every
    GPU's). Weight bytes count each distinct tensor once (a tied LM head and embedding table once, as the LM head), every
    parameter and weight buffer (a quantized linear's int8 / fp8 weight and its scales) but the embedding tables
    of which a decode step reads one row a sequence (token, and GPT-2's position, embeddings).

    Raises:
        ValueError: the config names no layer or head count.
    """
    import torch

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    layers = _config_int(config, "num_hidden_layers", "n_layer")
    heads = _config_int(config, "num_attention_heads", "n_head")
    hidden = _config_int(config, "hidden_size", "n_embd")
    if not (layers and heads and hidden):
        raise ValueError(f"{type(model).__name__}'s config names no layer, head or hidden size")
    kv_heads = _config_int(config, "num_key_value_heads") or heads
    head_dim = _config_int(config, "head_dim") or hidden // heads
    head = model.get_output_embeddings()
    head_ids = {id(t) for t in (getattr(head, "weight", None),) if t is not None}
    embed = model.get_input_embeddings().weight
    matmul = sum(whole_numel(m.weight) for m in model.modules() if _is_matmul(m) and m is not head)
    embedding_ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)} - head_ids
    seen, weight_bytes = set(), 0
    for t in [*model.parameters(), *(b for n, b in model.named_buffers() if n.endswith(("weight", "scale")))]:
        if id(t) in seen or id(t) in embedding_ids:  # tied weights are one Parameter object
            continue
        seen.add(id(t))
        weight_bytes += stored_bytes(t)
    kv_dtype = kv_dtype or next(model.parameters()).dtype
    return Shape(
        layers=layers,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        hidden=hidden,
        vocab=_config_int(config, "vocab_size") or embed.shape[0],
        params=sum(whole_numel(p) for p in model.parameters()),
        embedding_params=whole_numel(embed),
        tied_head=head is not None and head.weight is embed,
        matmul_params=matmul,
        lm_head_params=whole_numel(head.weight),
        weight_bytes=weight_bytes,
        kv_bytes_per_value=torch.tensor([], dtype=kv_dtype).element_size(),
    )


def meta_shape(name: str) -> Shape:
    """:func:`shape_of` the ``hf:`` model ``name`` built on the ``meta`` device (no memory, no weights read)."""
    import torch

    from accelbench.models import hf

    transformers = hf.require_transformers()
    path = hf.checkpoint_dir(name)
    config = (
        hf.architecture_config(name[len(hf.PREFIX) :])
        if path is None
        else transformers.AutoConfig.from_pretrained(path, trust_remote_code=False)
    )
    with torch.device("meta"):
        lm = transformers.AutoModelForCausalLM.from_config(config)
    return shape_of(lm)


def decoder_layers(lm) -> list:
    """The decoder blocks of a ``transformers`` causal LM: the ``nn.ModuleList`` holding ``num_hidden_layers``
    modules (``model.layers`` of Llama, Qwen2 and Mistral, ``transformer.h`` of GPT-2).

    Raises:
        ValueError: no such list.
    """
    import torch

    n = lm.config.num_hidden_layers
    for m in lm.modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) == n:
            return list(m)
    raise ValueError(f"{type(lm).__name__}: no list of its {n} decoder layers")
