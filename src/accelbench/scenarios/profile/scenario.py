"""The profile scenario (``accelbench profile``): the roofline of one inference or training step of an image model, or
of one prefill, decode (:mod:`accelbench.scenarios.profile.lm`) or training step
(:mod:`accelbench.scenarios.profile.lm_train`) of a language model.

Per case (a sweep case plus a step kind, :mod:`accelbench.scenarios.profile.step`):
1. build the step; count FLOPs, parameters and minimum bytes analytically (any device);
2. time ``timed_steps`` steps after ``warmup_steps`` (CUDA events / perf_counter), with telemetry;
3. on a GPU, profile one step with Nsight Compute in a child process (:mod:`accelbench.scenarios.profile.ncu`);
4. store the record and its kernels (extension table ``profile_kernels``); :func:`accelbench.api.profile` then
   draws its charts (``chart_dir``) from the stored row.
Machine ceilings are measured once per device and cached in the store (:mod:`accelbench.ceilings.cache`).
A failure in a later stage keeps what the earlier ones produced: an ncu error sets ``ncu_status`` and
``ncu_error`` but the analytic and timed numbers stay; a build or timing failure is the case's status.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import ConfigError
from accelbench.core.options import aliases as declared_aliases
from accelbench.core.options import check_declared, device_defaults
from accelbench.core.options.evaluation import EVALUATION
from accelbench.core.options.profile import PROFILE
from accelbench.core.spec import Extras, Settings
from accelbench.models.base import IMAGE, LM
from accelbench.scenarios.base import Scenario, register
from accelbench.scenarios.profile.lm import LM_STEPS  # a language model's (hf:...): generate's static-cache loop

NCU_MODES = PROFILE["ncu"].choices
IMAGE_STEPS = ("inference", "train")  # an image model's (timm, torchvision, a factory)
STEPS = IMAGE_STEPS + LM_STEPS
# The defaults that depend on the kind of step: (GPU precision, CPU precision, backend). A language model's steps
# are the generate scenario's: bf16 with the static-cache loop (``--mode static-compile`` for the compiled step).
# A language model's training step is ``accelbench train -m hf:...``'s: amp-bf16 (float32 master weights), eager.
STEP_DEFAULTS = {
    "image": ("amp-bf16", "fp32", "eager"),
    "lm": ("bf16", "fp32", "static-cache"),
    "lm-train": ("amp-bf16", "fp32", "eager"),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileSettings(Settings):
    """The settings of :data:`accelbench.core.options.profile.PROFILE` and the evaluation settings (defaults and
    checks from their declarations).

    Attributes:
    steps: ``inference``, ``train`` or both (an image model); ``prefill``, ``decode`` or both (a language model).
    prompt_lens: a language model's prompt lengths in tokens (each a case axis): the prefill's tokens a sequence,
        the KV-cache positions filled before the profiled decode step.
    seq_lens: a language model's training sequence lengths in tokens (each a case axis of its ``train`` step).
    ncu: ``auto`` (on a GPU when ncu is found), ``on`` (a missing ncu is reported as an error), ``off``.
    warmup_steps / timed_steps: default 5 + 20 on a GPU, 1 + 3 on a CPU.
    chart_dir: write roofline charts (PNG + SVG) here; ncu_csv_dir: keep ncu's raw CSV here.
    ncu_timeout_s: seconds one ncu run may take.
    remeasure_ceilings: measure the machine ceilings again instead of using the cached ones.
    mean, std, resize, crop_pct: the input's normalisation and evaluation transform (as ``accelbench run``'s:
        :data:`accelbench.core.options.evaluation.EVALUATION`).
    """

    volatile = ("chart_dir", "ncu_csv_dir", "remeasure_ceilings", "ncu_timeout_s")
    steps: tuple[str, ...] = PROFILE["steps"].field()
    prompt_lens: tuple[int, ...] = PROFILE["prompt_lens"].field()
    seq_lens: tuple[int, ...] = PROFILE["seq_lens"].field()
    ncu: str = PROFILE["ncu"].field()
    warmup_steps: int | None = PROFILE["warmup_steps"].field()
    timed_steps: int | None = PROFILE["timed_steps"].field()
    chart_dir: str | None = PROFILE["chart_dir"].field()
    ncu_csv_dir: str | None = PROFILE["ncu_csv_dir"].field()
    ncu_timeout_s: float = PROFILE["ncu_timeout_s"].field()
    remeasure_ceilings: bool = PROFILE["remeasure_ceilings"].field()
    mean: tuple[float, ...] | None = EVALUATION["mean"].field()
    std: tuple[float, ...] | None = EVALUATION["std"].field()
    resize: int | None = EVALUATION["resize"].field()
    crop_pct: float | None = EVALUATION["crop_pct"].field()

    def __post_init__(self) -> None:
        from accelbench.data.evaluation import check_eval_settings

        check_declared(self)
        check_eval_settings(self)
        if set(self.steps) & set(LM_STEPS) and set(self.steps) & set(IMAGE_STEPS):
            raise ConfigError(
                "step",
                ",".join(self.steps),
                "inference/train (an image model), prefill/decode or train (a language model), not two kinds in one "
                "run",
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileExtras(Extras):
    step: str = "inference"
    prompt_len: int | None = None  # a language model's prefill or decode step only
    seq_len: int | None = None  # a language model's training step only

    def key_suffix(self) -> str:
        return (
            f"|step={self.step}"
            + (f"|p={self.prompt_len}" if self.prompt_len is not None else "")
            + (f"|T={self.seq_len}" if self.seq_len is not None else "")
        )


def is_lm_step(step: str) -> bool:
    """A language model's generation step (prefill or decode)."""
    return step in LM_STEPS


