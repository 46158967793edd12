"""Calibration images for static int8 quantization, disjoint from the images accuracy is measured on."""

from __future__ import annotations

from dataclasses import dataclass

# CIFAR-10's train split (a bundled 5,000-image slice of it) never overlaps its test split
# (Krizhevsky 2009, "Learning Multiple Layers of Features from Tiny Images", s. 3).
DISJOINT_SPLIT = {"cifar10-test": "cifar10-train-5k"}
DEFAULT_IMAGES = 512


@dataclass(frozen=True, slots=True)
class CalibrationPlan:
    """Where the calibration images come from.

    Attributes:
        data: the source to load them from (a name :func:`accelbench.data.load_images` accepts).
        skip: images of the source's class-balanced order skipped first (the ones accuracy is measured on,
            when calibration must come from the same source), so ``[skip, skip + count)`` is used.
        count: images wanted.
        seed: the seed of synthetic images (differs from the measured images' seed).
        description: one line for the ``calibration_data`` column.
    """

    data: str
    skip: int
    count: int
    seed: int
    description: str


def plan(data: str, n_eval: int, n_calib: int = DEFAULT_IMAGES, seed: int = 0) -> CalibrationPlan:
    """The calibration images for a run measuring the first ``n_eval`` images of ``data``.

    A bundled test split calibrates on its train split; any other labelled source on the images after the
    measured ones in :func:`accelbench.data.load_images`' class-balanced order (a prefix-stable order: the
    first ``n_eval`` of ``n_eval + n_calib`` are exactly the measured ones); synthetic data on another seed.

    Raises:
        ValueError: ``n_calib`` < 1.
    """
    if n_calib < 1:
        raise ValueError(f"calibration_images must be >= 1, got {n_calib}")
    if data in DISJOINT_SPLIT:
        other = DISJOINT_SPLIT[data]
        return CalibrationPlan(
            other,
            0,
            n_calib,
            seed,
            f"{other}: first {n_calib} (class-balanced) of the train split, disjoint from {data}",
        )
    if data == "synthetic":
        return CalibrationPlan(data, 0, n_calib, seed + 1, f"synthetic: {n_calib} random images, seed {seed + 1}")
    return CalibrationPlan(
        data,
        n_eval,
        n_calib,
        seed,
        f"{data}: images {n_eval}..{n_eval + n_calib - 1} of its "
        f"class-balanced order, disjoint from the {n_eval} measured",
    )


def load(p: CalibrationPlan, image_size: int, mean, std, transform=None):
    """The plan's images ready for the model, on the host, through the same evaluation ``transform``
    (:class:`accelbench.data.transforms.EvalTransform`; None: a straight resize) as the measured images.

    Returns:
        ``(float32 tensor (count, 3, S, S), description)``; the description states the count actually
        loaded when the source holds fewer.

    Raises:
        DataError: the source is missing or unreadable, or holds no image past ``skip``.
    """
    from accelbench.core.errors import DataError
    from accelbench.data import load_images, to_model_input

    raw = load_images(p.data, p.skip + p.count, image_size=image_size, seed=p.seed)
    imgs = raw.images[p.skip :]
    if len(imgs) == 0:
        raise DataError(
            f"no calibration images: {p.data} holds no images beyond the {p.skip} measured "
            "(pass fewer --images, or another source)"
        )
    desc = p.description if len(imgs) == p.count else f"{p.description} (only {len(imgs)} available)"
    return to_model_input(imgs, image_size, mean, std, transform=transform), desc


def batches(x, batch_size: int) -> list:
    """``x`` (N, ...) in batches of ``batch_size`` (the last one shorter)."""
    return [x[i : i + batch_size] for i in range(0, x.shape[0], batch_size)]
