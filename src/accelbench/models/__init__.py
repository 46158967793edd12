"""Model registry: ``create_model(name) -> LoadedModel``.

Names resolve in this order:
1. the registry ``MODELS`` (``cifar-resnet20``, ``cifar-resnet56``, filled by ``@register``, and the models of
   installed distributions: entry point group ``accelbench.models``, a factory ``fn(pretrained) -> LoadedModel``
   under the entry point's name, :mod:`accelbench.core.plugins`);
2. ``timm:<name>``: a timm model (random weights: no hub access is assumed);
3. ``package.module:factory``: a user callable returning an ``nn.Module``;
4. a torchvision classification model name (``resnet50``, ``vit_b_16``, ...), with its ImageNet
   weights when they are already in the torch hub cache, else random weights.

A user factory (``package.module:factory``) is code: naming one imports that module (the current directory
first on ``sys.path``, as ``python -m`` has it) and calls the factory with no arguments, as a Python import
would. The returned module, or else the factory's module, may declare as attributes (all optional):
``label_space`` (``imagenet-1k``, ``cifar10`` or ``folder``: which class each output is), ``input_mean`` /
``input_std`` (3 floats on the 0..1 pixel scale, default ImageNet's), ``default_image_size`` (pixels, default
224), ``crop_pct`` (input side / shorter side before the center crop; default none: no crop) and
``interpolation`` (``bilinear``, ``bicubic``). The flags ``--label-space``, ``--mean``, ``--std``, ``--resize``,
``--crop-pct`` override them for any model.

A factory runs with ``sys.argv`` holding its module's name only (accelbench's own flags are not its arguments),
and its ``sys.exit`` (an ``argparse`` parser's refusal) is a :class:`ModelFactoryError`, never accelbench's exit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.core.config import put
from accelbench.core.errors import MissingDependencyError, UnknownModelError, did_you_mean

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelInfo:
    """What the runner needs to know about a model besides its module.

    Attributes:
        name: the name it was created by.
        source: ``registry``, ``torchvision``, ``timm`` or ``user``.
        pretrained: True when real trained weights were loaded.
        weights: a one-line description (``random``, a checkpoint file or weights enum).
        label_space: ``imagenet-1k``, ``cifar10`` or None; accuracy is computed only when it equals
            the data's label space.
        image_size: native square input side in pixels.
        mean, std: per-channel input normalisation (0..1 pixel scale).
        crop_pct: input side / shorter side before the evaluation center crop (torchvision weights' transform,
            timm ``pretrained_cfg``); None: images are resized straight to the input size.
        interpolation: the evaluation resize's interpolation (``bilinear``, ``bicubic``).
    """

    name: str
    source: str
    pretrained: bool
    weights: str
    label_space: str | None
    image_size: int
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    crop_pct: float | None = None
    interpolation: str = "bilinear"


@dataclass(frozen=True, slots=True)
class LoadedModel:
    module: Any  # torch.nn.Module, in eval mode, on the CPU
    info: ModelInfo


MODELS: dict[str, Callable[[bool], LoadedModel]] = {}


def register(name: str) -> Callable:
    """Decorator: add ``fn(pretrained: bool) -> LoadedModel`` to ``MODELS`` under ``name``.

    Raises:
        ValueError: another model has that name.
    """

    def deco(fn: Callable[[bool], LoadedModel]) -> Callable[[bool], LoadedModel]:
        return put(MODELS, name, fn, "model")

    return deco


def _cifar(depth: int) -> Callable[[bool], LoadedModel]:
    def build(pretrained: bool) -> LoadedModel:
        from accelbench.models.cifar_resnet import WEIGHT_FILES, cifar_resnet

        module = cifar_resnet(depth, pretrained=pretrained)
        has = pretrained and depth in WEIGHT_FILES
        info = ModelInfo(
            name=f"cifar-resnet{depth}",
            source="registry",
            pretrained=has,
            weights=WEIGHT_FILES[depth] if has else "random",
            label_space="cifar10",
            image_size=32,
        )
        return LoadedModel(module, info)

    return build


register("cifar-resnet20")(_cifar(20))
register("cifar-resnet56")(_cifar(56))


def _adopt(name: str, obj) -> None:
    """An ``accelbench.models`` entry point's factory ``fn(pretrained) -> LoadedModel``, under the entry point's name."""
    if not callable(obj):
        raise TypeError(f"{obj!r} is not a model factory fn(pretrained) -> LoadedModel")
    register(name)(obj)


def list_models() -> list[str]:
    """Registry names plus every torchvision classification model name."""
    import torchvision

    return sorted(MODELS) + sorted(torchvision.models.list_models(module=torchvision.models))


def check_model(name: str) -> None:
    """Raise the error :func:`create_model` would raise for an unknown ``name``, without building the model.

    A user factory's module is imported and the factory looked up, not called.

    Raises:
        UnknownModelError: the name matches nothing; the message says where it looked.
        MissingDependencyError: ``timm:`` was asked for without timm installed.
    """
    if not isinstance(name, str) or not name or name in MODELS:
        if not name:
            raise UnknownModelError("empty model name")
        return
    if name.startswith("timm:"):
        _timm_lookup(name.removeprefix("timm:"))
    elif ":" in name:
        _user_factory(name)
    else:
        _torchvision_name(name)


def create_model(name: str, pretrained: bool = True) -> LoadedModel:
    """Build a model by name (see module docstring), in eval mode on the CPU.

    Raises:
        UnknownModelError: the name matches nothing; the message lists where it looked.
        MissingDependencyError: ``timm:`` was asked for without timm installed.
    """
    if name in MODELS:
        loaded = MODELS[name](pretrained)
    elif name.startswith("timm:"):
        loaded = _timm_model(name, name.removeprefix("timm:"))
    elif ":" in name:
        loaded = _user_model(name)
    else:
        loaded = _torchvision_model(name, pretrained)
    loaded.module.eval()
    return loaded


# The sources whose build is a pure function of the seed (random initialisation from torch's CPU generator,
# trained weights from a file): a copy of an earlier build is the same model. A user factory may do anything.
def _seed_deterministic(name: str) -> bool:
    return name in MODELS or (":" not in name)


@dataclass
class SeededBuilds:
    """Per-sweep cache of the last model built from a seed: later cases of the same model get a copy of it instead
    of a new build (copying a module is several times faster than initialising it at random), with the same
    weights and the same random state after it.

    Attributes:
        key: ``(name, seed)`` of the cached build, or None; module, info: the build, never handed out itself;
        rng_after: torch's CPU generator state right after the build.
    """

    key: tuple | None = None
    module: Any = None
    info: Any = None
    rng_after: Any = None

    def create(self, name: str, seed: int) -> LoadedModel:
        """``torch.manual_seed(seed)`` then :func:`create_model` (``name``, trained weights where found).

        A registry or torchvision model built before under the same seed comes back as a copy of that build, and
        the CPU generator is left where the build left it (the build draws from no other generator: the
        model is built on the CPU), so the case sees exactly what a fresh build gives it.

        Raises:
            as :func:`create_model`.
        """
        import copy

        import torch

        torch.manual_seed(seed)
        if self.key == (name, seed):
            torch.set_rng_state(self.rng_after)
            return LoadedModel(copy.deepcopy(self.module), self.info)
        self.key = self.module = self.info = self.rng_after = None  # one model held at a time (host memory)
        loaded = create_model(name)
        if _seed_deterministic(name):
            self.key, self.info, self.rng_after = (name, seed), loaded.info, torch.get_rng_state()
            self.module = copy.deepcopy(loaded.module)
        return loaded


def _timm_lookup(timm_name: str):
    try:
        import timm
    except ImportError:
        raise MissingDependencyError("timm", "timm") from None
    if not timm_name or not timm.list_models(timm_name):
        raise UnknownModelError(f"unknown timm model {timm_name!r} (see timm.list_models())")
    return timm


def _timm_model(name: str, timm_name: str) -> LoadedModel:
    timm = _timm_lookup(timm_name)
    module = timm.create_model(timm_name, pretrained=False)
    cfg = getattr(module, "pretrained_cfg", {}) or {}
    size = int(cfg.get("input_size", (3, 224, 224))[-1])
    info = ModelInfo(
        name=name,
        source="timm",
        pretrained=False,
        weights="random",
        label_space=None,
        image_size=size,
        mean=tuple(cfg.get("mean", IMAGENET_MEAN)),
        std=tuple(cfg.get("std", IMAGENET_STD)),
        crop_pct=cfg.get("crop_pct"),
        interpolation=cfg.get("interpolation") or "bilinear",
    )
    return LoadedModel(module, info)


def _user_factory(name: str) -> Callable:
    from accelbench.models.user import factory

    return factory(name)


def _user_model(name: str) -> LoadedModel:
    from accelbench.models.user import build

    module, declared = build(
        name, ("label_space", "default_image_size", "input_mean", "input_std", "crop_pct", "interpolation")
    )
    info = ModelInfo(
        name=name,
        source="user",
        pretrained=False,
        weights="as built by the factory",
        label_space=declared.get("label_space"),
        image_size=int(declared.get("default_image_size", 224)),
        mean=tuple(declared.get("input_mean", IMAGENET_MEAN)),
        std=tuple(declared.get("input_std", IMAGENET_STD)),
        crop_pct=declared.get("crop_pct"),
        interpolation=declared.get("interpolation", "bilinear"),
    )
    return LoadedModel(module, info)


def _torchvision_name(name: str) -> None:
    import torchvision

    known = torchvision.models.list_models(module=torchvision.models)
    if name not in known:
        raise UnknownModelError(
            f"unknown model {name!r}{did_you_mean(name, [*MODELS, *known])}: use a torchvision classification model "
            f"(e.g. resnet50; accelbench models lists them), {', '.join(sorted(MODELS))}, timm:<name>, or "
            "package.module:factory"
        )


def _torchvision_model(name: str, pretrained: bool) -> LoadedModel:
    import torch
    import torchvision

    _torchvision_name(name)
    weights = torchvision.models.get_model_weights(name).DEFAULT if pretrained else None
    cached = None
    if weights is not None:
        # Never download: the hub may be unreachable. Use the weights only if already cached.
        path = os.path.join(torch.hub.get_dir(), "checkpoints", os.path.basename(weights.url))
        cached = path if os.path.exists(path) else None
    module = torchvision.models.get_model(name, weights=weights if cached else None)
    size = 299 if name == "inception_v3" else 224
    crop_pct, interp = _weights_transform(weights)
    info = ModelInfo(
        name=name,
        source="torchvision",
        pretrained=bool(cached),
        weights=str(weights) if cached else "random",
        label_space="imagenet-1k" if cached else None,
        image_size=size,
        crop_pct=crop_pct,
        interpolation=interp,
    )
    return LoadedModel(module, info)


def _weights_transform(weights) -> tuple[float | None, str]:
    """``(crop_pct, interpolation)`` of a torchvision weights enum's eval transform (``weights.transforms()``,
    e.g. ResNet-50 V1: resize 256, crop 224 -> 0.875, bilinear); ``(None, "bilinear")`` without weights."""
    if weights is None:
        return None, "bilinear"
    try:
        t = weights.transforms()
        return t.crop_size[0] / t.resize_size[0], t.interpolation.value
    except (AttributeError, IndexError, TypeError):  # a transform that is not the ImageClassification preset
        return None, "bilinear"


def with_overrides(info: ModelInfo, label_space: str | None = None, mean=None, std=None) -> ModelInfo:
    """``info`` with the user's label space and normalisation (``--label-space``, ``--mean``, ``--std``) where given."""
    import dataclasses

    changes = {k: v for k, v in (("label_space", label_space), ("mean", mean), ("std", std)) if v is not None}
    return dataclasses.replace(info, **changes) if changes else info


def _load_plugins() -> None:
    """Models of installed distributions (entry point group ``accelbench.models``), once: after the registry, so a
    plugin module may import this one."""
    from accelbench.core import plugins

    plugins.load("accelbench.models", _adopt)


_load_plugins()