def is_lm_case(case) -> bool:
    """A language model's case: its prefill or decode step, or its training step (which has a sequence length)."""
    return is_lm_step(case.extras.step) or case.extras.seq_len is not None


def lm_train_run(steps, models) -> bool:
    """Whether a run profiles a language model's training step: ``train`` of language models (``hf:...``).

    Raises:
        ConfigError: language models mixed with image classifiers.
    """
    from accelbench.training.lm_step import is_lm_spec

    return isinstance(steps, (list, tuple)) and "train" in steps and is_lm_spec(models)


def slug(case) -> str:
    """A file-name stem for a case's charts and CSV."""
    return f"{case.model}-{case.extras.step}-{case.precision}-bs{case.batch_size}-{case.mode}".replace(
        ":", "_"
    ).replace("/", "_")


class Profile(Scenario):
    name, kind, workload = "profile", kinds.PROFILE, kinds.PROFILE
    command = "accelbench profile"
    settings_type, extras_type = ProfileSettings, ProfileExtras
    aliases = {"batch_size": "batch_sizes", **declared_aliases(PROFILE)}
    # precisions and modes: by the kind of step (STEP_DEFAULTS), filled in by normalize
    cpu_defaults = {
        "models": ("resnet50",),
        "batch_sizes": (32,),
        "warmup_batches": 0,
        **device_defaults(PROFILE, cuda=False),
    }  # data: the spec's default (cifar10-test) for an image model's steps, none for a language model's (normalize)
    gpu_defaults = {**cpu_defaults, **device_defaults(PROFILE, cuda=True)}
    # cost and energy per sample over the timed steps
    derived_keys = {
        "samples_key": "samples_timed",
        "work_seconds_key": "timed_wall_s",
        "work_samples_key": "samples_timed",
        "spread_key": "step_time_spread",
    }

    def defaults(self, cuda: bool) -> dict[str, Any]:
        return {**super().defaults(cuda), "_cuda": cuda}  # normalize picks the step's precision by it

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        cuda = merged.pop("_cuda", False)
        if isinstance(merged.get("steps"), str):
            merged["steps"] = tuple(s.strip() for s in merged["steps"].split(",") if s.strip())
        steps = merged.get("steps")  # not typed yet: a wrong type is the settings' one-line ConfigError, later
        lm = isinstance(steps, (list, tuple)) and any(isinstance(s, str) and is_lm_step(s) for s in steps)
        kind = "lm" if lm else "lm-train" if lm_train_run(steps or ("inference",), merged.get("models")) else "image"
        gpu, cpu, mode = STEP_DEFAULTS[kind]
        merged.setdefault("precisions", (gpu if cuda else cpu,))
        merged.setdefault("modes", (mode,))
        if kind != "image":  # a language model's steps run on random token ids: the spec records no image data
            for key in ("data", "images"):
                if merged.get(key) is not None:
                    raise ConfigError(key, merged[key], "none for a language model's steps (they run on random tokens)")
            merged["data"] = merged["images"] = None
        else:
            merged.setdefault("images", max(merged.get("batch_sizes") or (1,)))  # one batch of real images
        from accelbench.data.evaluation import normalize_eval

        return normalize_eval(merged)

    def validate(self, spec) -> None:
        """The precisions and backends of the kind of step: a language model's are the generate scenario's
        (weight-only precisions included), its backends the engines that expose each step (``hf-generate`` is a
        whole ``model.generate`` call, with no single step to profile)."""
        from accelbench import backends, precisions
        from accelbench.backends.engine import engines
        from accelbench.core.config import check_choices

        steps = spec.settings.steps
        if lm_train_run(steps, spec.models):  # train's step of a language model: train's precisions and backends
            if tuple(steps) != ("train",):
                raise ConfigError("step", ",".join(steps), "train alone for a language model's training step")
            if not spec.models or not spec.batch_sizes:
                raise ConfigError("batch_sizes", spec.batch_sizes, "one or more positive integers, e.g. -b 4")
            check_choices("precision", spec.precisions, precisions.names())
            check_choices("mode", spec.modes, backends.names(workload="train"))
            return None
        if not any(is_lm_step(s) for s in steps):
            return super().validate(spec)
        if not spec.models or not spec.batch_sizes:
            raise ConfigError(
                "model" if not spec.models else "batch_sizes",
                spec.models or spec.batch_sizes,
                "one or more names / positive integers",
            )
        check_choices("precision", spec.precisions, precisions.names(workload="generate"))
        check_choices("mode", spec.modes, engines(steps=True))

    def check(self, spec) -> None:
        """Each model is of the kind its steps profile (hf: names for prefill/decode), and resolves; a language
        model's prompts fit its context (one decode position after them).

        Raises:
            ConfigError, UnknownModelError, MissingDependencyError, DataError: one line each.
        """
        from accelbench.models import lookup

        lm_steps = self.takes(spec) == LM
        for name in spec.models:
            lm = lookup(name, self.takes(spec)).kind == LM  # a user factory's kind is known when built: an image's
            if lm_steps != lm:
                step = ",".join(spec.settings.steps)
                raise ConfigError(
                    "step",
                    step,
                    f"{'inference, train' if lm_steps else 'prefill, decode or train'} for "
                    f"{name} ({'a language model' if lm else 'not a language model: prefill and decode profile hf:<model>'})",
                )
        if not lm_steps:
            return super().check(spec)
        from accelbench.models.lm_checks import check_fits, check_model_name

        self.check_models(spec)
        train = "train" in spec.settings.steps
        for name in spec.models:
            context, _ = check_model_name(name)
            longest = max(spec.settings.seq_lens)
            if train and context and longest > context:
                raise ConfigError("seq_len", longest, f"at most {name}'s context of {context} tokens")
            for p in () if train else spec.settings.prompt_lens:
                check_fits(name, context, p, 1)

    def takes(self, spec) -> str | None:
        """A language model for the prefill and decode steps and for ``train`` of ``hf:...`` models, an image
        classifier for the others."""
        steps = spec.settings.steps
        return LM if any(is_lm_step(s) for s in steps) or lm_train_run(steps, spec.models) else IMAGE

    def cases(self, spec, device: str) -> list:
        from accelbench.core.spec import grid

        st = spec.settings
        lm = self.takes(spec) == LM
        return [
            c
            for step in st.steps
            for p in (st.prompt_lens if is_lm_step(step) else (None,))
            for t in (st.seq_lens if lm and step == "train" else (None,))
            for c in grid(spec, device, ProfileExtras(step=step, prompt_len=p, seq_len=t))
        ]

    def unsupported_reason(self, case, device) -> str | None:
        from accelbench import backends, precisions
        from accelbench.scenarios.base import quant_reason

        if case.extras.seq_len is not None:  # a language model's training step: train's reasons
            from accelbench.training.lm_step import unsupported_reason

            return unsupported_reason(case.precision, case.mode, device)
        if is_lm_step(case.extras.step):
            return precisions.unsupported_reason(case.precision, device) or backends.mode(case.mode).unsupported_reason(
                device, "generate"
            )
        train = case.extras.step == "train"
        float8 = precisions.is_float8(case.precision) and not train  # quantized as run does: step._float8
        return (
            (None if float8 else quant_reason(self, case.precision, train))
            or precisions.unsupported_reason(case.precision, device, training=train)
            or backends.get(case.mode).unsupported_reason(device, case.extras.step)
        )  # inference or train

    def prepare(self, spec, device, store) -> Any:
        from accelbench.ceilings.cache import get_ceilings

        ceilings, _ = get_ceilings(store, device, spec.settings.remeasure_ceilings)
        return ceilings

    def oom_group(self, case) -> tuple:
        ex = case.extras
        return (case.model, case.precision, case.mode, case.channels_last, ex.step, ex.prompt_len, ex.seq_len)

    def cudnn_benchmark(self, case, spec) -> bool | None:
        """A training step runs as ``accelbench train`` runs it: cuDNN autotuning on unless the spec says otherwise."""
        if case.extras.step == "train" and spec.cudnn_benchmark is None:
            return True
        return super().cudnn_benchmark(case, spec)

    def measure(self, case, spec, ceilings, rank, sink):
        from accelbench.core import analytic
        from accelbench.core.errors import one_line
        from accelbench.core.timing import time_passes, warm_up
        from accelbench.scenarios.base import case_monitor
        from accelbench.scenarios.profile import results
        from accelbench.scenarios.profile import step as stepmod

        dev, st = rank.device, spec.settings
        cuda, lm = dev.type == "cuda", is_lm_case(case)
        work = stepmod.build(case, spec, dev)
        counts = work.counts if lm else analytic.count(work, case.extras.step)
        warm = st.warmup_steps if st.warmup_steps is not None else (5 if cuda else 1)
        iters = max(st.timed_steps if st.timed_steps is not None else (20 if cuda else 3), 1)
        step = (lambda _: (work.reset(), work.run())) if lm else (lambda _: work.run())  # noqa: E731
        warm_up(step, [None], warm, dev)
        with case_monitor(spec, case, dev) as mon:
            times_ms, wall_s = time_passes(step, [None], iters, dev)
        rec = (
            dict(work.columns)
            if lm
            else {
                "image_size": work.image_size,
                "channels_last": work.channels_last,
                "weights": work.info.weights,
                "transform": work.transform,
                "analytic_flop_calls": [list(c) for c in counts.flop_calls],
            }
        )
        rec.update(compile_s=work.compile_s, samples_timed=len(times_ms) * case.batch_size, timed_wall_s=wall_s)
        rec.update(results.analytic_fields(counts, ceilings, case.precision, times_ms, case.batch_size))
        rec.update(mon.record())
        if cuda:
            import torch

            rec["peak_mem_bytes"] = torch.cuda.max_memory_allocated(dev)
        work = step = None  # free the model and its activations before ncu's own process runs the step
        try:
            fields, kernels = self._ncu(case, spec, dev, ceilings, rec.get("analytic_flops"), counts.flop_calls, lm)
        except Exception as exc:  # the analytic and timed results stay; the reason is on the row
            fields, kernels = {"ncu_status": "error", "ncu_error": one_line(exc)}, []
        if fields.get("ncu_time_s") and rec.get("step_time_s"):  # how far ncu's isolated replays are from the step
            fields["ncu_time_over_step"] = fields["ncu_time_s"] / rec["step_time_s"]
        rec.update(fields, _kernels=kernels)  # the charts (``chart_dir``) are drawn from the stored row: api.profile
        return rec, {"step_time_ms": times_ms, **mon.series()}

    def _ncu(self, case, spec, device, ceilings, analytic_flops, flop_calls=(), lm: bool = False):
        """``(fields, kernel rows)``; an NcuError becomes ``ncu_status``/``ncu_error``. A language model's kernels
        (``lm``) fall in the transformer families (:func:`accelbench.core.kernels.classify_transformer`)."""
        import dataclasses

        from accelbench.core import kernels as kfam
        from accelbench.scenarios.profile import ncu, results

        mode = spec.settings.ncu
        if mode == "off" or (device.type != "cuda" and mode == "auto"):
            return {
                "ncu_status": "skipped",
                "ncu_error": "turned off" if mode == "off" else "ncu profiles CUDA GPUs only",
            }, []
        if device.type != "cuda":
            return {"ncu_status": "error", "ncu_error": "ncu needs a CUDA device"}, []
        keep = str(Path(spec.settings.ncu_csv_dir) / (slug(case) + ".csv")) if spec.settings.ncu_csv_dir else None
        try:
            prof = ncu.run(spec, case, timeout_s=spec.settings.ncu_timeout_s, keep_csv=keep)
        except ncu.NcuError as exc:
            status = "unavailable" if "not found" in str(exc) and mode == "auto" else "error"
            return {"ncu_status": status, "ncu_error": str(exc)}, []
        fields = {
            "ncu_status": "ok",
            "ncu_error": None,
            "ncu_wall_s": prof.wall_s,
            "ncu_missing_metrics": list(prof.missing) or None,
            "ncu_metrics": list(prof.metrics),
        }
        found = prof.kernels
        if lm:
            found = [dataclasses.replace(k, family=kfam.classify_transformer(k.name)) for k in found]
            fields.update(
                results.ncu_fields(
                    found, ceilings, case.precision, analytic_flops, kfam.TRANSFORMER_FAMILIES, gemm="gemm"
                )
            )
        else:
            fields.update(results.ncu_fields(found, ceilings, case.precision, analytic_flops))
        paired = None if lm else results.pair_layers(found, flop_calls)
        fields.update(results.layer_fields(paired))
        layers = results.kernel_layers(paired)
        return fields, [results.kernel_row(k, ceilings, layers.get(k.index)) for k in found]

    def after_store(self, store, case_id: int, rec: dict[str, Any], extra: dict[str, Any]) -> None:
        from accelbench.scenarios.profile import storage

        storage.save_kernels(store, case_id, extra.get("_kernels") or [])

    def export_extra(self, store, run_id: int, doc: dict) -> None:
        from accelbench.scenarios.profile import storage

        storage.export_extra(store, run_id, doc)

    def import_extra(self, store, run_id: int, doc: dict, case_ids: dict[str, int]) -> None:
        from accelbench.scenarios.profile import storage

        storage.import_extra(store, doc, case_ids)


register(Profile())
