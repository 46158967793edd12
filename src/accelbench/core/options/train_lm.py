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
        name="fsdp_autocast",
        type=bool,
        default=True,
        panel="dist",
        help="With --parallel fsdp and an amp precision: autocast on top of FSDP2's gathers in the autocast dtype "
        "(--no-fsdp-autocast: the gathers alone, as torchtitan trains)",
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

# training to a held-out perplexity (``--epochs N``): the ``converge_lm`` scenario's own
CONVERGE_OPTIONS = declare(
    Option(
        name="warmup_steps",
        type=int,
        low=0,
        high=INT_MAX,
        default=50,
        unit="steps",
        panel="how",
        help="With --epochs: linear learning-rate warm-up before the cosine decay",
    ),
    Option(
        name="init",
        type=str,
        default="pretrained",
        choices=("pretrained", "random"),
        help="With --epochs: start from the checkpoint's weights, or fresh random weights of its configuration",
    ),
    Option(
        name="train_windows",
        type=int,
        low=1,
        high=INT_MAX,
        default=None,
        panel="how",
        help="With --epochs: packed training windows an epoch takes, the first N of the text (unset: every one)",
    ),
    Option(
        name="eval_windows",
        type=int,
        low=1,
        high=INT_MAX,
        default=None,
        panel="accuracy",
        help="With --epochs: packed held-out windows the perplexity reads, the first N (unset: every one)",
    ),
    Option(
        name="target_perplexity",
        type=float,
        low=1.0,
        default=None,
        panel="accuracy",
        help="With --epochs: held-out perplexity whose first reaching gives the time to target",
    ),
)
