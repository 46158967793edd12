"""The options of ``accelbench profile`` (the ``profile`` scenario's own settings), declared once
(:mod:`accelbench.core.options`); its normalisation and evaluation crop are :mod:`accelbench.core.options.evaluation`'s.
"""

from __future__ import annotations

from accelbench.core.options import Option, declare, train_lm

# the steps a profile times: an image model's, then a language model's (accelbench.scenarios.profile.lm)
STEPS = ("inference", "train", "prefill", "decode")

PROFILE = declare(
    Option(
        name="steps",
        type=str,
        many=True,
        default=("inference",),
        choices=STEPS,
        item="step",
        flag="--step",
        aliases=("step",),
        help="What to profile: an image model's inference and/or train step, a language model's (hf:<model>) prefill "
        "and/or decode step, or its train step",
    ),
    # a language model's training step: the sequence length ``accelbench train -m hf:...`` takes (one declaration)
    train_lm.OPTIONS["seq_lens"],
    Option(
        name="prompt_lens",
        type=int,
        many=True,
        low=1,
        default=(128,),
        unit="tokens",
        flag="--prompt-len",
        more_flags=("--prompt-lens",),
        aliases=("prompt_len",),
        help="prefill/decode: prompt tokens a sequence; for decode the KV-cache positions filled before the step",
    ),
    Option(
        name="ncu",
        type=str,
        default="auto",
        choices=("auto", "on", "off"),
        panel="how",
        help="Nsight Compute counters (auto: on a GPU where ncu is found)",
    ),
    Option(
        name="warmup_steps",
        type=int,
        low=0,
        default=None,
        panel="how",
        default_text="GPU 5; CPU 1",
        help="Untimed steps",
    ),
    Option(
        name="timed_steps",
        type=int,
        low=0,
        default=None,
        panel="how",
        default_text="GPU 20; CPU 3",
        help="Timed steps",
    ),
    Option(
        name="remeasure_ceilings",
        type=bool,
        default=False,
        negatable=False,
        panel="how",
        help="Measure the machine ceilings again",
    ),
    Option(
        name="ncu_timeout_s",
        type=float,
        low=0,
        default=1800.0,
        unit="s",
        panel="how",
        help="The longest one ncu run may take",
    ),
    Option(
        name="chart_dir",
        type=str,
        default=None,
        flag="--charts",
        panel="store",
        allowed="a folder path",
        help="Write roofline charts (PNG + SVG) to this folder",
    ),
    Option(
        name="ncu_csv_dir",
        type=str,
        default=None,
        flag="--ncu-csv",
        panel="store",
        allowed="a folder path",
        help="Keep ncu's raw CSV files in this folder",
    ),
)
