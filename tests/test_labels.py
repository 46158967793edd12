"""Accuracy on the user's labels: folder layouts (WordNet IDs, class indices, CIFAR-10 names), labels files,
label-space and normalisation overrides, the evaluation transform, and the "why no accuracy" line."""

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.core.errors import ConfigError, DataError
from accelbench.data import load_images, to_model_input
from accelbench.data.labels import (
    NORM_PRESETS,
    check_labels,
    imagenet_wnids,
    parse_norm,
    read_labels_file,
    target_indices,
)
from accelbench.data.transforms import EvalTransform, resolve

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:  # helpers:color_net is imported by name, as a user's factory would be
    sys.path.insert(0, str(TESTS))

runner = CliRunner()
RGB = {"red": (255, 0, 0), "green": (0, 255, 0), "blue": (0, 0, 255)}


def _tree(root: Path, folders: dict[str, tuple[int, int, int]], per_class: int = 2, size=(8, 8)) -> Path:
    """Write ``per_class`` solid-colour PNGs into ``root/<folder>/`` for each folder."""
    from PIL import Image

    for name, rgb in folders.items():
        (root / name).mkdir(parents=True)
        for k in range(per_class):
            Image.new("RGB", size, rgb).save(root / name / f"img_{k}.png")
    return root


def _run(tmp_path, *args):
    db, js = tmp_path / "r.db", tmp_path / "r.json"
    res = runner.invoke(
        app,
        [
            "run",
            "--model",
            "helpers:color_net",
            "--batch-sizes",
            "2",
            "--device",
            "cpu",
            "--idle-s",
            "0",
            "--telemetry-period-ms",
            "0",
            "--min-timed-batches",
            "1",
            "--db",
            str(db),
            "--json",
            str(js),
            *args,
        ],
    )
    rows = json.loads(js.read_text())["results"] if js.exists() else []
    return res, rows


# Mappings ------------------------------------------------------------------------------------------------
def test_wnid_subset_maps_to_its_imagenet_indices(tmp_path):
    wnids = imagenet_wnids()
    assert len(wnids) == 1000 == len(set(wnids)) and wnids[0] == "n01440764" and list(wnids) == sorted(wnids)
    picked = {wnids[999]: (0, 0, 255), wnids[5]: (255, 0, 0), wnids[300]: (0, 255, 0)}
    raw = load_images(str(_tree(tmp_path / "val", picked)), 100)
    idx, why = target_indices(raw.classes, "imagenet-1k")
    assert why is None and idx == [5, 300, 999]  # not 0, 1, 2: a subset keeps its true indices
    assert [idx[i] for i in raw.labels.tolist()] == [5, 300, 999] * 2  # balanced: image k of each class in turn
    assert target_indices(raw.classes, "folder")[0] == [0, 1, 2]  # a model trained on these folders only


def test_index_folders_are_the_index_in_any_label_space():
    classes = tuple(sorted(["3", "12", "7"]))  # ("12", "3", "7"): sorted as strings
    assert target_indices(classes, "imagenet-1k") == ([12, 3, 7], None)
    assert (
        target_indices(classes, "cifar10")[0] is None and "not a class index" in target_indices(classes, "cifar10")[1]
    )


def test_cifar10_names_and_mismatches():
    assert target_indices(("cat", "truck"), "cifar10") == ([3, 9], None)
    idx, why = target_indices(("cat", "truck"), "imagenet-1k", model="m")
    assert idx is None and "--label-space" in why and "--labels FILE" in why and "\n" not in why
    idx, why = target_indices(("n01440764", "n99999999"), "imagenet-1k")
    assert idx is None and "n99999999" in why
    idx, why = target_indices(("a",), None, model="pkg:f")
    assert idx is None and why.startswith("pkg:f declares no label space: pass --label-space")
    assert "synthetic" in target_indices((), "cifar10")[1]


def test_labels_file_gives_the_output_order(tmp_path):
    f = tmp_path / "labels.txt"
    f.write_text("# model outputs\nred\ngreen\n\nblue\n")
    names = read_labels_file(f)
    assert names == ("red", "green", "blue")
    assert target_indices(("blue", "green", "red"), None, names) == ([2, 1, 0], None)
    check_labels(names, f, None, ("blue", "red"))
    with pytest.raises(DataError, match="has 3 names but label space cifar10 has 10"):
        check_labels(names, f, "cifar10", ("red",))
    with pytest.raises(DataError, match="does not name 1 data folder"):
        check_labels(names, f, None, ("red", "purple"))
    f.write_text("red\nred\n")
    with pytest.raises(DataError, match="twice"):
        read_labels_file(f)
    with pytest.raises(DataError, match="cannot read labels file"):
        read_labels_file(tmp_path / "missing.txt")


def test_norm_presets_and_parsing():
    assert parse_norm("mean", "imagenet") == NORM_PRESETS["imagenet"][0]
    assert parse_norm("std", "imagenet") == NORM_PRESETS["imagenet"][1]
    assert parse_norm("mean", "0.5, 0.5,0.5") == (0.5, 0.5, 0.5) and parse_norm("std", [1, 2, 3]) == (1.0, 2.0, 3.0)
    for name, bad in (("mean", "0.5,0.5"), ("mean", "imagenett"), ("std", "0,1,1"), ("mean", "nan,0,0")):
        with pytest.raises(ConfigError):
            parse_norm(name, bad)


