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
    n_classes: the outputs a model needs for its outputs to be scored against ``labels`` (the label space's
        classes, the data's folders for ``folder``, the labels file's lines), or None (not known: no labels).
    """

    info: Any
    x_all: Any
    labels: Any
    transform: Any
    reason: str | None
    raw: Any
    n_classes: int | None = None

    def columns(self) -> dict[str, Any]:
        """The row's columns: ``transform``, ``label_space``, ``accuracy_note`` (why there is no accuracy)."""
        return {
            "transform": self.transform.describe(),
            "label_space": self.info.label_space,
            "accuracy_note": self.reason,
        }


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
    t = resolve(
        size,
        resize=getattr(s, "resize", None),
        crop_pct=getattr(s, "crop_pct", None),
        model_crop_pct=info.crop_pct,
        interpolation=info.interpolation,
    )
    x_all, raw = inputs.get(size, info.mean, info.std, on_host=on_host, transform=t), inputs.raw_images()
    names = read_labels_file(s.labels) if getattr(s, "labels", None) else None
    if names is None and info.label_space is None and info.weights == "random":
        idx, reason = None, f"{info.name} has random weights (no trained weights found): accuracy not meaningful"
    else:
        classes = raw.classes if raw.labels is not None else ()
        idx, reason = target_indices(classes, info.label_space, names, info.name)
    labels = torch.tensor(idx, dtype=torch.int64)[raw.labels] if idx is not None else None
    n_classes = classes_needed(info, names, raw) if idx is not None else None
    return EvalInputs(info, x_all, labels, t, reason, raw, n_classes)


def classes_needed(info, names, raw) -> int | None:
    """How many outputs a model needs for its outputs to be scored: a labels file's lines, the label space's
    classes (:data:`accelbench.data.labels.SPACE_CLASSES`; ``folder``: the data's folders), None when unknown."""
    from accelbench.data.labels import SPACE_CLASSES

    if names is not None:
        return len(names)
    n = SPACE_CLASSES.get(info.label_space)
    return n if n is not None else (len(raw.classes) if info.label_space == "folder" else None)


@dataclass(frozen=True, slots=True)
class Scored:
    """What an accuracy pass found.

    Attributes:
        hits: ``{1: hits, 5: hits}`` over the real samples; None without labels or with outputs that cannot be
            scored.
        note: why the outputs cannot be scored (one line: non-finite values, fewer outputs than the label space,
            another batch size than the input's, not a ``(batch, classes)`` tensor), or None.
        finite: every output value was finite (NaN or inf: broken numerics, the row is flagged).
    """

    hits: dict[int, int] | None = None
    note: str | None = None
    finite: bool = True

    def columns(self, n_real: int, ev: EvalInputs) -> dict[str, Any]:
        """A row's accuracy columns: ``top1``, ``top5`` (fractions of the ``n_real`` samples), ``accuracy_samples``,
        ``outputs_finite``, ``accuracy_note`` (this pass's note, else why ``ev`` has no labels) and ``ev``'s."""
        h = self.hits
        return {
            **ev.columns(),
            "top1": h[1] / n_real if h else None,
            "top5": h[5] / n_real if h else None,
            "accuracy_samples": n_real if h else None,
            "accuracy_note": self.note or ev.reason,
            "outputs_finite": self.finite,
        }


def output_problem(out, batch: int, n_classes: int | None) -> str | None:
    """Why ``out`` (a model's output for a batch of ``batch`` inputs) cannot be scored as ``(batch, classes)``
    logits against ``n_classes`` classes (None: not checked), or None."""
    import torch

    if not isinstance(out, torch.Tensor) or out.dim() != 2:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        return f"the model's outputs are {shape}, not (batch, classes) logits"
    if out.shape[0] != batch:
        return f"the model returned {out.shape[0]} outputs for a batch of {batch} inputs"
    if n_classes is not None and out.shape[1] < n_classes:
        return (
            f"the model has {out.shape[1]} outputs, fewer than the {n_classes} classes of its labels "
            "(pass --label-space or --labels matching its outputs)"
        )
    return None


def all_finite(out) -> bool:
    """Every value of a tensor output is finite (other outputs: True, not checked)."""
    import torch

    return not isinstance(out, torch.Tensor) or bool(torch.isfinite(out).all())


NON_FINITE_NOTE = "the model's outputs hold NaN or inf (broken numerics)"


def accuracy_pass(fwd, batches, blabels, n_real: int, feed, n_classes: int | None = None) -> Scored:
    """Run every batch once (untimed; also a warm-up) and count top-1/top-5 hits on the real samples; outputs
    that cannot be scored (:func:`output_problem`, non-finite values) give no hits and a note instead.

    Args:
        n_classes: the outputs the labels need (:attr:`EvalInputs.n_classes`); None: not checked.
    Returns:
        :class:`Scored`: hits over the first ``n_real`` samples (None without labels or with a note).
    """
    from accelbench.core.stats import topk_correct

    labelled = bool(blabels) and blabels[0] is not None
    totals, seen, note, finite = {1: 0, 5: 0}, 0, None, True
    for xb, yb in zip(batches, blabels):
        out = fwd(feed(xb))
        problem = output_problem(out, int(xb.shape[0]), n_classes if labelled else None)
        if problem is None and not all_finite(out):
            problem, finite = NON_FINITE_NOTE, False
        note = note or problem
        if note or yb is None or seen >= n_real:
            continue
        take = min(len(yb), n_real - seen)
        hits = topk_correct(out[:take], yb[:take].to(out.device))
        for k in totals:
            totals[k] += hits[k]
        seen += take
    return Scored(totals if labelled and note is None else None, note, finite)


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
