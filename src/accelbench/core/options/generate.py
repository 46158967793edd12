"""The options of ``accelbench generate`` (the ``generate`` scenario's settings), declared once
(:mod:`accelbench.core.options`)."""

from __future__ import annotations

from accelbench.core.config import INT_MAX
from accelbench.core.options import Option, declare

# Timed generations a case by default: the fewest with which `accelbench compare` of two default runs decides and
# still calls a difference when a window is out of order. Its exact Mann-Whitney test on the windows can reach
# p < 0.05 only when 2 / C(2n, n) < 0.05: 3 vs 3 windows never can (0.10: "too few windows" on every case), 4 vs 4
# only when every window of one run beats every window of the other (0.029; one pair out of order: 0.057), 5 vs 5
# with up to two of the 25 pairs out of order (0.032). The cost is linear: a case times 5 generations where 3 were
# timed before (the warm-up and the build unchanged).
REPEATS = 5

OPTIONS = declare(
    Option(
        name="prompt_lens",
        type=int,
        many=True,
        low=1,
        high=INT_MAX,
        default=(128,),
        gpu=(128, 2048),
        cpu=(64,),
        unit="tokens",
        help="Prompt lengths (each a case)",
        aliases=("prompt_len", "prompt_length", "prompt_lengths"),
    ),
    Option(
        name="new_tokens",
        type=int,
        many=True,
        low=2,
        high=INT_MAX,
        default=(128,),
        gpu=(128,),
        cpu=(32,),
        unit="tokens",
        help="Tokens generated a sequence (each a case; one decode step at least)",
        aliases=("max_new_tokens", "output_len"),
    ),
    Option(
        name="prompt_source",
        type=str,
        default="random",
        choices=("random", "text"),
        help="Token ids drawn at random, or windows of the shipped text (needs a tokenizer)",
    ),
    Option(
        name="perplexity",
        type=bool,
        default=True,
        panel="accuracy",
        help="Perplexity on the held-out text for models with real weights and a tokenizer",
    ),
    Option(
        name="perplexity_window",
        type=int,
        low=2,
        default=256,
        unit="tokens",
        panel="accuracy",
        help="Tokens a perplexity window (cut to the model's context)",
    ),
    Option(
        name="repeats",
        type=int,
        low=1,
        default=REPEATS,
        panel="how",
        help="Timed generations a case; each is a window of the confidence intervals",
    ),
    Option(
        name="parallel",
        type=str,
        default=None,
        allowed="tp or tp=N (with --gpus N)",
        panel="dist",
        default_text="one GPU",
        help="With --gpus N: tp splits one copy of each model over the N GPUs (tensor parallelism: each GPU holds "
        "1/N of the attention heads, MLP and KV cache); stored as tp=N",
    ),
)
