"""What an inference case needs to measure accuracy: the model's info with the user's overrides, the evaluation
transform, the model inputs, and the labels as model outputs (or the one-line reason there are none).

The settings read here (``label_space``, ``mean``, ``std``, ``resize``, ``crop_pct``, ``labels``) are the
inference settings (:class:`accelbench.scenarios.inference.InferenceSettings`); any object with those
attributes works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class EvalInputs:
    """Attributes:
        info: the model's :class:`accelbench.models.ModelInfo` with the user's overrides.
        x_all: float32 ``(N, 3, S, S)`` model inputs.
        labels: int64 ``(N,)`` model output index of each image, or None.
        transform: the :class:`accelbench.data.transforms.EvalTransform` used.
        reason: why there are no labels (one line saying what to pass), or None.
        raw: the :class:`accelbench.data.RawImages` the inputs came from.
    """

    info: Any
    x_all: Any
    labels: Any
    transform: Any
    reason: str | None
    raw: Any

    def columns(self) -> dict[str, Any]:
        """The row's columns: ``transform``, ``label_space``, ``accuracy_note`` (why there is no accuracy)."""
        return {"transform": self.transform.describe(), "label_space": self.info.label_space,
                "accuracy_note": self.reason}


def eval_inputs(info, settings, inputs, size: int, on_host: bool = False) -> EvalInputs:
    """Resolve a case's inputs and labels.

    Args:
        info: the model's :class:`accelbench.models.ModelInfo` as built.
        settings: the scenario settings (see the module docstring).
        inputs: the sweep's :class:`accelbench.data.batches.Inputs`.
        size: the input side S in pixels.
        on_host: keep the inputs on the host (the copy is timed).
    Raises:
        DataError: the labels file cannot be read.
        ConfigError: a resize smaller than the input side.
    """
    import torch

    from accelbench.data.labels import read_labels_file, target_indices
    from accelbench.data.transforms import resolve
    from accelbench.models import with_overrides

    s = settings
    info = with_overrides(info, getattr(s, "label_space", None), getattr(s, "mean", None), getattr(s, "std", None))
    t = resolve(size, resize=getattr(s, "resize", None), crop_pct=getattr(s, "crop_pct", None),
                model_crop_pct=info.crop_pct, interpolation=info.interpolation)
    x_all, raw = inputs.get(size, info.mean, info.std, on_host=on_host, transform=t), inputs.raw_images()
    names = read_labels_file(s.labels) if getattr(s, "labels", None) else None
    if names is None and info.label_space is None and info.weights == "random":
        idx, reason = None, f"{info.name} has random weights (no trained weights found): accuracy not meaningful"
    else:
        classes = raw.classes if raw.labels is not None else ()
        idx, reason = target_indices(classes, info.label_space, names, info.name)
    labels = torch.tensor(idx, dtype=torch.int64)[raw.labels] if idx is not None else None
    return EvalInputs(info, x_all, labels, t, reason, raw)


def accuracy_pass(fwd, batches, blabels, n_real: int, feed) -> dict[int, int] | None:
    """Run every batch once (untimed; also a warm-up) and count top-1/top-5 hits on the real samples.

    Returns:
        ``{1: hits, 5: hits}`` over the first ``n_real`` samples, or None without labels.
    """
    from accelbench.core.stats import topk_correct

    totals, seen = {1: 0, 5: 0}, 0
    for xb, yb in zip(batches, blabels):
        out = fwd(feed(xb))
        if yb is None or seen >= n_real:
            continue
        take = min(len(yb), n_real - seen)
        hits = topk_correct(out[:take], yb[:take].to(out.device))
        for k in totals:
            totals[k] += hits[k]
        seen += take
    return totals if blabels and blabels[0] is not None else None


# The accuracy settings, shared by the commands that read images for a model (run, loadgen, train, profile);
# at None they leave the spec hash of runs stored before a command had them unchanged.
EVAL_HASH_DEFAULTS = {"label_space": None, "mean": None, "std": None, "resize": None, "crop_pct": None,
                      "labels": None}


def check_eval_settings(s) -> None:
    """Check the accuracy settings ``s`` has (``label_space``, ``labels``, ``mean``, ``std``, ``resize``,
    ``crop_pct``; an absent one is skipped).

    Raises:
        ConfigError: a bad value (one line).
    """
    from accelbench.core.config import check_int, is_number
    from accelbench.core.errors import ConfigError
    from accelbench.data.labels import LABEL_SPACES, parse_norm

    label_space, resize, crop_pct = (getattr(s, k, None) for k in ("label_space", "resize", "crop_pct"))
    if label_space is not None and label_space not in LABEL_SPACES:
        raise ConfigError("label_space", label_space, ", ".join(LABEL_SPACES))
    for name in ("mean", "std"):
        parse_norm(name, getattr(s, name, None))
    if resize is not None:
        check_int("resize", resize, 8)
    if crop_pct is not None and not is_number(crop_pct, 0.05, 1.0):
        raise ConfigError("crop_pct", crop_pct, "a fraction in 0.05..1 (input side / resized shorter side)")
    labels = getattr(s, "labels", None)
    if labels is not None and (not isinstance(labels, str) or not labels):
        raise ConfigError("labels", labels, "a labels file path")


def normalize_eval(merged: dict[str, Any]) -> dict[str, Any]:
    """``mean``/``std`` as 3 floats (a preset name, ``"0.5,0.5,0.5"`` or a list); a preset fills the other."""
    from accelbench.data.labels import NORM_PRESETS, parse_norm

    for name, other in (("mean", "std"), ("std", "mean")):
        v = merged.get(name)
        if isinstance(v, str) and v.strip() in NORM_PRESETS and merged.get(other) is None:
            merged[other] = v.strip()
    return {**merged, "mean": parse_norm("mean", merged.get("mean")), "std": parse_norm("std", merged.get("std"))}


def mapped_labels(info, settings, raw):
    """``(info with the user's label space and normalisation, labels as model outputs or None)`` for a command
    that trains or profiles: the labels only where ``--labels`` or ``--label-space`` says how they map."""
    import torch

    from accelbench.data.labels import read_labels_file, target_indices
    from accelbench.models import with_overrides

    s = settings
    info = with_overrides(info, getattr(s, "label_space", None), getattr(s, "mean", None), getattr(s, "std", None))
    names = read_labels_file(s.labels) if getattr(s, "labels", None) else None
    if raw.labels is None or (names is None and getattr(s, "label_space", None) is None):
        return info, None
    idx, _ = target_indices(raw.classes, info.label_space, names, info.name)
    return info, (torch.tensor(idx, dtype=torch.int64)[raw.labels] if idx is not None else None)
