"""Fused projections: one matmul for q/k/v and one for gate/up per decoder layer (gpt-fast's ``wqkv`` and ``w1w3``;
vLLM's ``QKVParallelLinear`` / ``MergedColumnParallelLinear``).

At one token a sequence a decode step is a chain of matrix-vector products; fusing the three attention input
projections and the two MLP input projections makes 2 larger kernels out of 5, which read the same bytes with
fewer launches and fewer small, poorly-occupied matrices (measured faster on Hopper GPUs for a Llama-3.1-8B shape;
see docs/results.md, language models).

Applies to decoder layers built like Llama's (Llama, Mistral, Qwen2 in ``transformers``): ``self_attn`` with
``q_proj``, ``k_proj``, ``v_proj``, ``o_proj`` and ``mlp`` with ``gate_proj``, ``up_proj``, ``down_proj``, ``act_fn``.
The weights are concatenated, so the fused model computes the same function; in float32 its logits equal the
plain model's to rounding (tested), in bf16 they differ by the summation order of the larger matmuls.

A model split by tensor parallelism (:mod:`accelbench.models.tensor_parallel`) is fused after the split, each rank
its own shards: q/k/v and gate/up are column-parallel, so a rank's shards are its own heads' q/k/v rows and its own
slice of the MLP's hidden units, and their concatenation is vLLM's ``QKVParallelLinear`` /
``MergedColumnParallelLinear`` shard (the reshape by ``head_dim`` finds the rank's heads); the row-parallel o_proj
and down_proj, with their all-reduces, are not touched. The fused weight keeps the shards' mark of the ranks it is
split over, so parameter counts stay the whole model's.

A decode step's attention (one query token a sequence) of a grouped-query model (Llama-3's 8 KV heads for 32 query
heads) attends over the cache as it is stored, never copying it once per query head group (transformers'
``repeat_kv``, which its SDPA path runs inside ``torch.compile`` whenever a mask is passed). ``decode_attention``:

| choice | one decode step's attention |
| --- | --- |
| ``gqa`` (default) | ``scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)``, as gpt-fast (torch >= 2.5; else ``pack``) |
| ``pack`` | the query heads of a KV head packed as its queries, ``(B, H, 1, D) -> (B, KVH, H / KVH, D)``, one SDPA call |
| ``transformers`` | the model family's own attention function |

On an H200 with the Llama-3.1-8B shape at batch 1 (bf16, compiled ``reduce-overhead``) ``gqa`` was the fastest of
the three and ``transformers`` the slowest (``benchmarks/llm_gptfast.py`` times them beside a from-scratch gpt-fast
decoder; docs/results.md).
"""

from __future__ import annotations

import sys
import types


def fusable(model) -> str | None:
    """Why ``model``'s projections cannot be fused, or None when they can (or its layers are fused already)."""
    layers = getattr(getattr(model, "model", None), "layers", None)
    if not layers:
        return f"{type(model).__name__} has no model.layers (fused projections need a Llama-like decoder)"
    return layer_fusable(layers[0], type(model).__name__)


def layer_fusable(layer, owner: str = "the model") -> str | None:
    """Why one decoder layer's projections cannot be fused, or None when they can (or are fused already)."""
    at, mlp = getattr(layer, "self_attn", None), getattr(layer, "mlp", None)
    if _is_fused(layer):
        return None
    if not all(hasattr(at, n) for n in ("q_proj", "k_proj", "v_proj", "o_proj", "head_dim", "layer_idx")):
        return f"{owner}'s attention has no q_proj/k_proj/v_proj (another layout)"
    if not all(hasattr(mlp, n) for n in ("gate_proj", "up_proj", "down_proj", "act_fn")):
        return f"{owner}'s MLP is not a gated (gate_proj/up_proj) MLP"
    return None


def _is_fused(layer) -> bool:
    return hasattr(getattr(layer, "self_attn", None), "qkv_proj") and hasattr(
        getattr(layer, "mlp", None), "gate_up_proj"
    )


def _concat(linears):
    import torch

    w = torch.cat([lin.weight.data for lin in linears])
    has_bias = linears[0].bias is not None
    out = torch.nn.Linear(w.shape[1], w.shape[0], bias=has_bias, device=w.device, dtype=w.dtype)
    out.weight.data.copy_(w)
    out.weight.__dict__.update(vars(linears[0].weight))  # the weight's marks (a tensor-parallel shard's ranks) kept
    if has_bias:
        out.bias.data.copy_(torch.cat([lin.bias.data for lin in linears]))
        out.bias.__dict__.update(vars(linears[0].bias))
    return out.requires_grad_(False)


