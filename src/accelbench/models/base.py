"""What a model name is: its kind (image classifier, causal language model), its source, and the one lookup.

Two plain-dict registries, filled by :func:`register` and :func:`register_family`:

- :data:`MODELS`: named models (``cifar-resnet20``, ``hf:tiny-shakespeare``, ``hf:llama-3.2-1b``, a plugin's);
- :data:`FAMILIES`: name families (``timm:<name>``, ``hf:/path/to/checkpoint``, ``package.module:factory``, a
  torchvision name), each saying which names are its own and how to check one without building it.

:func:`lookup` answers "what is this name?" for every command; :func:`check` adds the kind the command takes and
refuses a model of another kind in one line naming the command that measures it. Suggestions for an unknown name
stay within its kind: ``hf:`` names for a language model, an existing folder as ``hf:./folder``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accelbench.core.config import put
from accelbench.core.errors import UnknownModelError, did_you_mean

IMAGE, LM = "image", "lm"  # the kinds (``accelbench models --kind``)


@dataclass(frozen=True, kw_only=True, slots=True)
class Kind:
    """A kind of model, in the words a refusal uses.

    Attributes:
        label: ``image classifier``; article: ``an``; plural: ``image classifiers``.
        names: how names of the kind are written, shown where a command refuses another kind ("" for none).
        unknown: how an unknown name of the kind is called (``unknown model``).
        command: the command that measures models of the kind.
        extra: the install some of its names need, in words.
    """

    label: str
    article: str
    plural: str
    names: str
    unknown: str
    command: str
    extra: str = ""


KINDS: dict[str, Kind] = {
    IMAGE: Kind(
        label="image classifier",
        article="an",
        plural="image classifiers",
        names="",
        unknown="unknown model",
        command="accelbench run",
        extra="timm: names need pip install 'accelbench[timm]'",
    ),
    LM: Kind(
        label="language model",
        article="a",
        plural="language models",
        names="hf:<architecture>, hf:tiny-shakespeare, hf:/path/to/checkpoint",
        unknown="unknown language model",
        command="accelbench generate (or train, or serve)",
        extra="hf: names need pip install 'accelbench[llm]'",
    ),
}

# where a model's weights and definition come from -> the words listings use
SOURCES: dict[str, str] = {
    "torchvision": "torchvision",
    "timm": "timm (random weights)",
    "bundled": "bundled trained",
    "config": "config only",
    "folder": "local folder",
    "user": "user factory",
    "plugin": "plugin",
}


class ModelKindError(UnknownModelError):
    """A model of a kind the command does not take (an image classifier given to ``generate``).

    Attributes:
        name, kind, takes: the model, its kind, the kind the command takes (:func:`refusal`'s arguments).
    """

    def __init__(self, name: str, kind: str, takes: str, command: str):
        self.name, self.kind, self.takes = name, kind, takes
        super().__init__(refusal(name, kind, takes, command))

    def said_by(self, command: str) -> str:
        """The refusal naming ``command`` as the one that refused (a study runs another command's scenario)."""
        return refusal(self.name, self.kind, self.takes, command)


@dataclass(frozen=True, kw_only=True, slots=True)
class Model:
    """A named model, or a name a family claimed (:func:`lookup`).

    Attributes:
        name: the name (``--model``).
        kind: a key of :data:`KINDS`; None: the model says when built (a user factory that declares no
            ``model_kind``).
        source: a key of :data:`SOURCES`.
        build: an image classifier's ``fn(pretrained) -> LoadedModel``; None for a language model (:func:`accelbench.models.lm_load.load_lm` loads it on its device, in its dtype).
        check: ``fn(name) -> declared kind or None``: resolves the name without building it (raises
            UnknownModelError / MissingDependencyError); None: nothing to check.
        family: the pattern of the family that claimed the name, or "" for a named model.
    """

    name: str
    kind: str | None
    source: str
    build: Callable[..., Any] | None = None
    check: Callable[[str], str | None] | None = None
    family: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Family:
    """Names of one pattern, with what they are.

    Attributes:
        pattern: how its names are written (``timm:<name>``), in listings and messages.
        kind, source, check: as :class:`Model`'s, for every name it claims; build: ``fn(name, pretrained)``.
        claims: ``fn(name) -> bool``: the name is the family's.
        prefix: a name starting with it is this family's or unknown, never another family's ("": no prefix;
            families with one are asked first).
        names: ``fn() -> names`` it lists and suggests (torchvision's), or None (open-ended).
        suggest: ``fn(name) -> names`` an unknown name of its kind may have meant (an existing folder as
            ``hf:./folder``), or None.
    """

    pattern: str
    kind: str | None
    source: str
    claims: Callable[[str], bool]
    build: Callable[..., Any] | None = None
    check: Callable[[str], str | None] | None = None
    prefix: str = ""
    names: Callable[[], list[str]] | None = None
    suggest: Callable[[str], list[str]] | None = None


MODELS: dict[str, Model] = {}
FAMILIES: dict[str, Family] = {}


def register(model: Model) -> Model:
    """Add ``model`` to :data:`MODELS` under its name.

    Raises:
        ValueError: another model has that name.
    """
    return put(MODELS, model.name, model, "model")


def register_family(family: Family) -> Family:
    """Add ``family`` to :data:`FAMILIES` under its pattern.

    Raises:
        ValueError: another family has that pattern.
    """
    return put(FAMILIES, family.pattern, family, "model family")


def _families() -> list[Family]:
    return sorted(FAMILIES.values(), key=lambda f: not f.prefix)  # prefixed first, else in registration order


def _member(family: Family, name: str) -> Model:
    return Model(
        name=name,
        kind=family.kind,
        source=family.source,
        build=functools.partial(family.build, name) if family.build is not None else None,
        check=family.check,
        family=family.pattern,
    )


def lookup(name: str, kind: str | None = None) -> Model:
    """What ``name`` is: its kind and source, resolved without building or checking it.

    Args:
        kind: the kind the asking command takes: an unknown bare name is taken for one of it (its suggestions).

    Raises:
        UnknownModelError: an empty name, or one that matches nothing (the message suggests names of its kind).
    """
    if not isinstance(name, str) or not name.strip():
        raise UnknownModelError("empty model name")
    if name in MODELS:
        return MODELS[name]
    for family in _families():
        if family.prefix and name.startswith(family.prefix):
            if family.claims(name):
                return _member(family, name)
            raise unknown(name, family.kind)
        if not family.prefix and family.claims(name):
            return _member(family, name)
    raise unknown(name, kind or IMAGE)  # a bare name is a torchvision name, unless the command takes another kind


def names(kind: str | None = None) -> list[str]:
    """Every listed name of ``kind`` (None: every kind): the named models, then each family's listed names."""
    listed = [n for n, m in MODELS.items() if kind in (None, m.kind)]
    for family in FAMILIES.values():
        if family.names is not None and kind in (None, family.kind):
            listed += family.names()
    return listed


def unknown(name: str, kind: str) -> UnknownModelError:
    """The error for a ``name`` of ``kind`` that matches nothing: the names it may have meant, of that kind only,
    and how names of the kind are written."""
    fams = sorted((f for f in FAMILIES.values() if f.kind in (kind, None)), key=lambda f: f.kind is None)
    meant = [s for f in fams if f.suggest is not None for s in f.suggest(name)]
    hint = did_you_mean(name, meant) or did_you_mean(name, names(kind))
    ways = [n for n, m in MODELS.items() if m.kind == kind] + [f.pattern for f in fams]
    return UnknownModelError(f"{KINDS[kind].unknown} {name!r}{hint}: use {', '.join(ways[:-1])} or {ways[-1]}")


def refusal(name: str, kind: str, takes: str, command: str) -> str:
    """The line a command that takes models of kind ``takes`` refuses ``name``, a model of ``kind``, with."""
    k, t = KINDS[kind], KINDS[takes]
    shown = f" ({t.names})" if t.names else ""
    return f"{name} is {k.article} {k.label}: {command} takes {t.plural}{shown}; measure it with {k.command}"


def check(name: str, takes: str | None = None, command: str = "this command") -> Model:
    """Resolve ``name`` without building it, and refuse a model of another kind than ``takes``: the model, with the
    kind a user factory declares.

    The kind is known from the name for every source but a user factory, which is imported (not called) first
    and refused only when it declares another ``model_kind``.

    Raises:
        ModelKindError: the model is of another kind (the line names the command that measures it).
        UnknownModelError / MissingDependencyError: as :func:`lookup`, or the model's own check.
    """
    model = lookup(name, takes)
    kind, checked = model.kind, False
    if kind is None and model.check is not None:
        kind, checked = model.check(name), True
    if takes is not None and kind is not None and kind != takes:
        raise ModelKindError(name, kind, takes, command)
    if not checked and model.check is not None:
        model.check(name)
    return model if kind == model.kind else dataclasses.replace(model, kind=kind)


def catalog(kind: str | None = None) -> list[tuple[str, str, str]]:
    """``(names, kind, source)`` rows, in words, of every model of ``kind`` (None: every kind) and of the families
    whose model declares its own (a user factory): each named model, each family's listed names in one row
    (torchvision's) or its pattern (``timm:<name>``); grouped by kind."""
    order = [*KINDS, None]
    rows = [(n, m.kind, m.source) for n, m in MODELS.items()]
    rows += [(", ".join(f.names()) if f.names else f.pattern, f.kind, f.source) for f in FAMILIES.values()]
    return [
        (n, KINDS[k].label if k else "as it declares", SOURCES[src])
        for n, k, src in sorted(rows, key=lambda r: order.index(r[1]))
        if kind in (None, k) or k is None
    ]
