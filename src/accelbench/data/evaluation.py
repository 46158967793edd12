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
