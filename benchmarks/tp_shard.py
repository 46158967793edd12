"""One rank's part of a tensor-parallel Llama, as a whole model on one GPU: the decode step a rank of
``accelbench generate --gpus N --parallel tp`` runs, without its collectives.

A rank of a model split over ``tp`` GPUs (:mod:`accelbench.models.tensor_parallel`) holds ``1 / tp`` of the query
and key-value heads (q/k/v column-parallel, o row-parallel), ``1 / tp`` of the MLP's intermediate size (gate/up
column-parallel, down row-parallel) and ``1 / tp`` of the LM head's vocabulary; the hidden size, the norms and the
embedding rows a step reads are whole. A Llama built with those sizes runs the same matrix products, attention and
norms a step, with no all-reduce and no all-gather of the logits. Its embedding table has the head's vocabulary too
(a step reads one row of it: the bytes of a step differ by one row). Its TPOT, beside the split model's on the same
kind of GPU, is what the split step spends on its collectives and their waits; its profiled step
(``decode_kernel_families``) is where the rest goes.

Run as a model factory (random weights, drawn on the GPU; no tokenizer), from the repository root::

    accelbench generate -m benchmarks.tp_shard:llama70b_tp2_rank -p bf16 --modes static-compile-fused \\
        -b 1 --prompt-lens 128 --new-tokens 64 --no-perplexity
"""

from __future__ import annotations

model_kind = "lm"


def rank_config(tp: int, **whole):
    """A ``LlamaConfig`` of one rank's part of a Llama split over ``tp`` GPUs: accelbench's ``hf:llama-3.1-70b``
    (meta-llama/Llama-3.1-70B's config.json), its values replaced by ``whole``'s.

    Raises:
        ValueError: ``tp`` does not divide the query heads, the key-value heads, the intermediate size or the
            vocabulary.
    """
    from transformers import LlamaConfig

    from accelbench.models.hf import ARCHITECTURES

    values = {**ARCHITECTURES["llama-3.1-70b"].values, **whole}
    split = ("num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size")
    if any(values[k] % tp for k in split):
        raise ValueError(f"tp {tp} does not divide {', '.join(f'{k} {values[k]}' for k in split)}")
    values["head_dim"] = values["hidden_size"] // values["num_attention_heads"]
    values.update({k: values[k] // tp for k in split}, tie_word_embeddings=False)
    return LlamaConfig(**values)


def build(config, device: str = "cuda"):
    """A ``LlamaForCausalLM`` of ``config`` in bf16, its random weights drawn on ``device``."""
    import torch
    from transformers import LlamaForCausalLM

    dev = torch.device(device if device != "cuda" or torch.cuda.is_available() else "cpu")
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with dev:
            return LlamaForCausalLM(config).eval()
    finally:
        torch.set_default_dtype(previous)


def llama70b_tp2_rank():
    """One rank's part of Llama-3.1-70B split over 2 GPUs (69.5 GB of bf16 weights, with half the head)."""
    return build(rank_config(2))


def llama70b_tp4_rank():
    """One rank's part of Llama-3.1-70B split over 4 GPUs (35.3 GB of bf16 weights, with a quarter of the head)."""
    return build(rank_config(4))


def tiny_tp2_rank():
    """The same split of a 2-layer Llama of hidden size 64 (the pipeline's check on a CPU)."""
    return build(
        rank_config(
            2,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            vocab_size=256,
        )
    )
