"""Sweep specification and planning: ``SweepSpec`` -> ``expand(spec)`` -> ``list[Case]``.

Pure code: no torch import. Defaults depend on whether the sweep runs on a GPU (the full study) or a
CPU (a sweep that finishes in about a minute on 2 cores).
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.errors import ConfigError

PRECISIONS = ("fp32", "tf32", "amp-fp16", "amp-bf16", "fp16", "bf16")
MODES = ("eager", "compile", "cudagraphs", "max-autotune")
CHANNELS_LAST = ("auto", "on", "off")
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")

GPU_DEFAULTS: dict[str, Any] = {
    "batch_sizes": tuple(2**i for i in range(11)),  # 1..1024
    "precisions": ("fp32", "tf32", "amp-fp16", "amp-bf16"),
    "modes": ("eager", "compile"),
    "images": 1000,
    "warmup_batches": 5,
    "min_timed_batches": 30,
    "min_time_s": 0.5,
}
CPU_DEFAULTS: dict[str, Any] = {
    # About a minute for ResNet-50 at 224x224 on 2 cores (~0.1 s an image).
    "batch_sizes": (1, 8, 32),
    "precisions": ("fp32",),
    "modes": ("eager",),
    "images": 32,
    "warmup_batches": 1,
    "min_timed_batches": 3,
    "min_time_s": 0.0,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepSpec:
    """A sweep: the cross product models x batch_sizes x precisions x modes.

    Attributes:
        models: model names (see :func:`accelbench.models.create_model`).
        batch_sizes: samples per forward pass, each >= 1.
        precisions: subset of ``PRECISIONS``.
        modes: subset of ``MODES``.
        channels_last: ``auto`` (on for convolutional models on CUDA at reduced/TF32 precision), ``on``, ``off``.
        images: samples processed per pass; batches cycle through the data to fill the last batch.
        data: ``cifar10-test``, ``synthetic``, or a path to an ImageFolder directory / .tar / .tar.gz.
        image_size: square input side in pixels; ``None`` takes the model's native size.
        device: ``auto``, ``cpu``, ``cuda`` or ``cuda:N``.
        include_transfer: time the host-to-device copy of each batch as well.
        warmup_batches: untimed batches after the accuracy pass.
        min_timed_batches / min_time_s: timed passes repeat until both are reached.
        seed: seed for synthetic data and random weights.
        telemetry_period_ms: telemetry sampling period (ms); 0 turns the sampler thread off (energy
            counters are still read at the window edges).
        idle_s: seconds of idle-power measurement before the sweep; 0 skips it.
        price_per_hour: USD per device-hour, overriding the shipped price list.
        kwh_price: USD per kWh for the electricity cost; None leaves it out.
        skip_bad_images: drop image files that do not decode (counted) instead of stopping with an error.
    """

    models: tuple[str, ...] = ("resnet50",)
    batch_sizes: tuple[int, ...] = CPU_DEFAULTS["batch_sizes"]
    precisions: tuple[str, ...] = CPU_DEFAULTS["precisions"]
    modes: tuple[str, ...] = CPU_DEFAULTS["modes"]
    channels_last: str = "auto"
    images: int = CPU_DEFAULTS["images"]
    data: str = "cifar10-test"
    image_size: int | None = None
    device: str = "auto"
    include_transfer: bool = False
    warmup_batches: int = CPU_DEFAULTS["warmup_batches"]
    min_timed_batches: int = CPU_DEFAULTS["min_timed_batches"]
    min_time_s: float = CPU_DEFAULTS["min_time_s"]
    seed: int = 0
    telemetry_period_ms: float = 100.0
    idle_s: float = 3.0
    price_per_hour: float | None = None
    kwh_price: float | None = None
    skip_bad_images: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def spec_hash(self) -> str:
        """Stable 16-hex digest of the spec, used to find a run to ``--resume``."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True, kw_only=True, slots=True)
