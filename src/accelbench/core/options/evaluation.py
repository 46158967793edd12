"""The evaluation settings: how a model's outputs are read as classes and how its inputs are prepared (label space,
labels file, normalisation, the evaluation resize and crop), declared once (:mod:`accelbench.core.options`) for
every scenario that reads image accuracy (``run``, ``loadgen``, ``profile``) and the shared ``Inputs`` options.

Each default is None: the model's own (its weights' transform, timm's ``pretrained_cfg``,
:class:`accelbench.models.ModelInfo`), so a spec that leaves them unset hashes the same in every scenario."""

from __future__ import annotations

from accelbench.core.options import Option, declare

# the label spaces a model's outputs can be read in (accelbench.data.labels maps each)
LABEL_SPACES = ("imagenet-1k", "cifar10", "folder")

EVALUATION = declare(
    Option(
        name="label_space",
        type=str,
        default=None,
        choices=LABEL_SPACES,
        panel="accuracy",
        default_text="the model's",
        help="Which class each model output is (folder: the sorted folder names)",
    ),
    Option(
        name="labels",
        type=str,
        default=None,
        panel="accuracy",
        allowed="a labels file path",
        help="Labels file: line k names output k (class name, WordNet ID or folder name)",
    ),
    Option(
        name="mean",
        type=float,
        many=True,
        raw=True,
        default=None,
        panel="accuracy",
        default_text="the model's",
        allowed="3 numbers on the 0..1 scale or a preset",
        help="Input mean R,G,B on the 0..1 scale, or a preset: imagenet, cifar10, inception",
    ),
    Option(
        name="std",
        type=float,
        many=True,
        raw=True,
        default=None,
        panel="accuracy",
        default_text="the model's",
        allowed="3 numbers on the 0..1 scale or a preset",
        help="Input std R,G,B on the 0..1 scale, or a preset",
    ),
    Option(
        name="resize",
        type=int,
        low=8,
        default=None,
        unit="pixels",
        panel="accuracy",
        help="Shorter side before the center crop to the input size",
    ),
    Option(
        name="crop_pct",
        type=float,
        low=0.05,
        high=1.0,
        default=None,
        panel="accuracy",
        allowed="a fraction in 0.05..1 (input side / resized shorter side)",
        help="Input side / resized shorter side (e.g. 0.875: resize 256, crop 224)",
    ),
)
