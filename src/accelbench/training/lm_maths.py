"""Pure maths of language-model training: FLOPs a token, the memory a step needs, token windows. No torch import;
every function is tested with exact numbers.

FLOPs a token (the MFU numerator): torchtitan's count (``torchtitan/models/utils.py``, ``get_num_flop_per_token``;
in earlier releases ``torchtitan/utils.py``)::

    6 x N + 12 x L x H x Q x T

with ``N`` the parameters without the input embedding table (torchtitan's ``get_num_params(exclude_embedding=True)``;
a tied LM head is the output projection's matmul and counts, as torchtitan's untied ``output`` layer does), ``L``
layers, ``H`` query heads, ``Q`` the head dimension and ``T`` the sequence length. ``6 N``: a multiply-add is 2
FLOPs, the backward pass does twice the forward's matmuls (Kaplan et al. 2020, "Scaling Laws", s. 2.1). ``12 L H Q
T``: the attention scores and the weighted sum (2 matmuls forward, 4 backward, 2 FLOPs a multiply-add), the causal
mask's saved half not subtracted and the recomputation of FlashAttention's backward not added. PaLM's appendix B
(Chowdhery et al. 2022) counts the same ``6 N + 12 L H Q T``; its ``N`` includes the embedding table. Using
torchtitan's ``N`` makes accelbench's MFU comparable with torchtitan's logs.

Memory a step needs (the out-of-memory check before a case is built, on a CPU where exhausting memory kills the
process instead of raising): weights, gradients and AdamW's two moments (each the parameter count times the bytes
of the parameters' dtype; FSDP keeps ``1 / world`` of each on a rank); activations per decoder layer
``s b h (34 + 5 a s / h)`` bytes in 16-bit (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models", eq. 1; twice that in fp32), a checkpointed layer keeping only its input ``s b h`` values; the
logits ``b s V`` in the compute dtype plus a float32 copy and its gradient; and a margin of 10 % plus 256 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelbench.core.lm_analytic import Shape

MARGIN_FRACTION, MARGIN_BYTES = 0.10, 256 << 20
CHECKPOINTING = ("none", "selective", "full")


def flops_per_token(shape: Shape, seq_len: int) -> int:
    """Training FLOPs a token (forward and backward): ``6 N + 12 L H Q T`` (see the module docstring).

    Raises:
        ValueError: a sequence length below 1.
    """
    if seq_len < 1:
        raise ValueError("seq_len must be >= 1")
    return 6 * shape.non_embedding_params + 12 * shape.layers * shape.heads * shape.head_dim * seq_len


def checkpointed_layers(layers: int, rule: str) -> list[int]:
    """The decoder layers (0-based) whose activations are recomputed in the backward pass.

    ``full``: every layer (Hugging Face's ``gradient_checkpointing_enable``); ``selective``: every second layer,
    1, 3, 5, ... (torchtitan's layer-selective activation checkpointing with ``selective_ac_option = 2``, which wraps
    the blocks whose 1-based count is even); ``none``: no layer.

    Raises:
        ValueError: an unknown rule.
    """
    if rule not in CHECKPOINTING:
        raise ValueError(f"activation checkpointing {rule!r}: use one of {', '.join(CHECKPOINTING)}")
    if rule == "full":
        return list(range(layers))
    if rule == "selective":
        return list(range(1, layers, 2))
    return []


@dataclass(frozen=True, kw_only=True, slots=True)
class StepMemory:
    """Estimated peak bytes of one training step on one rank (see the module docstring)."""

    state_bytes: int  # weights, gradients, optimizer state
    activation_bytes: int
    logits_bytes: int
    margin_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.state_bytes + self.activation_bytes + self.logits_bytes + self.margin_bytes


def step_memory(
    shape: Shape,
    *,
    batch_size: int,
    seq_len: int,
    param_bytes: int,
    activation_bytes: int,
    checkpointing: str = "none",
    shards: int = 1,
) -> StepMemory:
    """Peak bytes of a training step (see the module docstring for each term and its source).

    Args:
        param_bytes: bytes of a parameter (4 for float32 master weights, 2 for a bf16 model).
        activation_bytes: bytes of an activation (2 under 16-bit autocast or a 16-bit model, else 4).
        shards: ranks FSDP shards the weights, gradients and optimizer state over (1: not sharded).
    """
    state = 4 * shape.params * param_bytes // shards  # weights, gradients, two AdamW moments
    full_layer = seq_len * batch_size * shape.hidden * (34 + 5 * shape.heads * seq_len // shape.hidden)
    full_layer = full_layer * activation_bytes // 2
    kept = len(checkpointed_layers(shape.layers, checkpointing))
    inputs_only = seq_len * batch_size * shape.hidden * activation_bytes
    acts = (shape.layers - kept) * full_layer + kept * inputs_only + (full_layer if kept else 0)
    logits = batch_size * seq_len * shape.vocab * (activation_bytes + 4 + 4)
    margin = int(MARGIN_FRACTION * (state + acts + logits)) + MARGIN_BYTES
    return StepMemory(state_bytes=state, activation_bytes=acts, logits_bytes=logits, margin_bytes=margin)


def step_least_bytes(shape: Shape, *, batch_size: int, seq_len: int, param_bytes: int, activation_bytes: int) -> int:
    """The DRAM bytes one AdamW training step moves at the least (the roofline placement of ``accelbench profile
    --step train -m hf:...``): ``10 P`` (P = parameters x ``param_bytes``: the weights read in the forward and again
    in the backward, the gradient written, AdamW reading weight, gradient and its two moments and writing weight and
    moments), the token ids (inputs and labels, int64), and twice (written in the forward, read in the backward) the
    activations, ``s b h 34`` bytes a decoder layer in 16-bit (Korthikanti et al. 2022, eq. 1, without its ``5 a s /
    h`` attention scores, which a fused attention kernel keeps on chip; twice that in fp32), and the logits ``b s V``
    in the compute dtype with their float32 copy and gradient. An estimate for the roofline, as the image step's
    ``8 P + X + 5 A`` (:mod:`accelbench.core.analytic`)."""
    layer = seq_len * batch_size * shape.hidden * 34 * activation_bytes // 2
    logits = batch_size * seq_len * shape.vocab * (activation_bytes + 4 + 4)
    return 10 * shape.params * param_bytes + 2 * 8 * batch_size * seq_len + 2 * (shape.layers * layer + logits)


def window_starts(n_tokens: int, seq_len: int, count: int, first: int = 0, stride: int = 1) -> list[int]:
    """Starts of ``count`` packed windows of ``seq_len + 1`` tokens in a stream of ``n_tokens``: window ``k`` of
    this rank is the stream's ``first + k x stride``-th consecutive, non-overlapping window (torchtitan's loader packs
    documents into one token stream and cuts it into ``seq_len + 1`` chunks: inputs the first ``seq_len``, labels
    the last ``seq_len``), wrapping to the start when the stream runs out.

    Raises:
        ValueError: the stream holds no whole window.
    """
    windows = n_tokens // (seq_len + 1)
    if windows < 1:
        raise ValueError(f"the text has {n_tokens} tokens, fewer than one window of {seq_len + 1}")
    return [((first + k * stride) % windows) * (seq_len + 1) for k in range(count)]


def utilisation(flops_per_s: float | None, ceiling: float | None) -> float | None:
    """Achieved over ceiling FLOP/s (MFU), or None where either is missing or the ceiling is not positive."""
    if flops_per_s is None or not ceiling or ceiling <= 0:
        return None
    return flops_per_s / ceiling