class Case:
    """One point of the sweep. ``key`` identifies it within a run (for resume)."""

    model: str
    batch_size: int
    precision: str
    mode: str
    channels_last: str
    images: int
    data: str
    image_size: int | None
    device: str
    include_transfer: bool

    @property
    def key(self) -> str:
        return f"{self.model}|bs={self.batch_size}|{self.precision}|{self.mode}|cl={self.channels_last}"


def _check_choices(name: str, values: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    if not values:
        raise ConfigError(name, values, "a non-empty list of " + ", ".join(allowed))
    for v in values:
        if v not in allowed:
            raise ConfigError(name, v, ", ".join(allowed))


def validate(spec: SweepSpec) -> None:
    """Raise :class:`ConfigError` naming the first invalid field and its allowed values."""
    if not spec.models or any(not isinstance(m, str) or not m for m in spec.models):
        raise ConfigError("model", spec.models, "one or more model names")
    if not spec.batch_sizes or any(
        isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in spec.batch_sizes
    ):
        raise ConfigError("batch_sizes", spec.batch_sizes, "positive integers, e.g. 1,8,32")
    _check_choices("precision", spec.precisions, PRECISIONS)
    _check_choices("mode", spec.modes, MODES)
    if spec.channels_last not in CHANNELS_LAST:
        raise ConfigError("channels_last", spec.channels_last, ", ".join(CHANNELS_LAST))
    if isinstance(spec.images, bool) or not isinstance(spec.images, int) or spec.images < 1:
        raise ConfigError("images", spec.images, "an integer >= 1")
    if spec.image_size is not None and (isinstance(spec.image_size, bool) or not isinstance(spec.image_size, int)
                                        or spec.image_size < 8):
        raise ConfigError("image_size", spec.image_size, "an integer >= 8")
    if not isinstance(spec.device, str) or not _DEVICE_RE.match(spec.device):
        raise ConfigError("device", spec.device, "auto, cpu, cuda, cuda:N")
    if not isinstance(spec.channels_last, str):
        raise ConfigError("channels_last", spec.channels_last, ", ".join(CHANNELS_LAST))
    if not isinstance(spec.data, str) or not spec.data:
        raise ConfigError("data", spec.data, "cifar10-test, synthetic, or a path")
    for name in ("warmup_batches", "min_timed_batches"):
        v = getattr(spec, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(name, v, "an integer >= 0")
    if not is_number(spec.min_time_s, low=0):
        raise ConfigError("min_time_s", spec.min_time_s, "a number >= 0")
    for name in ("include_transfer", "skip_bad_images"):
        if not isinstance(getattr(spec, name), bool):
            raise ConfigError(name, getattr(spec, name), "true or false")
    if not isinstance(spec.seed, int) or isinstance(spec.seed, bool):
        raise ConfigError("seed", spec.seed, "an integer")
    if not isinstance(spec.extra, dict):
        raise ConfigError("extra", spec.extra, "a table of settings")
    _validate_telemetry(spec)


def _validate_telemetry(spec: SweepSpec) -> None:
    p = spec.telemetry_period_ms
    if not is_number(p) or not (p == 0 or 5 <= p <= 60000):
        raise ConfigError("telemetry_period_ms", p, "0 (sampler off) or 5..60000 ms")
    if not is_number(spec.idle_s, 0, 600):
        raise ConfigError("idle_s", spec.idle_s, "0..600 seconds")
    for name in ("price_per_hour", "kwh_price"):
        v = getattr(spec, name)
        if v is not None and not is_number(v, low=0):
            raise ConfigError(name, v, "a number >= 0 (USD)")


def is_number(v: Any, low: float = -math.inf, high: float = math.inf) -> bool:
    """``v`` is a finite int or float (not a bool) in ``[low, high]`` (NaN and infinities are not numbers here)."""
    return not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and low <= v <= high


def expand(spec: SweepSpec, device: str | None = None) -> list[Case]:
    """Plan the sweep: one :class:`Case` per (model, batch size, precision, mode), in that nesting order.

    Args:
        spec: the validated sweep.
        device: the resolved device (e.g. ``cuda:0``); defaults to ``spec.device``.
    Returns:
        Cases ordered so that one model and precision run all their batch sizes before the next,
        which keeps the OOM boundary contiguous in the output.
    """
    dev = device or spec.device
    return [
        Case(
            model=m, batch_size=b, precision=p, mode=mode, channels_last=spec.channels_last,
            images=spec.images, data=spec.data, image_size=spec.image_size, device=dev,
            include_transfer=spec.include_transfer,
        )
        for m, p, mode, b in itertools.product(spec.models, spec.precisions, spec.modes, spec.batch_sizes)
    ]


_LIST_FIELDS = {"models": str, "batch_sizes": int, "precisions": str, "modes": str}
_ALIASES = {"model": "models", "precision": "precisions", "mode": "modes", "batch_size": "batch_sizes"}


def parse_list(name: str, value: Any) -> tuple:
    """Turn ``"1,8,32"``, ``[1, 8, 32]`` or ``8`` into a tuple of the field's type, or raise ConfigError."""
    kind = _LIST_FIELDS[name]
    items = [s.strip() for s in value.split(",") if s.strip()] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        items = [items]
    if kind is not int:
        return tuple(items)
    out = []
    for x in items:
        if isinstance(x, bool) or (isinstance(x, float) and not x.is_integer()) or not isinstance(x, (int, float, str)):
            raise ConfigError(name, value, "a comma-separated list of integers")
        try:
            out.append(int(x))
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(name, value, "a comma-separated list of integers") from None
    return tuple(out)


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a sweep TOML file (top-level keys or a ``[sweep]`` table) into a dict of spec fields.

    Raises:
        ConfigError: unreadable file, TOML syntax error, or an unknown key.
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError("config", str(path), f"a readable TOML file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("config", str(path), f"valid TOML ({' '.join(str(exc).split())})") from None
    except UnicodeDecodeError:
        raise ConfigError("config", str(path), "a UTF-8 TOML file") from None
    return table(raw, "sweep", path)


def table(raw: dict[str, Any], name: str, path: str | Path) -> dict[str, Any]:
    """The ``[name]`` table of a TOML document, else its top level.

    Raises:
        ConfigError: ``name`` is present but not a table.
    """
    if name not in raw:
        return raw
    if not isinstance(raw[name], dict):
        raise ConfigError(name, raw[name], f"a [{name}] table in {path}")
    return raw[name]


def build_spec(*layers: dict[str, Any], cuda: bool) -> SweepSpec:
    """Merge defaults for the device kind, then each layer in order (later wins; ``None`` is skipped).

    Args:
        layers: dicts of spec fields, e.g. a TOML config then CLI flags. Singular aliases
            (``model``, ``precision``, ``mode``, ``batch_size``) are accepted.
        cuda: whether the sweep will run on a GPU (selects ``GPU_DEFAULTS`` or ``CPU_DEFAULTS``).
    Raises:
        ConfigError: unknown field or invalid value.
    """
    merged: dict[str, Any] = dict(GPU_DEFAULTS if cuda else CPU_DEFAULTS)
    known = {f.name for f in dataclasses.fields(SweepSpec)}
    for layer in layers:
        for key, value in layer.items():
            key = _ALIASES.get(key.replace("-", "_"), key.replace("-", "_"))
            if value is None:
                continue
            if key not in known:
                raise ConfigError("config key", key, ", ".join(sorted(known - {"extra"})))
            merged[key] = parse_list(key, value) if key in _LIST_FIELDS else value
    if isinstance(merged.get("channels_last"), bool):
        merged["channels_last"] = "on" if merged["channels_last"] else "off"
    return SweepSpec(**merged)
