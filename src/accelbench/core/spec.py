"""One spec, one case: ``Spec`` -> ``scenario.cases(spec)`` -> ``list[Case]``.

A :class:`Spec` holds the fields every scenario shares (models, batch sizes, precisions, modes, data,
timing and telemetry settings) and ``settings``: a frozen dataclass of the scenario's own fields
(``include_transfer`` for inference, the optimizer for a training step, the epochs of a convergence run,
the steps of a profile...). A :class:`Case` is one point of the sweep: the shared description plus
``extras``, the scenario's typed per-case fields. Both flatten to plain dicts (TOML, flags, the stored
spec, the job a torchrun rank reads) and back, and one hasher digests a spec for ``--resume``.

Pure code: no torch import. The scenario object (:mod:`accelbench.scenarios`) is passed in wherever
its settings or extras type is needed, so this module imports no scenario.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from accelbench.core.config import (
    LIST_FIELDS,
    check_bool,
    check_int,
    check_number,
    check_types,
    is_int,
    is_number,
    parse_list,
    unique,
)
from accelbench.core.errors import ConfigError
from accelbench.core.options import declared_fields

CHANNELS_LAST = ("auto", "on", "off")
TELEMETRY_ISOLATIONS = ("auto", "thread", "process")
DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")
# Upper bounds of the counts and sizes (larger ones overflow torch's 32-bit indexing or memory long before)
COUNT_MAX, SIDE_MAX = 2**31 - 1, 65536
ALIASES = {"model": "models", "precision": "precisions", "mode": "modes", "batch_size": "batch_sizes"}
# The shared fields of the scenarios that measure image batches in timed windows (a scenario declares it takes them:
# ``Scenario.image_inputs``); the others refuse them as one group, and their cases' keys and rows carry no memory format.
IMAGE_FIELDS = (
    "channels_last",
    "images",
    "data",
    "image_size",
    "skip_bad_images",
    "warmup_batches",
    "min_timed_batches",
    "min_time_s",
    "cudnn_benchmark",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Settings:
    """Base of a scenario's settings. ``volatile`` names fields left out of the spec hash (where files go)."""

    volatile: ClassVar[tuple[str, ...]] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class Windowed(Settings):
    """Settings of a scenario that times windows (inference, training step).

    Attributes:
        repeats: timed windows per case (``--repeats``), each of the same number of steps; the window is the
            statistical unit of the per-case confidence intervals (:mod:`accelbench.core.ci`) and of
            ``accelbench compare``. 1 keeps one window and no intervals.
    """

    repeats: int = 1

    def __post_init__(self) -> None:
        check_int("repeats", self.repeats, 1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Spec:
    """A sweep of one scenario: models x batch_sizes x precisions x modes, plus the scenario's settings.

    Attributes:
        scenario: the scenario's name (``inference``, ``train_step``, ``converge``, ``profile``, ...).
        models: model names (see :func:`accelbench.models.create_model`).
        batch_sizes: samples per step, each >= 1.
        precisions: names from :data:`accelbench.precisions.PRECISIONS`.
        modes: execution modes, each a backend (:data:`accelbench.backends.BACKENDS`) or a generation engine
            (:data:`accelbench.backends.engine.ENGINES`): :func:`accelbench.backends.names`.
        channels_last: ``auto`` (NHWC where it helps: convolutions on CUDA below fp32), ``on``, ``off``.
        images: images used (inference: per pass; training: distinct images cycled); None: all of the data.
        data: ``cifar10-test``, ``cifar10-train-5k``, ``synthetic``, or an ImageFolder directory / .tar(.gz); None for
            a scenario without image data (its defaults say so: ``generate``'s prompts are its own settings).
        image_size: square input side in pixels; None takes the model's native size.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        warmup_batches: untimed steps before timing.
        min_timed_batches / min_time_s: the timed window runs until both are reached (whole passes in
            the training step, steps in inference).
        seed: seed for synthetic data, random weights and labels.
        telemetry_period_ms: telemetry sampling period (ms); 0 turns the sampler thread off.
        telemetry_isolation: where the sampler runs: ``thread`` (of the measured process), ``process`` (a sampler
            process: the loop keeps its GIL), ``auto``: ``process`` for a host-bound backend, else ``thread``.
        idle_s: seconds of idle-power measurement before the sweep; 0 skips it.
        price_per_hour: USD per device-hour, overriding the shipped price list.
        kwh_price: USD per kWh for the electricity cost; None leaves it out.
        skip_bad_images: drop image files that do not decode (counted) instead of stopping with an error.
        cudnn_benchmark: ``torch.backends.cudnn.benchmark`` during each case; None leaves torch's default (off).
        settings: the scenario's own fields (a frozen :class:`Settings` dataclass).
    """

    scenario: str
    models: tuple[str, ...] = ()
    batch_sizes: tuple[int, ...] = ()
    precisions: tuple[str, ...] = ("fp32",)
    modes: tuple[str, ...] = ("eager",)
    channels_last: str = "auto"
    images: int | None = None
    data: str | None = "cifar10-test"
    image_size: int | None = None
    device: str = "auto"
    warmup_batches: int = 1
    min_timed_batches: int = 3
    min_time_s: float = 0.0
    seed: int = 0
    telemetry_period_ms: float = 100.0
    telemetry_isolation: str = "auto"
    idle_s: float = 3.0
    price_per_hour: float | None = None
    kwh_price: float | None = None
    skip_bad_images: bool = False
    cudnn_benchmark: bool | None = None
    settings: Settings = field(default_factory=Settings)

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        """Flat dict: the shared fields, ``scenario``, and the settings' fields at the top level."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "settings"}
        out.update(dataclasses.asdict(self.settings))
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def spec_hash(self, **extra: Any) -> str:
        """Stable 16-hex digest of everything that changes the results (``--resume`` finds runs by it): every
        field of :meth:`to_dict` but the settings' ``volatile`` ones (where files go).

        Args:
            extra: further identity, e.g. the launch (GPUs, nodes, global batch) of a distributed run.
        """
        volatile = type(self.settings).volatile
        doc = {k: v for k, v in self.to_dict().items() if k not in volatile}
        return digest({**doc, **extra})

    def replace(self, **changes: Any) -> Spec:
        return dataclasses.replace(self, **changes)


def digest(doc: Any) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of ``doc``: THE hasher of specs."""
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()[:16]


def validate(spec: Spec) -> None:
    """Type and range checks of the shared fields (scenario rules: ``scenario.validate``).

    Raises:
        ConfigError: naming the first invalid field and its allowed values.
    """
    if not isinstance(spec.models, tuple) or any(not isinstance(m, str) or not m for m in spec.models):
        raise ConfigError("model", spec.models, "model names")
    for b in spec.batch_sizes if isinstance(spec.batch_sizes, tuple) else [spec.batch_sizes]:
        if not is_int(b, 1, COUNT_MAX):
            raise ConfigError("batch_sizes", b, f"positive integers up to {COUNT_MAX}, e.g. 1,8,32")
    for name in ("precisions", "modes"):
        v = getattr(spec, name)
        if not isinstance(v, tuple) or any(not isinstance(x, str) for x in v):
            raise ConfigError(name[:-1], v, "names")
    if not isinstance(spec.channels_last, str) or spec.channels_last not in CHANNELS_LAST:
        raise ConfigError("channels_last", spec.channels_last, ", ".join(CHANNELS_LAST))
    if spec.images is not None:
        check_int("images", spec.images, 1, COUNT_MAX)
    if spec.image_size is not None:
        check_int("image_size", spec.image_size, 8, SIDE_MAX)
    if not isinstance(spec.device, str) or not DEVICE_RE.match(spec.device):
        raise ConfigError("device", spec.device, "auto, cpu, cuda, cuda:N")
    if spec.data is not None and (not isinstance(spec.data, str) or not spec.data):
        raise ConfigError("data", spec.data, "cifar10-test, synthetic, or a path")
    for name in ("warmup_batches", "min_timed_batches"):
        check_int(name, getattr(spec, name), 0, COUNT_MAX)
    check_number("min_time_s", spec.min_time_s)
    check_bool("skip_bad_images", spec.skip_bad_images)
    if spec.cudnn_benchmark is not None:
        check_bool("cudnn_benchmark", spec.cudnn_benchmark)
    if not is_int(spec.seed):
        raise ConfigError("seed", spec.seed, "an integer")
    p = spec.telemetry_period_ms
    if not is_number(p) or not (p == 0 or 5 <= p <= 60000):
        raise ConfigError("telemetry_period_ms", p, "0 (sampler off) or 5..60000 ms")
    if spec.telemetry_isolation not in TELEMETRY_ISOLATIONS:
        raise ConfigError("telemetry_isolation", spec.telemetry_isolation, ", ".join(TELEMETRY_ISOLATIONS))
    if not is_number(spec.idle_s, 0, 600):
        raise ConfigError("idle_s", spec.idle_s, "0..600 seconds")
    for name in ("price_per_hour", "kwh_price"):
        if getattr(spec, name) is not None:
            check_number(name, getattr(spec, name), allowed="a number >= 0 (USD)")


SHARED = tuple(f.name for f in dataclasses.fields(Spec) if f.name not in ("scenario", "settings"))


class SpecScenario(Protocol):
    """What building a spec or a case asks of its scenario (:class:`accelbench.scenarios.Scenario` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def settings_type(self) -> type[Settings]: ...

    @property
    def extras_type(self) -> type[Extras]: ...

    @property
    def rejects(self) -> tuple[str, ...]: ...  # shared fields the scenario does not take

    @property
    def image_inputs(self) -> bool: ...  # it takes the IMAGE_FIELDS

    def defaults(self, cuda: bool) -> dict[str, Any]: ...

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]: ...

    def validate(self, spec: Spec) -> None: ...


def merge(scenario: SpecScenario, layers: tuple[dict[str, Any], ...], cuda: bool) -> dict[str, Any]:
    """The scenario's defaults for the device kind, then each layer (later wins; ``None`` is skipped).

    Keys are the shared fields (but those the scenario ``rejects``, and the :data:`IMAGE_FIELDS` of a scenario
    without ``image_inputs``: they would silently do nothing), the scenario's settings fields and aliases (``model``, ``batch-sizes``, the scenario's own ``aliases``).

    Raises:
        ConfigError: an unknown key.
    """
    refused = set(scenario.rejects) | (set() if getattr(scenario, "image_inputs", True) else set(IMAGE_FIELDS))
    known = (set(SHARED) - refused) | {f.name for f in dataclasses.fields(scenario.settings_type)}
    aliases = {**ALIASES, **getattr(scenario, "aliases", {})}
    declared = declared_fields(scenario.settings_type)
    merged: dict[str, Any] = dict(scenario.defaults(cuda))
    for layer in layers:
        if not isinstance(layer, dict):
            raise ConfigError("config", layer, "a table of settings")
        for key, value in layer.items():
            if not isinstance(key, str):
                raise ConfigError("config key", key, ", ".join(sorted(known)))
            key = key.replace("-", "_")
            key = aliases.get(key, key)
            if value is None:
                continue
            if key not in known:
                raise ConfigError("config key", key, ", ".join(sorted(known)), choices=sorted(known | set(aliases)))
            if key in declared:
                merged[key] = declared[key].parse(value)
            else:
                merged[key] = parse_list(key, value) if key in LIST_FIELDS else value
    if isinstance(merged.get("channels_last"), bool):
        merged["channels_last"] = "on" if merged["channels_last"] else "off"
    lists = [*LIST_FIELDS, *(n for n, opt in declared.items() if opt.many and not opt.raw)]
    for key in lists:
        if isinstance(merged.get(key), tuple):
            merged[key] = unique(key, merged[key])
    return merged


def build_spec(scenario: SpecScenario, *layers: dict[str, Any], cuda: bool) -> Spec:
    """Merge the scenario's defaults and ``layers`` into a validated :class:`Spec`.

    Args:
        scenario: a :class:`accelbench.scenarios.Scenario` (settings type, defaults, validation).
        layers: dicts of fields, e.g. a TOML config then CLI flags.
        cuda: whether the work runs on GPUs (selects the scenario's GPU or CPU defaults).
    Raises:
        ConfigError: unknown field or invalid value.
    """
    merged = scenario.normalize(merge(scenario, layers, cuda))
    return spec_from_dict(scenario, merged)


def spec_from_dict(scenario: SpecScenario, doc: dict[str, Any]) -> Spec:
    """Rebuild a :class:`Spec` from :meth:`Spec.to_dict` (lists become tuples).

    Raises:
        ConfigError: a field of the wrong type or out of range.
    """
    names = {f.name for f in dataclasses.fields(scenario.settings_type)}
    shared: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in SHARED}
    own = {k: tuple(v) if isinstance(v, list) else v for k, v in doc.items() if k in names}
    check_types(scenario.settings_type, own)
    try:
        settings = scenario.settings_type(**own)
    except TypeError as exc:  # a field the settings do not have
        raise ConfigError("config key", str(exc), ", ".join(sorted(names))) from None
    spec = Spec(scenario=scenario.name, settings=settings, **shared)
    scenario.validate(spec)
    return spec


@dataclass(frozen=True, kw_only=True, slots=True)
class Extras:
    """Base of a scenario's per-case fields; ``key_suffix`` extends the case key. ``memory_format``: the case's
    ``channels_last`` is part of its key (False for a scenario without image inputs: nothing to tell apart)."""

    memory_format: ClassVar[bool] = True

    def key_suffix(self) -> str:
        return ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One point of a sweep. ``key`` identifies it within a run (resume, one row per case).

    Attributes:
        scenario: the scenario that runs it.
        model, batch_size, precision, mode, channels_last: what runs (None where a scenario has none).
        images, data, image_size: the input.
        device: the resolved device (``cuda:0``, ``cpu``; ``cuda`` for a case every rank runs on its own GPU).
        extras: the scenario's typed per-case fields (an :class:`Extras` dataclass).
        name: the key of a case without a model (input pipeline, interconnect); None otherwise.
    """

    scenario: str
    model: str | None = None
    batch_size: int | None = None
    precision: str | None = None
    mode: str | None = None
    channels_last: str = "auto"
    images: int | None = None
    data: str | None = None
    image_size: int | None = None
    device: str = "cpu"
    extras: Extras = field(default_factory=Extras)
    name: str | None = None

    @property
    def key(self) -> str:
        """``model|bs=B|precision|mode|cl=C`` plus the extras' suffix (no ``|cl=C`` where the extras say the memory
        format tells no cases apart: ``model|bs=B|precision|mode|p=128|n=128``); a case without a model: its ``name``
        plus the suffix."""
        if self.name is not None:
            return self.name + self.extras.key_suffix()
        cl = f"|cl={self.channels_last}" if self.extras.memory_format else ""
        return f"{self.model}|bs={self.batch_size}|{self.precision}|{self.mode}{cl}" + self.extras.key_suffix()

    def to_dict(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extras"}
        out["extras"] = dataclasses.asdict(self.extras)
        out["key"] = self.key
        return out

    def replace(self, **changes: Any) -> Case:
        return dataclasses.replace(self, **changes)


# a stored key's memory format after the model, batch size, precision and mode
_CL_PART = re.compile(r"^((?:[^|]*\|){3}[^|]*)\|cl=[^|]*")


def current_key(stored: str, extras_type: type[Extras]) -> str:
    """A case key as stored by an earlier version, in today's format: a scenario whose extras leave the memory format
    out of the key (``memory_format`` False) once stored it as ``|cl=auto``; the rest are unchanged. A resumed run
    (``--resume``) matches its stored cases through it.

    Example: ``hf:gpt2|bs=1|fp32|eager|cl=auto|p=8|n=4`` -> ``hf:gpt2|bs=1|fp32|eager|p=8|n=4`` for the generate extras.
    """
    return stored if extras_type.memory_format else _CL_PART.sub(r"\1", stored, count=1)


def case_from_dict(scenario: SpecScenario, doc: dict[str, Any]) -> Case:
    """Rebuild a :class:`Case` from :meth:`Case.to_dict` (a torchrun job, an ncu target)."""
    extras = scenario.extras_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in doc["extras"].items()})
    fields = {k: v for k, v in doc.items() if k not in ("extras", "key")}
    return Case(extras=extras, **fields)


def grid(spec: Spec, device: str, extras: Extras | None = None) -> list[Case]:
    """One :class:`Case` per (model, precision, mode, batch size), batch size innermost, so one model and
    precision run all their batch sizes before the next (a contiguous OOM boundary)."""
    import itertools

    ex = extras if extras is not None else Extras()
    return [
        Case(
            scenario=spec.scenario,
            model=m,
            batch_size=b,
            precision=p,
            mode=mode,
            channels_last=spec.channels_last,
            images=spec.images,
            data=spec.data,
            image_size=spec.image_size,
            device=device,
            extras=ex,
        )
        for m, p, mode, b in itertools.product(spec.models, spec.precisions, spec.modes, spec.batch_sizes)
    ]
