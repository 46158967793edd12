"""The options of a language model's training step (``accelbench train -m hf:...``, the ``train_lm`` scenario's
settings), declared once (:mod:`accelbench.core.options`)."""

from __future__ import annotations

from accelbench.core.config import INT_MAX
from accelbench.core.options import Option, declare

OPTIONS = declare(
    Option(
        name="seq_lens",
        type=int,
        many=True,
        low=1,
        high=INT_MAX,
        default=(128,),
        gpu=(2048,),
        cpu=(128,),
        unit="tokens",
        help="Sequence length (each a case)",
        flag="--seq-len",
        aliases=("seq_len", "sequence_length"),
    ),
    Option(
        name="tokens",
        type=str,
        default="random",
        choices=("random", "text"),
        help="Token ids drawn at random, or packed consecutive windows of the shipped text (needs a tokenizer)",
        aliases=("token_source",),
    ),
    Option(
        name="activation_checkpointing",
        type=str,
        default="none",
        choices=("none", "selective", "full"),
        panel="how",
        help="Decoder layers whose activations the backward pass recomputes (selective: every second one)",
    ),
    Option(
        name="parallel",
        type=str,
        many=True,
        default=("ddp",),
        choices=("ddp", "fsdp"),
        panel="dist",
        help="With --gpus N: DistributedDataParallel and/or FSDP2 (each a case)",
    ),
    Option(
        name="batches",
        type=int,
        low=1,
        high=INT_MAX,
        default=2,
        panel="how",
        help="Distinct token batches the timed steps cycle through",
    ),
    Option(name="lr", type=float, low=0.0, default=3e-4, panel="how", help="AdamW's learning rate"),
    Option(name="weight_decay", type=float, low=0.0, default=0.1, panel="how", help="AdamW's decoupled weight decay"),
    Option(
        name="fused_optimizer",
        type=bool,
        default=None,
        panel="how",
        help="Fused AdamW kernels (unset: fused on CUDA where torch has them, foreach on a CPU)",
    ),
)