# Transforms ----------------------------------------------------------------------------------------------
def test_center_crop_transform_shape_pixels_and_description():
    import torch

    t = resolve(32, crop_pct=0.8)
    assert t == EvalTransform(size=32, resize=40) and t.describe() == "resize 40 bilinear, center-crop 32"
    raw = torch.randint(0, 256, (2, 3, 40, 60), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    out = to_model_input(raw, 32, (0.0,) * 3, (1.0,) * 3, transform=t)
    assert out.shape == (2, 3, 32, 32)
    # the shorter side is already 40: no resampling, the crop is rows 4..35 and columns 14..45
    assert torch.equal(out, raw[:, :, 4:36, 14:46].float() / 255)
    squash = to_model_input(raw, 32, (0.0,) * 3, (1.0,) * 3)
    assert squash.shape == (2, 3, 32, 32) and not torch.equal(squash, out)
    assert resolve(32).describe() == "resize 32x32 bilinear, no crop"
    assert resolve(224, model_crop_pct=224 / 256).resize == 256  # floor(224 / 0.875), as timm computes it
    with pytest.raises(ConfigError, match="resize"):
        resolve(224, resize=200)


def test_model_transforms_come_from_their_weights_and_configs():
    import torchvision

    from accelbench.models import create_model

    tv = create_model("resnet50", pretrained=False).info  # no weights: no transform claimed
    assert tv.crop_pct is None
    info = create_model("resnet50").info  # the weights' transform, whether or not they are cached
    want = torchvision.models.get_model_weights("resnet50").DEFAULT.transforms()
    t = resolve(224, model_crop_pct=info.crop_pct, interpolation=info.interpolation)
    assert (t.resize, t.size) == (want.resize_size[0], want.crop_size[0])
    cifar = create_model("cifar-resnet20").info
    assert cifar.crop_pct is None and resolve(cifar.image_size).resize is None  # CIFAR-native: no crop


# End to end ------------------------------------------------------------------------------------------------
def test_label_space_and_norm_flags_give_a_user_model_accuracy(tmp_path):
    data = _tree(tmp_path / "idx", {"0": RGB["red"], "1": RGB["green"], "2": RGB["blue"]}, size=(8, 12))
    res, rows = _run(
        tmp_path,
        "--data",
        str(data),
        "--label-space",
        "cifar10",
        "--mean",
        "0.5,0.5,0.5",
        "--std",
        "inception",
        "--crop-pct",
        "0.5",
    )
    assert res.exit_code == 0, res.output
    (r,) = rows
    assert r["top1"] == 1.0 and r["accuracy_samples"] == 6 and r["label_space"] == "cifar10"
    assert r["transform"] == "resize 16 bilinear, center-crop 8" and r.get("accuracy_note") is None
    assert "no accuracy" not in res.output


def test_labels_file_order_beats_sorted_folder_names(tmp_path):
    data = _tree(tmp_path / "named", RGB)
    labels = tmp_path / "labels.txt"
    labels.write_text("red\ngreen\nblue\n")
    res, rows = _run(tmp_path, "--data", str(data), "--labels", str(labels), "--mean", "inception")
    assert res.exit_code == 0, res.output
    assert rows[0]["top1"] == 1.0
    # sorted folder names (blue, green, red) as outputs 0, 1, 2: only green lands right
    (tmp_path / "again").mkdir()
    res, rows = _run(tmp_path / "again", "--data", str(data), "--label-space", "folder", "--mean", "inception")
    assert rows[0]["top1"] == pytest.approx(1 / 3)


def test_why_no_accuracy_is_one_line_naming_the_flag(tmp_path):
    data = _tree(tmp_path / "idx", {"0": RGB["red"], "1": RGB["green"]})
    res, rows = _run(tmp_path, "--data", str(data))
    assert res.exit_code == 0, res.output
    assert rows[0].get("top1") is None and "--label-space" in rows[0]["accuracy_note"]
    lines = [line for line in res.output.splitlines() if line.startswith("no accuracy:")]
    assert len(lines) == 1 and "helpers:color_net declares no label space: pass --label-space" in lines[0]


@pytest.mark.parametrize(
    "content, flags, needle",
    [
        ("red\nred\n", [], "names 'red' twice"),
        ("red\ngreen\nblue\n", ["--label-space", "cifar10"], "has 3 names but label space cifar10 has 10"),
        ("red\n", [], "does not name 2 data folder"),
        (None, [], "cannot read labels file"),
    ],
)
def test_bad_labels_file_exits_2_with_one_line_before_a_run(tmp_path, content, flags, needle):
    data = _tree(tmp_path / "named", RGB, per_class=1)
    labels = tmp_path / "labels.txt"
    if content is not None:
        labels.write_text(content)
    res, rows = _run(tmp_path, "--data", str(data), "--labels", str(labels), *flags)
    assert res.exit_code == 2 and not rows
    err = [line for line in res.stderr.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert not (tmp_path / "r.db").exists() or "runs" not in res.output


def test_unknown_label_space_and_toml(tmp_path):
    res, _ = _run(tmp_path, "--label-space", "imagenet-21k")
    assert res.exit_code == 2 and "invalid label_space 'imagenet-21k'" in res.stderr
    from accelbench.core.spec import build_spec
    from accelbench.scenarios import get

    inf = get("inference")
    spec = build_spec(
        inf, {"models": "m:f", "label_space": "imagenet-1k", "mean": "cifar10", "crop_pct": 0.875}, cuda=False
    )
    s = spec.settings
    assert s.label_space == "imagenet-1k" and (s.mean, s.std) == NORM_PRESETS["cifar10"] and s.crop_pct == 0.875
    plain = build_spec(inf, {"models": "m:f"}, cuda=False)
    from accelbench.core.spec import digest

    assert plain.spec_hash() == digest(plain.to_dict())  # every field counts, defaults included (none volatile)
    assert spec.spec_hash() != plain.spec_hash()
