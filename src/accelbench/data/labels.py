"""Which output of a model each image's class is: label spaces, folder layouts, labels files, normalisation presets.

A folder dataset's images carry their folder name (``RawImages.classes``, sorted); :func:`target_indices`
turns those names into the indices of the model's outputs, or says in one line why it cannot:

- ``--labels FILE``: line k names output k (a class name, a WordNet ID or any folder name); wins over the rest;
- WordNet-ID folders (``n01440764/``) and a model in ``imagenet-1k``: the ILSVRC2012 index of each ID, so a
  subset of the 1,000 classes keeps its true indices;
- folders named by index (``0/ ... 999/``): the name is the index, for a model of any label space;
- CIFAR-10 class names and a model in ``cifar10``: the CIFAR-10 index;
- a model in ``folder``: the index in the sorted folder names (the layout torchvision's ImageFolder uses).

Pure code: no torch import.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from accelbench.core.errors import ConfigError, DataError

ASSETS = Path(__file__).resolve().parent.parent / "assets"
LABEL_SPACES = ("imagenet-1k", "cifar10", "folder")
# Outputs of a model in each label space (None: as many as the data's folders).
SPACE_CLASSES = {"imagenet-1k": 1000, "cifar10": 10, "folder": None}
CIFAR10_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
WNID_RE = re.compile(r"^n\d{8}$")
# Per-channel (R, G, B) normalisation on the 0..1 pixel scale, by name (``--mean imagenet``).
# imagenet: torchvision's ImageNet weights (``ResNet50_Weights.transforms().mean/std``); cifar10: the bundled
# CIFAR-10 test set's pixel statistics (assets/README.md); inception: timm's IMAGENET_INCEPTION_MEAN/STD.
NORM_PRESETS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "imagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
    "cifar10": ((0.4942, 0.4851, 0.4504), (0.2467, 0.2429, 0.2616)),
    "inception": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
}


@functools.lru_cache(maxsize=1)
def imagenet_wnids() -> tuple[str, ...]:
    """The 1,000 ImageNet-1k WordNet IDs; position k is output k of torchvision and timm ImageNet weights.

    Source: ``assets/imagenet1k_wnids.txt``, the ILSVRC2012 synset order (copied from timm, see assets/README.md).
    """
    return tuple((ASSETS / "imagenet1k_wnids.txt").read_text().split())


def parse_norm(name: str, value) -> tuple[float, float, float] | None:
    """A ``mean`` or ``std`` setting as 3 floats: a preset name, ``"0.5,0.5,0.5"``, a list, or None.

    Args:
        name: ``mean`` or ``std`` (selects the preset's half; names the field in errors).
    Raises:
        ConfigError: not a preset, not 3 finite numbers, or a std that is not > 0.
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip() in NORM_PRESETS:
        return NORM_PRESETS[value.strip()][0 if name == "mean" else 1]
    allowed = f"{', '.join(NORM_PRESETS)}, or 3 comma-separated numbers (R,G,B on the 0..1 scale)"
    items = value.split(",") if isinstance(value, str) else value
    try:
        out = tuple(float(x) for x in items)
    except (TypeError, ValueError):
        raise ConfigError(name, value, allowed) from None
    if len(out) != 3 or any(x != x or abs(x) == float("inf") for x in out) or (name == "std" and min(out) <= 0):
        raise ConfigError(name, value, allowed + (" > 0" if name == "std" else ""))
    return out


def read_labels_file(path: str | Path) -> tuple[str, ...]:
    """The class names or ids of a labels file, in the model's output order (line k = output k).

    Blank lines and lines starting with ``#`` are skipped; each line is stripped.

    Raises:
        DataError: the file cannot be read, is not UTF-8, holds no names, or names a class twice (named).
    """
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read labels file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(f"labels file {path} is not UTF-8 text (one class name or id a line)") from None
    names = tuple(s.strip() for s in text.splitlines() if s.strip() and not s.strip().startswith("#"))
    if not names:
        raise DataError(f"labels file {path} holds no class names (one a line, in the model's output order)")
    seen: dict[str, int] = {}
    for i, n in enumerate(names):
        if n in seen:
            raise DataError(f"labels file {path} names {n!r} twice (lines of names {seen[n] + 1} and {i + 1})")
        seen[n] = i
    return names


def check_labels(names: tuple[str, ...], path, label_space: str | None, classes: tuple[str, ...] | None) -> None:
    """Check a labels file against the declared label space and the data's folder names, before a run.

    Args:
        names: :func:`read_labels_file`'s result; path: the file (for messages).
        label_space: the ``--label-space`` given, or None.
        classes: the data's folder names (None: data without labels).
    Raises:
        DataError: the count differs from the label space's class count, or a folder is not in the file.
    """
    want = SPACE_CLASSES.get(label_space) if label_space else None
    if want is not None and len(names) != want:
        raise DataError(f"labels file {path} has {len(names)} names but label space {label_space} has {want} classes")
    missing = [c for c in classes or () if c not in names]
    if missing:
        raise DataError(
            f"labels file {path} does not name {len(missing)} data folder(s), e.g. {missing[0]!r}: "
            "give every folder's name on the line of its model output"
        )


def layout(classes: tuple[str, ...]) -> str:
    """The folder layout: ``wnid``, ``index`` (names are integers), ``cifar10`` (CIFAR-10 names) or ``names``."""
    if classes and all(WNID_RE.match(c) for c in classes):
        return "wnid"
    if classes and all(c.isdigit() for c in classes):
        return "index"
    if classes and all(c in CIFAR10_CLASSES for c in classes):
        return "cifar10"
    return "names"


def target_indices(
    classes: tuple[str, ...], model_space: str | None, labels: tuple[str, ...] | None = None, model: str = "the model"
) -> tuple[list[int] | None, str | None]:
    """The model output index of each data class, or the one-line reason there is none.

    Args:
        classes: the data's class (folder) names, sorted; empty for unlabelled data.
        model_space: the model's label space (``imagenet-1k``, ``cifar10``, ``folder``) or None.
        labels: a labels file's names (line k = output k), or None.
        model: the model's name, for the reason.
    Returns:
        ``(indices, None)``, ``indices[i]`` the output of ``classes[i]``; or ``(None, reason)``, where the reason
        says what to pass.
    """
    if not classes:
        return None, "the data has no labels (synthetic): use --data cifar10-test or an image folder"
    if labels is not None:
        missing = [c for c in classes if c not in labels]
        if missing:
            return None, f"labels file does not name folder {missing[0]!r}"
        return [labels.index(c) for c in classes], None
    kind = layout(classes)
    if model_space is None:
        return None, (
            f"{model} declares no label space: pass --label-space imagenet-1k|cifar10|folder "
            "(or --labels FILE) if its outputs are trained classes"
        )
    if kind == "index":
        n = SPACE_CLASSES.get(model_space)
        idx = [int(c) for c in classes]
        if n is not None and max(idx) >= n:
            return None, f"folder {max(idx)} is not a class index of label space {model_space} (0..{n - 1})"
        return idx, None
    if model_space == "folder":
        return list(range(len(classes))), None
    if model_space == "imagenet-1k" and kind == "wnid":
        wnids = imagenet_wnids()
        unknown = [c for c in classes if c not in wnids]
        if unknown:
            return None, f"folder {unknown[0]} is not an ImageNet-1k WordNet ID: pass --labels FILE"
        return [wnids.index(c) for c in classes], None
    if model_space == "cifar10" and kind == "cifar10":
        return [CIFAR10_CLASSES.index(c) for c in classes], None
    what = {"wnid": "WordNet-ID", "cifar10": "CIFAR-10", "names": "named"}[kind]
    return None, (
        f"{model} predicts {model_space} classes but the data has {what} folders: pass --label-space "
        "matching the data, or --labels FILE naming the folders in the model's output order"
    )
