"""The language-model training-step scenario (``accelbench train -m hf:...``): tokens/s, MFU and memory of a causal
language model's training step, one process, DDP or FSDP2.

A case is model x precision x mode x sequence length x parallelism x batch size (sequences a step; a rank's under
torchrun). Per case: the model (:mod:`~accelbench.training.lm_step`: loaded in float32, Float8 training for
an fp8 precision, activation checkpointing, each decoder layer compiled for a compiling backend, FSDP2 or DDP under
torchrun), token batches (random ids, or packed windows of the shipped text), and the training step of
:func:`accelbench.training.step.build_step` (forward, next-token cross-entropy, backward, AdamW: fused on CUDA
where torch has it; autocast, GradScaler for amp-fp16, weights cast for bf16). The first step is timed as
``compile_s``, then ``warmup_batches`` steps, then whole passes over the batches are timed as the image step is
(:mod:`accelbench.core.timing`: CUDA events on a GPU, ``repeats`` windows). The row's sample is a token:
``throughput_samples_per_s`` is tokens/s, so energy and cost per sample are per token
(:mod:`~accelbench.scenarios.train.lm_case` names them per token and per billion tokens), and a ``--gpus`` case's
aggregate row, per-GPU rate and scaling efficiency are those of the image step.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.config import check_choices
from accelbench.core.errors import ConfigError
from accelbench.core.options import aliases as declared_aliases
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.train_lm import OPTIONS
from accelbench.core.spec import Case, Extras, Windowed
from accelbench.models.base import LM
from accelbench.scenarios.base import Scenario, register

GPU_DEFAULTS: dict[str, Any] = {
    "models": ("hf:llama-3.2-1b",),
    "batch_sizes": (1, 2, 4, 8),
    "precisions": ("amp-bf16",),
    "modes": ("eager", "compile"),
    "warmup_batches": 3,
    "min_timed_batches": 10,
    "min_time_s": 1.0,
    "data": None,  # no image data: the token batches are the settings' ``tokens``
    **device_defaults(OPTIONS, cuda=True),
}
CPU_DEFAULTS: dict[str, Any] = {
    # seconds on 2 cores: the bundled 1.8 M-parameter model on short windows
    "models": ("hf:tiny-shakespeare",),
    "batch_sizes": (4, 16),
    "precisions": ("fp32",),
    "modes": ("eager",),
    "warmup_batches": 1,
    "min_timed_batches": 3,
    "min_time_s": 0.0,
    "idle_s": 0.0,
    "data": None,
    **device_defaults(OPTIONS, cuda=False),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainLMSettings(Windowed):
    """The settings of :data:`accelbench.core.options.train_lm.OPTIONS` (defaults and checks from there).

    Attributes:
        seq_lens: tokens a sequence (each a case axis).
        tokens: ``random`` (ids drawn uniformly from the vocabulary, seeded) or ``text`` (packed consecutive windows
            of the shipped text's training part, tokenized by the model's tokenizer: a checkpoint with one).
        activation_checkpointing: ``none``, ``selective`` (every second decoder layer) or ``full`` (every layer).
        parallel: under ``--gpus N``: ``ddp`` (DistributedDataParallel) and/or ``fsdp`` (FSDP2), each a case axis.
        fsdp_autocast: under FSDP2 with an ``amp-*`` precision, ``torch.autocast`` on top of the gathers in its
            dtype; False: the gathers alone (:func:`accelbench.training.lm_step.build_lm_step`).
        batches: distinct token batches cycled through the timed steps.
        lr, weight_decay: AdamW's (decoupled weight decay, Loshchilov & Hutter 2019).
        fused_optimizer: as the image step's (None: fused on CUDA where torch has it).
        repeats: timed windows per case (:class:`accelbench.core.spec.Windowed`).
    """

    seq_lens: tuple[int, ...] = OPTIONS["seq_lens"].field()
    tokens: str = OPTIONS["tokens"].field()
    activation_checkpointing: str = OPTIONS["activation_checkpointing"].field()
    parallel: tuple[str, ...] = OPTIONS["parallel"].field()
    fsdp_autocast: bool = OPTIONS["fsdp_autocast"].field()
    batches: int = OPTIONS["batches"].field()
    lr: float = OPTIONS["lr"].field()
    weight_decay: float = OPTIONS["weight_decay"].field()
    fused_optimizer: bool | None = OPTIONS["fused_optimizer"].field()

    def __post_init__(self) -> None:
        Windowed.__post_init__(self)
        check_declared(self)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainLMExtras(Extras):
    seq_len: int = 128
    token_source: str = "random"
    activation_checkpointing: str = "none"
    parallel_strategy: str = "ddp"
    memory_format = False  # the key: model, batch, precision, mode, sequence, tokens (no memory format)

    def key_suffix(self) -> str:
        ac = "" if self.activation_checkpointing == "none" else f"|ac={self.activation_checkpointing}"
        par = "" if self.parallel_strategy == "ddp" else f"|{self.parallel_strategy}"
        return f"|T={self.seq_len}|{self.token_source}{ac}{par}"


class TrainLM(Scenario):
    name = "train_lm"
    # one process: its own kind and metric map (a sample is a token); under torchrun the training step's rows
    kind, dist_kind = kinds.TRAIN_LM, kinds.TRAIN_LM_DDP
    workload, dist_workload = kinds.TRAIN_LM, kinds.TRAIN_LM_DDP
    model_kind, command = LM, "accelbench train"
    requires = {"transformers": "accelbench train with a language model"}
    settings_type, extras_type = TrainLMSettings, TrainLMExtras
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS
    training = True
    rejects = ("channels_last", "images", "data", "image_size", "skip_bad_images")
    aliases = declared_aliases(OPTIONS)
    # the sample is a token: energy and cost per token, quoted for the timed steps
    derived_keys = {
        "samples_key": "samples_timed",
        "work_seconds_key": "timed_wall_s",
        "work_samples_key": "samples_timed",
        "spread_key": "step_time_spread",
    }

    def validate(self, spec) -> None:
        from accelbench import backends, precisions

        if not spec.models:
            raise ConfigError("model", "", "a non-empty model name, e.g. -m hf:tiny-shakespeare")
        if not spec.batch_sizes:
            raise ConfigError("batch_sizes", "", "one or more positive integers, e.g. -b 4,16")
        check_choices("precision", spec.precisions, precisions.names())
        check_choices("mode", spec.modes, backends.names())

    def cases(self, spec, device: str) -> list[Case]:
        """model x precision x mode x sequence length x parallelism x batch size (batch innermost: one OOM boundary
        per configuration and sequence length)."""
        st = spec.settings
        return [
            Case(
                scenario=self.name,
                model=m,
                batch_size=b,
                precision=p,
                mode=mode,
                device=device,
                extras=TrainLMExtras(
                    seq_len=t,
                    token_source=st.tokens,
                    activation_checkpointing=st.activation_checkpointing,
                    parallel_strategy=par,
                ),
            )
            for m, p, mode, t, par, b in itertools.product(
                spec.models, spec.precisions, spec.modes, st.seq_lens, st.parallel, spec.batch_sizes
            )
        ]

    def check(self, spec) -> None:
        """Every model is a language model whose context holds the longest sequence, and ``tokens = text`` has a
        tokenizer.

        Raises:
            ModelKindError, UnknownModelError, MissingDependencyError, ConfigError: one line each.
        """
        from accelbench.models.lm_checks import check_model_name

        self.check_models(spec)
        for name in spec.models:
            context, has_tokenizer = check_model_name(name)
            longest = max(spec.settings.seq_lens)
            if context and longest > context:
                raise ConfigError("seq_len", longest, f"at most {name}'s context of {context} tokens")
            if spec.settings.tokens == "text" and has_tokenizer is False:
                raise ConfigError("tokens", "text", f"random for {name} (it has no tokenizer)")

    def unsupported_reason(self, case, device) -> str | None:
        """The image step's reasons, but an fp8 precision: Float8 training (torchao) where the GPU has fp8 matmuls
        (compute capability >= 8.9)."""
        from accelbench.training.lm_step import unsupported_reason

        return unsupported_reason(case.precision, case.mode, device, self.backend_workload)

    def oom_group(self, case) -> tuple[Any, ...]:
        ex = case.extras
        return (case.model, case.precision, case.mode, ex.seq_len, ex.activation_checkpointing, ex.parallel_strategy)

    def prepare(self, spec, device, store):
        """Per-sweep state: the device's ceilings (measured once and cached in the store; on a torchrun rank, which
        has no store, the datasheet's alone) and the tokenized text, once per tokenizer."""
        from accelbench.scenarios.train.lm_case import SweepState, ceilings_for

        return SweepState(ceilings=ceilings_for(store, device))

    def measure(self, case, spec, state, rank, sink):
        from accelbench.scenarios.train.lm_case import measure_case

        return measure_case(case, spec, state, rank)

    def after_store(self, store, case_id: int, rec: dict[str, Any], extra: dict[str, Any]) -> None:
        """Energy per token and cost per billion tokens, from the derived per-sample columns (a sample is a
        token), stored on the row."""
        from accelbench.scenarios.train.lm_case import per_token_columns

        cols = per_token_columns(rec)
        if cols:
            rec.update(cols)
            store.update_case(case_id, cols)


register(TrainLM())
