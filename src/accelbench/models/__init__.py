"""Model registry: every name ``--model`` takes, what kind of model it is, and ``create_model(name) -> LoadedModel``.

Each model declares its kind (:data:`accelbench.models.base.KINDS`: an image classifier or a causal language model)
and its source; :func:`accelbench.models.base.lookup` answers "what is this name?" for every command, and each
scenario refuses a model of a kind it does not take (:attr:`accelbench.scenarios.Scenario.model_kind`). Names:

1. the named models of ``MODELS``: ``cifar-resnet20``, ``cifar-resnet56`` (bundled CIFAR-10 weights), the language
   models of :mod:`accelbench.models.hf` (``hf:<architecture>``, ``hf:tiny-shakespeare``), and the models of installed
   distributions (entry point group ``accelbench.models``: a factory ``fn(pretrained) -> LoadedModel``, an image
   classifier, under the entry point's name, or a :class:`accelbench.models.base.Model`;
   :mod:`accelbench.core.plugins`);
2. the families of ``FAMILIES``: ``hf:/path/to/checkpoint`` (a local folder), ``timm:<name>`` (a timm model, random
   weights: no hub access is assumed), ``package.module:factory`` (a user callable returning an ``nn.Module``), and a
   torchvision classification model name (``resnet50``, ``vit_b_16``, ...), with its ImageNet weights when they are
   already in the torch hub cache, else random weights.

A user factory (``package.module:factory``) is code: naming one imports that module (the current directory
first on ``sys.path``, as ``python -m`` has it) and calls the factory with no arguments, as a Python import
would. The returned module, or else the factory's module, may declare as attributes (all optional):
``label_space`` (``imagenet-1k``, ``cifar10`` or ``folder``: which class each output is), ``input_mean`` /
``input_std`` (3 floats on the 0..1 pixel scale, default ImageNet's), ``default_image_size`` (pixels, default
224), ``crop_pct`` (input side / shorter side before the center crop; default none: no crop) and
``interpolation`` (``bilinear``, ``bicubic``). The flags ``--label-space``, ``--mean``, ``--std``, ``--resize``,
``--crop-pct`` override them for any model. The factory or its module may declare ``model_kind`` (``image`` or
``lm``): then a command of the other kind refuses it before anything runs; undeclared, every command takes it.

A factory runs with ``sys.argv`` holding its module's name only (accelbench's own flags are not its arguments),
and its ``sys.exit`` (an ``argparse`` parser's refusal) is a :class:`ModelFactoryError`, never accelbench's exit.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.core.errors import MissingDependencyError, UnknownModelError
from accelbench.models.base import (
    FAMILIES,
    IMAGE,
    KINDS,
    LM,
    MODELS,
    SOURCES,
    Family,
    Model,
    ModelKindError,
    check,
    lookup,
    names,
    register,
    register_family,
)

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


def image_classifier(name: str, source: str = "plugin") -> Callable:
    """Decorator: register ``fn(pretrained: bool) -> LoadedModel``, an image classifier, in ``MODELS`` as ``name``.

    Raises:
        ValueError: another model has that name.
    """

    def deco(fn: Callable[[bool], LoadedModel]) -> Callable[[bool], LoadedModel]:
        register(Model(name=name, kind=IMAGE, source=source, build=fn))
        return fn

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


image_classifier("cifar-resnet20", "bundled")(_cifar(20))
image_classifier("cifar-resnet56", "bundled")(_cifar(56))


def _adopt(name: str, obj) -> None:
    """An ``accelbench.models`` entry point: a :class:`Model` (under its own name), or a factory
    ``fn(pretrained) -> LoadedModel`` of an image classifier, under the entry point's name."""
    if isinstance(obj, Model):
        register(obj)
    elif callable(obj):
        image_classifier(name)(obj)
    else:
        raise TypeError(f"{obj!r} is not a model factory fn(pretrained) -> LoadedModel")


def list_models(kind: str | None = None) -> list[str]:
    """Every listed name of ``kind`` (``image``, ``lm``; None: both): the named models, then every torchvision
    classification model name."""
    return names(kind)


def check_model(name: str, takes: str | None = None, command: str = "this command") -> Model:
    """Resolve ``name`` without building it (:func:`accelbench.models.base.check`); a command that takes one kind of
    model refuses another. A user factory's module is imported and the factory looked up, not called.

    Raises:
        ModelKindError: a model of another kind than ``takes``, one line naming the command that measures it.
        UnknownModelError: the name matches nothing; the message suggests names of its kind.
        MissingDependencyError: ``timm:`` or ``hf:`` was asked for without its extra installed.
    """
    return check(name, takes, command)


def create_model(name: str, pretrained: bool = True) -> LoadedModel:
    """Build an image classifier (or a user factory's model) by name (see module docstring), in eval mode on the CPU.

    Raises:
        ModelKindError: ``name`` is a language model (:func:`accelbench.models.lm_load.load_lm` loads those).
        UnknownModelError: the name matches nothing; the message lists where it looked.
        MissingDependencyError: ``timm:`` was asked for without timm installed.
    """
    from accelbench.core import stage

    model = lookup(name)
    if model.build is None:
        raise ModelKindError(name, model.kind or LM, IMAGE, "create_model")
    stage.enter("building the model")
    loaded = model.build(pretrained)
    loaded.module.eval()
    return loaded


# The sources whose build is a pure function of the seed (random initialisation from torch's CPU generator,
# trained weights from a file): a copy of an earlier build is the same model. A user factory may do anything.
def _seed_deterministic(name: str) -> bool:
    return lookup(name).source in ("bundled", "torchvision", "plugin")


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


def _timm_check(name: str) -> None:
    _timm_lookup(name.removeprefix("timm:"))


def _timm_model(name: str, pretrained: bool) -> LoadedModel:
    timm = _timm_lookup(name.removeprefix("timm:"))
    module = timm.create_model(name.removeprefix("timm:"), pretrained=False)
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


def _user_kind(name: str) -> str | None:
    from accelbench.models.user import declared_kind

    return declared_kind(name)


def _user_model(name: str, pretrained: bool) -> LoadedModel:
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


def _torchvision_names() -> list[str]:
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def _torchvision_model(name: str, pretrained: bool) -> LoadedModel:
    import torch
    import torchvision

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


register_family(
    Family(
        pattern="timm:<name>",
        kind=IMAGE,
        source="timm",
        prefix="timm:",
        claims=lambda name: True,
        check=_timm_check,
        build=_timm_model,
    )
)
register_family(
    Family(
        pattern="package.module:factory",
        kind=None,
        source="user",
        claims=lambda name: ":" in name,
        check=_user_kind,
        build=_user_model,
    )
)
register_family(
    Family(
        pattern="a torchvision classification model (accelbench models lists them)",
        kind=IMAGE,
        source="torchvision",
        claims=lambda name: ":" not in name and name in _torchvision_names(),
        build=_torchvision_model,
        names=_torchvision_names,
    )
)


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


from accelbench.models import hf  # noqa: E402  (registers the language models: after the image models' families)

_load_plugins()

__all__ = [
    "FAMILIES",
    "IMAGE",
    "KINDS",
    "LM",
    "MODELS",
    "SOURCES",
    "LoadedModel",
    "Model",
    "ModelInfo",
    "ModelKindError",
    "SeededBuilds",
    "check_model",
    "create_model",
    "hf",
    "list_models",
    "lookup",
    "with_overrides",
]
