"""Pure maths of text generation: what a prefill and a decode step must compute and read, and the figures
derived from measured times. No torch import; every function is tested with exact numbers.

Terms (vLLM's benchmark, MLPerf's Llama harness, Databricks' "LLM inference performance engineering"):

- **prefill**: one forward pass over the whole prompt (``batch x prompt_len`` tokens), which fills the KV cache
  and yields the first output token. **time to first token (TTFT)** is its wall time plus sampling that token.
- **decode step**: one forward pass over one new token per sequence, reading the KV cache. **time per output
  token (TPOT)** is one step's time; the inter-token latencies are the gaps between consecutive tokens.
- **MBU** (model bandwidth utilisation): bytes a decode step must read (every weight once, plus the filled part
  of the KV cache) per step time, over the memory ceiling (Databricks 2023, "LLM Inference Performance
  Engineering: Best Practices", MBU = achieved / peak memory bandwidth, achieved = (model bytes + KV cache
  bytes) / TPOT).
- **MFU** (model FLOP utilisation): FLOPs a prefill must do per prefill time, over the precision's compute
  ceiling (Chowdhery et al. 2022, "PaLM", appendix B).

Counting rules (documented here once, asked by everything else):

- matmul FLOPs of a linear layer are ``2 x in x out`` per token (one multiply-add = 2 FLOPs);
- the LM head runs on the last prompt token only in a prefill (``logits_to_keep=1``, what ``generate`` does);
- causal attention over ``n`` positions does ``QK^T`` and ``AV`` for query ``i`` over ``i + 1`` keys:
  ``2 x heads x head_dim x n(n+1)`` FLOPs a layer (half of PaLM's full ``T x T`` count, as FlashAttention
  counts a causal pass);
- a decode step at context ``c`` (positions in the cache, the new one included) does ``4 x heads x head_dim x c``
  attention FLOPs a layer and reads ``c`` positions of keys and values;
- the KV cache holds ``2 x layers x kv_heads x head_dim`` values a token (keys and values; grouped-query
  attention shares them over ``heads / kv_heads`` query heads: Ainslie et al. 2023, "GQA").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """What the counts of a decoder-only transformer need: this module's inference counts and the training counts
    of :mod:`accelbench.training.lm_maths` (one shape, :func:`accelbench.models.lm_shape.shape_of` of a built
    model).

    Attributes:
        layers: decoder blocks.
        heads / kv_heads / head_dim: query heads, key-value heads, dimension of one head.
        hidden / vocab: the hidden size and the vocabulary size.
        params: every parameter once (a tied LM head once).
        embedding_params: the input embedding table (``vocab x hidden``).
        tied_head: the LM head is the embedding table.
        matmul_params: weights of every linear layer a token passes through (attention projections, MLP),
            the LM head excluded (counted per its own rule).
        lm_head_params: weights of the LM head (``vocab x hidden``; a tied head counts here, not again).
        weight_bytes: bytes a decode step reads for the weights (every parameter once, but the embedding table
            of an untied model, of which a step reads one row a sequence), as stored (quantized weights: their
            int8 or fp8 bytes plus their scales); over every GPU of a tensor-parallel model.
        kv_bytes_per_value: bytes of one cached key or value element (2 for bf16/fp16).
    """

    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    vocab: int
    params: int
    embedding_params: int
    tied_head: bool
    matmul_params: int
    lm_head_params: int
    weight_bytes: int
    kv_bytes_per_value: int = 2

    @property
    def kv_bytes_per_token(self) -> int:
        """KV-cache bytes of one token of one sequence: ``2 x layers x kv_heads x head_dim x bytes``."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_value

    @property
    def non_embedding_params(self) -> int:
        """torchtitan's ``N``: the parameters less the input embedding table, a tied LM head counted (it is the
        output projection's matmul)."""
        return self.params - self.embedding_params + (self.embedding_params if self.tied_head else 0)


def kv_cache_bytes(shape: Shape, batch_size: int, tokens: int) -> int:
    """Bytes of a KV cache holding ``tokens`` positions of ``batch_size`` sequences."""
    return batch_size * tokens * shape.kv_bytes_per_token