def _attention_forward(
    self, hidden_states, position_embeddings=None, attention_mask=None, past_key_values=None, cache=None, **kwargs
):
    """The attention forward of ``transformers``' Llama-like layers with q/k/v as one matmul. The KV cache comes as
    ``cache`` in the ``transformers`` releases that renamed it, as ``past_key_values`` before (5.17)."""
    cache = cache if cache is not None else past_key_values
    hf = sys.modules[type(self).__module__]  # the model family's own rotary and attention functions
    input_shape = hidden_states.shape[:-1]
    hidden_shape = (*input_shape, -1, self.head_dim)
    q, k, v = self.qkv_proj(hidden_states).split(self.qkv_sizes, dim=-1)
    q, k, v = (t.view(hidden_shape).transpose(1, 2) for t in (q, k, v))
    cos, sin = position_embeddings
    q, k = hf.apply_rotary_pos_emb(q, k, cos, sin)
    if cache is not None:
        k, v = cache.update(k, v, self.layer_idx)
    if _grouped_decode(self, q, k, attention_mask):
        return self.o_proj(_decode_attention(self.decode_attention, q, k, v, attention_mask, self.scaling)), None
    attend = hf.ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, hf.eager_attention_forward)
    window = getattr(self, "sliding_window", getattr(self.config, "sliding_window", None))
    out, weights = attend(
        self, q, k, v, attention_mask, dropout=0.0, scaling=self.scaling, sliding_window=window, **kwargs
    )
    return self.o_proj(out.reshape(*input_shape, -1).contiguous()), weights


DECODE_ATTENTION = ("gqa", "pack", "transformers")


def _grouped_decode(self, q, k, mask) -> bool:
    """A decode step of a grouped-query model under SDPA with a mask shared by the heads, and a choice other than
    the model's own function: accelbench's decode attention runs."""
    return (
        self.decode_attention != "transformers"
        and q.shape[2] == 1
        and k.shape[1] < q.shape[1]
        and self.config._attn_implementation == "sdpa"
        and (mask is None or mask.shape[1] == 1)
    )


def _decode_attention(choice: str, q, k, v, mask, scaling):
    """One query token a sequence: ``q`` ``(B, H, 1, D)``, the cache's ``k``/``v`` ``(B, KVH, L, D)``, ``mask``
    ``(B, 1, 1, L)`` (or None); the output ``(B, 1, H x D)`` for ``o_proj``. Query head ``h`` attends to KV head
    ``h // (H / KVH)``, the grouping of ``repeat_kv`` (Ainslie et al. 2023, "GQA")."""
    import torch.nn.functional as F

    b, h, _, d = q.shape
    if choice == "gqa" and _HAS_ENABLE_GQA:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).reshape(b, 1, h * d)
    grouped = q.reshape(b, k.shape[1], h // k.shape[1], d)
    return F.scaled_dot_product_attention(grouped, k, v, attn_mask=mask, scale=scaling).reshape(b, 1, h * d)


def _has_enable_gqa() -> bool:
    """``scaled_dot_product_attention`` takes ``enable_gqa`` (torch >= 2.5: its docstring's signature says so)."""
    import torch.nn.functional as F

    return "enable_gqa" in (F.scaled_dot_product_attention.__doc__ or "")


_HAS_ENABLE_GQA = _has_enable_gqa()


def _mlp_forward(self, x):
    gate, up = self.gate_up_proj(x).split(self.gate_up_sizes, dim=-1)
    return self.down_proj(self.act_fn(gate) * up)


def fuse_projections(model, decode_attention: str = "gqa") -> int:
    """Fuse q/k/v and gate/up of every decoder layer of ``model`` in place (see the module docstring); layers fused
    already (:func:`fuse_layer` as they were loaded) are left.

    Args:
        decode_attention: how a decode step of a grouped-query model attends: ``gqa``, ``pack`` or
            ``transformers`` (see the module docstring).

    Returns:
        The number of the model's fused layers.
    Raises:
        Unsupported: the model is not built like Llama (:func:`fusable` says why; a case asking it is an
            ``unsupported`` row). ValueError: an unknown ``decode_attention``.
    """
    from accelbench.core.errors import Unsupported

    reason = fusable(model)
    if reason:
        raise Unsupported(f"fused projections: {reason}")
    for layer in model.model.layers:
        fuse_layer(layer, decode_attention)
    return len(model.model.layers)


def fuse_layer(layer, decode_attention: str = "gqa") -> None:
    """Fuse one decoder layer's q/k/v and gate/up in place (nothing when it is fused already).

    Raises:
        Unsupported: the layer is not built like Llama's (:func:`layer_fusable`). ValueError: an unknown
            ``decode_attention``.
    """
    from accelbench.core.errors import Unsupported

    reason = layer_fusable(layer)
    if reason:
        raise Unsupported(f"fused projections: {reason}")
    if decode_attention not in DECODE_ATTENTION:
        raise ValueError(f"decode_attention {decode_attention!r}: one of {', '.join(DECODE_ATTENTION)}")
    if _is_fused(layer):
        return
    at, mlp = layer.self_attn, layer.mlp
    at.qkv_sizes = [at.q_proj.out_features, at.k_proj.out_features, at.v_proj.out_features]
    at.qkv_proj = _concat([at.q_proj, at.k_proj, at.v_proj])
    del at.q_proj, at.k_proj, at.v_proj
    at.decode_attention = decode_attention
    at.forward = types.MethodType(_attention_forward, at)
    mlp.gate_up_sizes = [mlp.gate_proj.out_features, mlp.up_proj.out_features]
    mlp.gate_up_proj = _concat([mlp.gate_proj, mlp.up_proj])
    del mlp.gate_proj, mlp.up_proj
    mlp.forward = types.MethodType(_mlp_forward, mlp)
