"""The generate scenario (``accelbench generate``): prefill and decode of decoder-only language models.

A case is model x batch size x prompt length x new tokens x precision x backend. Per case: the model is built (or
loaded) on the device in its precision (the weight-only precisions quantize its linear layers,
:mod:`accelbench.quant.weight_only`), its projections fused where the backend asks
(:mod:`accelbench.backends.lm_fuse`), prompts drawn (random token ids, or windows of the shipped text:
:mod:`accelbench.data.text`), the backend's loop (:mod:`accelbench.backends.lm_timing`) warmed up (the first
call compiles and captures: ``compile_s``), then ``repeats`` generations timed per token under telemetry
(:mod:`~accelbench.scenarios.generate.measure`); then a few more decode steps run under the profiler, on a GPU for
where a step's device time goes, and for a split model's share of a step in its collectives
(:mod:`~accelbench.scenarios.generate.step_profile`).
With real weights and a tokenizer the perplexity of the case's model on the held-out text is measured too
(:mod:`~accelbench.scenarios.generate.perplexity`); random weights report no quality and say why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import ConfigError
from accelbench.core.options import aliases as declared_aliases
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.generate import OPTIONS
from accelbench.core.parallel_dims import ParallelDims
from accelbench.core.spec import Extras, Windowed
from accelbench.models.base import LM
from accelbench.scenarios.base import Scenario, register

REPEATS = OPTIONS["repeats"].default
GPU_DEFAULTS: dict[str, Any] = {
    "models": ("hf:llama-3.2-1b", "hf:llama-3.1-8b"),
    "batch_sizes": (1, 2, 4, 8, 16, 32, 64),
    "precisions": ("bf16",),
    "modes": ("static-compile",),
    "idle_s": 3.0,
    "data": None,  # no image data: the prompts are the settings' prompt_source
    **device_defaults(OPTIONS, cuda=True),
}
CPU_DEFAULTS: dict[str, Any] = {
    # A minute or two on 2 cores: the bundled tiny model, what users get and the static-cache loop.
    "models": ("hf:tiny-shakespeare",),
    "batch_sizes": (1, 8),
    "precisions": ("fp32",),
    "modes": ("hf-generate", "static-cache"),
    "idle_s": 0.0,
    "data": None,
    **device_defaults(OPTIONS, cuda=False),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerateSettings(Windowed):
    """The settings of :data:`accelbench.core.options.generate.OPTIONS` (defaults and checks from there).

    Attributes:
        prompt_lens: prompt lengths in tokens (each a case axis).
        new_tokens: tokens generated a sequence (each a case axis; 2 or more: one decode step at least).
        prompt_source: ``random`` (token ids drawn uniformly, seeded) or ``text`` (windows of the held-out shipped
            text, tokenized by the model's tokenizer: needs a checkpoint with one).
        perplexity: measure the perplexity of models with real weights and a tokenizer on the held-out text.
        perplexity_window: tokens a perplexity window (at most the model's context).
        repeats: timed generations a case (:class:`accelbench.core.spec.Windowed`; each is a window).
        parallel: the layout, ``tp=N`` (:meth:`accelbench.core.parallel_dims.ParallelDims.parse`: the model split
            over N GPUs; ``accelbench generate --gpus N --parallel tp`` stores ``tp=N``), or None (one process).
    """

    prompt_lens: tuple[int, ...] = OPTIONS["prompt_lens"].field()
    new_tokens: tuple[int, ...] = OPTIONS["new_tokens"].field()
    prompt_source: str = OPTIONS["prompt_source"].field()
    perplexity: bool = OPTIONS["perplexity"].field()
    perplexity_window: int = OPTIONS["perplexity_window"].field()
    repeats: int = OPTIONS["repeats"].field()
    parallel: str | None = OPTIONS["parallel"].field()

    def __post_init__(self) -> None:
        check_declared(self)
        if self.dims.dp or self.dims.dp_shard:
            raise ConfigError("parallel", self.parallel, "tp=N: generate splits one copy of the model")

    @property
    def dims(self) -> ParallelDims:
        """The layout :attr:`parallel` names (no parallelism used in one process).

        Raises:
            ConfigError: a layout :meth:`~accelbench.core.parallel_dims.ParallelDims.parse` refuses.
        """
        return ParallelDims.parse(self.parallel) if self.parallel else ParallelDims()


@dataclass(frozen=True, kw_only=True, slots=True)
class GenerateExtras(Extras):
    prompt_len: int = 128
    new_tokens: int = 128
    prompt_source: str = "random"
    tp_degree: int = 1
    memory_format = False  # the key: model, batch, precision, mode, prompt and new tokens (no memory format)

    def key_suffix(self) -> str:
        tp = f"|tp={self.tp_degree}" if self.tp_degree > 1 else ""
        return f"|p={self.prompt_len}|n={self.new_tokens}" + ("|text" if self.prompt_source == "text" else "") + tp

    @property
    def dims(self) -> ParallelDims:
        """The case's layout: the model split over ``tp_degree`` GPUs (none used for 1)."""
        return ParallelDims(tp=self.tp_degree if self.tp_degree > 1 else 0)


class Generate(Scenario):
    # under torchrun (--gpus N --parallel tp) the ranks run one split model: rank 0's rows are the case's
    name = kind = workload = backend_workload = dist_kind = dist_workload = kinds.GENERATE
    rank_rows = False
    model_kind, command = LM, "accelbench generate"
    requires = {"transformers": "accelbench generate"}  # its loops and caches are transformers' (accelbench[llm])
    settings_type, extras_type = GenerateSettings, GenerateExtras
    image_inputs = False  # no images: the image fields are refused, the rows carry no memory format
    aliases = declared_aliases(OPTIONS)
    derived_keys = {
        "samples_key": "output_tokens_timed",
        "work_seconds_key": "timed_wall_s",
        "work_samples_key": "output_tokens_timed",
        "spread_key": "tpot_spread",
    }
    gpu_defaults, cpu_defaults = GPU_DEFAULTS, CPU_DEFAULTS
    keeps_compiled = True  # the cases of one model reuse its compiled decode step (SweepState)

    def validate(self, spec) -> None:
        from accelbench import backends, precisions
        from accelbench.core.config import check_choices

        if not spec.models:  # ``-m ""`` or ``-m ,``: nothing is left of the list
            raise ConfigError("model", "", "a non-empty model name, e.g. -m hf:tiny-shakespeare")
        if not spec.batch_sizes:
            raise ConfigError("batch_sizes", "", "one or more positive integers, e.g. -b 1,8")
        check_choices("precision", spec.precisions, precisions.names(workload="generate"))
        check_choices("mode", spec.modes, backends.names(workload=self.backend_workload))

    def cases(self, spec, device: str) -> list:
        """model x precision x mode x prompt length x new tokens x batch size (batch innermost: one OOM boundary
        per configuration and length)."""
        import itertools

        from accelbench.core.spec import Case

        st = spec.settings
        return [
            Case(
                scenario=self.name,
                model=m,
                batch_size=b,
                precision=p,
                mode=mode,
                device=device,
                extras=GenerateExtras(
                    prompt_len=pl, new_tokens=n, prompt_source=st.prompt_source, tp_degree=st.dims.tp_degree
                ),
            )
            for m, p, mode, pl, n, b in itertools.product(
                spec.models, spec.precisions, spec.modes, st.prompt_lens, st.new_tokens, spec.batch_sizes
            )
        ]

    def check(self, spec) -> None:
        """Every model resolves (a checkpoint folder's files parse and agree), every prompt plus its new tokens fits
        its context, text prompts have a tokenizer, and the smallest case fits the device's memory
        (:mod:`~accelbench.scenarios.generate.preflight`).

        Raises:
            UnknownModelError, CheckpointError, MissingDependencyError, ConfigError, DoesNotFitError: one line each.
        """
        from accelbench.models.lm_checks import check_fits, check_model_name
        from accelbench.scenarios.generate.preflight import check_checkpoint, check_memory, check_split

        self.check_models(spec)  # each a language model (an image classifier is refused, naming accelbench run)
        for name in spec.models:
            check_checkpoint(name)  # a damaged folder is one line naming its file, before anything reads it
        for name in spec.models:
            check_split(name, spec.settings.dims.tp_degree)
            context, has_tokenizer = check_model_name(name)
            for p in spec.settings.prompt_lens:
                for n in spec.settings.new_tokens:
                    check_fits(name, context, p, n)
            if spec.settings.prompt_source == "text" and has_tokenizer is False:
                raise ConfigError("prompt_source", "text", f"random for {name} (it has no tokenizer)")
            note = _perplexity_note(name, context, has_tokenizer, spec.settings)
            if note:
                import warnings

                from accelbench.core.errors import SettingsNote

                warnings.warn(SettingsNote(note), stacklevel=2)
        check_memory(self, spec)  # the smallest case fits the device's memory, estimated from the configs

    def unsupported_reason(self, case, device) -> str | None:
        from accelbench import backends, precisions
        from accelbench.backends.engine import Engine

        engine = backends.mode(case.mode)
        if not isinstance(engine, Engine):
            return f"{case.mode} is not a generation engine (accelbench.backends.engine.Engine)"
        if case.extras.tp_degree > 1:
            from accelbench.backends.generation import tp_reason

            why = tp_reason(case.precision)
            if why:
                return why
        return precisions.unsupported_reason(case.precision, device) or engine.unsupported_reason(
            device, self.backend_workload, precision=case.precision
        )

    def prepare(self, spec, device, store):
        """Per-sweep state: the device's ceilings (measured once and cached in the store:
        :mod:`accelbench.ceilings`; a torchrun rank, which has no store, measures its GPU's), the perplexities
        measured so far, and the memory the cases are estimated against (read first: nothing built yet)."""
        from accelbench.ceilings.cache import get_ceilings
        from accelbench.scenarios.generate.model import SweepState
        from accelbench.scenarios.generate.preflight import available_bytes

        memory = available_bytes(device)
        if store is None:  # a torchrun rank (no store): its own GPU's ceilings, measured here (seconds)
            import torch

            from accelbench.ceilings.measure import measure

            ceilings = measure(device)
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the copies' blocks back to the device before a model is built
            return SweepState(ceilings=ceilings, memory_bytes=memory)
        return SweepState(ceilings=get_ceilings(store, device)[0], memory_bytes=memory)

    def oom_group(self, case) -> tuple | None:
        ex = case.extras
        return (case.model, case.precision, case.mode, ex.prompt_len, ex.new_tokens)

    def measure(self, case, spec, state, rank, sink):
        from accelbench.scenarios.generate.model import measure_case
        from accelbench.scenarios.generate.preflight import check_case

        check_case(case, spec, state.memory_bytes)  # a case that cannot fit is an ``oom`` row, never built

        return measure_case(case, spec, state, rank)


def _perplexity_note(name: str, context: int | None, has_tokenizer: bool | None, st: GenerateSettings) -> str | None:
    """Why the perplexity asked of ``name`` will be missing or measured otherwise than asked, or None: a checkpoint
    without a tokenizer has none (random-weight architectures say so beside the table), and a window longer than the
    model's context is cut to the context (the longest window the model takes; the row's ``perplexity_window`` is the
    one used), where refusing would refuse the default window on every model of a shorter context."""
    from accelbench.models import hf

    if not st.perplexity or not hf.is_lm_name(name) or name[len(hf.PREFIX) :] in hf.ARCHITECTURES:
        return None
    if has_tokenizer is False:
        return (
            f"{name} has no tokenizer (tokenizer.json, tokenizer_config.json or tokenizer.model): no perplexity is "
            "measured (the rows' quality_note says so)"
        )
    if context and st.perplexity_window > context:
        return (
            f"perplexity_window {st.perplexity_window} is longer than {name}'s maximum context of {context} tokens: "
            f"its perplexity is measured over windows of {context}"
        )
    return None


register(Generate())