def attention_flops(shape: Shape, queries_from: int, queries_to: int) -> int:
    """Causal attention FLOPs (``QK^T`` and ``AV``) of one sequence for query positions
    ``queries_from .. queries_to - 1`` (query ``i`` attends to ``i + 1`` positions), all layers.

    ``sum_{i} 2 (QK^T) + 2 (AV) x heads x head_dim x (i + 1)`` per layer.
    """
    keys = sum(range(queries_from + 1, queries_to + 1))  # sum of (i + 1) over the query positions
    return 4 * shape.layers * shape.heads * shape.head_dim * keys


def prefill_flops(shape: Shape, batch_size: int, prompt_len: int) -> int:
    """FLOPs of one prefill: the linear layers on every prompt token, the LM head on the last, causal attention.

    Raises:
        ValueError: a batch size or prompt length below 1.
    """
    if batch_size < 1 or prompt_len < 1:
        raise ValueError("batch_size and prompt_len must be >= 1")
    linear = 2 * shape.matmul_params * prompt_len + 2 * shape.lm_head_params
    return batch_size * (linear + attention_flops(shape, 0, prompt_len))


def decode_flops(shape: Shape, batch_size: int, context: int) -> int:
    """FLOPs of one decode step with ``context`` positions in the cache (the new token's included)."""
    linear = 2 * (shape.matmul_params + shape.lm_head_params)
    return batch_size * (linear + attention_flops(shape, context - 1, context))


def decode_bytes(shape: Shape, batch_size: int, context: int) -> int:
    """Bytes one decode step must read: the weights once, and ``context`` cached positions a sequence."""
    return shape.weight_bytes + kv_cache_bytes(shape, batch_size, context)


def mean_decode_context(prompt_len: int, new_tokens: int) -> float:
    """Mean context of the ``new_tokens - 1`` decode steps after a prefill of ``prompt_len`` tokens: step ``k``
    (1-based) feeds the k-th generated token at position ``prompt_len + k - 1`` and attends over
    ``prompt_len + k`` positions, so the mean is ``prompt_len + new_tokens / 2``.

    Raises:
        ValueError: fewer than 2 new tokens (no decode step).
    """
    if new_tokens < 2:
        raise ValueError("a decode step needs new_tokens >= 2")
    return prompt_len + new_tokens / 2


def mean_decode_bytes(shape: Shape, batch_size: int, prompt_len: int, new_tokens: int) -> float:
    """Mean bytes a decode step of a generation must read (the KV term at the mean context)."""
    return shape.weight_bytes + batch_size * shape.kv_bytes_per_token * mean_decode_context(prompt_len, new_tokens)


def mean_decode_flops(shape: Shape, batch_size: int, prompt_len: int, new_tokens: int) -> float:
    """Mean FLOPs of a decode step of a generation (attention at the mean context)."""
    linear = 2 * (shape.matmul_params + shape.lm_head_params)
    attn = 4 * shape.layers * shape.heads * shape.head_dim * mean_decode_context(prompt_len, new_tokens)
    return batch_size * (linear + attn)


def utilisation(work: float, seconds: float | None, ceiling: float | None) -> float | None:
    """``work / seconds / ceiling`` (MBU with bytes and bytes/s, MFU with FLOPs and FLOP/s), or None when a
    time or a ceiling is missing or not positive."""
    if not seconds or not ceiling or seconds <= 0 or ceiling <= 0:
        return None
    return work / seconds / ceiling


@dataclass(frozen=True, kw_only=True, slots=True)
class Rates:
    """Throughputs of one generation case (tokens of all sequences of the batch)."""

    prefill_tokens_per_s: float | None
    decode_tokens_per_s: float | None
    output_tokens_per_s: float | None


def rates(
    batch_size: int, prompt_len: int, new_tokens: int, ttft_s: float | None, tpot_s: float | None, e2e_s: float | None
) -> Rates:
    """Prefill tokens/s (``B x P / TTFT``), decode tokens/s (``B / TPOT``: each step makes one token a
    sequence) and output tokens/s over the whole generation (``B x N / end-to-end``, prefill included). Given the
    mean times (tokens over the time they took, as vLLM's benchmark and MLPerf count throughput), output tokens/s is
    at most decode tokens/s whenever ``TTFT >= TPOT`` and the end-to-end time holds ``TTFT + (N - 1) x TPOT``."""

    def div(a: float, b: float | None) -> float | None:
        return a / b if b and b > 0 else None

    return Rates(
        prefill_tokens_per_s=div(batch_size * prompt_len, ttft_s),
        decode_tokens_per_s=div(batch_size, tpot_s),
        output_tokens_per_s=div(batch_size * new_tokens, e2e_s),
    )
