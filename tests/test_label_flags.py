"""The label and preprocessing flags on loadgen, train and profile: accepted, checked, recorded in the spec."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from accelbench import api
from accelbench.cli import app

runner = CliRunner()


def _captured(monkeypatch, fn_name: str, argv: list[str], tmp_path):
    """Invoke the command; capture the spec it hands the library (the library call itself is not run)."""
    seen = {}

    def fake(spec, *a, **k):
        seen["spec"] = spec
        raise typer.Exit(0)

    monkeypatch.setattr(api, fn_name, fake)
    res = runner.invoke(app, argv + ["--device", "cpu", "--db", str(tmp_path / "x.db")])
    assert res.exit_code == 0 and "spec" in seen, res.output
    return seen["spec"]


def test_loadgen_takes_run_s_label_flags(monkeypatch, tmp_path):
    spec = _captured(
        monkeypatch,
        "loadgen",
        [
            "loadgen",
            "-m",
            "cifar-resnet20",
            "--label-space",
            "cifar10",
            "--mean",
            "cifar10",
            "--resize",
            "36",
            "--crop-pct",
            "0.9",
        ],
        tmp_path,
    )
    s = spec.settings
    assert (s.label_space, s.resize, s.crop_pct) == ("cifar10", 36, 0.9) and len(s.std) == 3  # the preset fills std
    assert spec.to_dict()["label_space"] == "cifar10"


def test_train_takes_label_space_labels_mean_std(monkeypatch, tmp_path):
    spec = _captured(
        monkeypatch,
        "train",
        [
            "train",
            "-m",
            "cifar-resnet20",
            "--label-space",
            "cifar10",
            "--mean",
            "0.5,0.5,0.5",
            "--std",
            "0.25,0.25,0.25",
        ],
        tmp_path,
    )
    assert spec.settings.label_space == "cifar10" and spec.settings.mean == (0.5, 0.5, 0.5)
    assert spec.settings.std == (0.25, 0.25, 0.25)
    res = runner.invoke(app, ["train", "--epochs", "1", "--label-space", "cifar10", "--db", str(tmp_path / "y.db")])
    assert res.exit_code == 2 and "label-space applies to a step-throughput sweep" in res.output


def test_profile_takes_mean_std_resize_and_records_the_transform(monkeypatch, tmp_path):
    from accelbench.scenarios.profile import step

    spec = _captured(
        monkeypatch,
        "profile",
        [
            "profile",
            "-m",
            "cifar-resnet20",
            "--mean",
            "0.5,0.5,0.5",
            "--std",
            "0.5,0.5,0.5",
            "--resize",
            "40",
            "-b",
            "2",
        ],
        tmp_path,
    )
    assert spec.settings.mean == (0.5, 0.5, 0.5) and spec.settings.resize == 40
    import torch

    (case,) = _cases(spec)
    work = step.build(case, spec, torch.device("cpu"))
    assert work.transform == "resize 40 bilinear, center-crop 32" and work.info.mean == (0.5, 0.5, 0.5)


def _cases(spec):
    from accelbench import scenarios

    return scenarios.get("profile").cases(spec, "cpu")


def test_a_train_step_maps_labels_with_the_label_space(tmp_path):
    from accelbench.store import Store

    spec = api.spec(
        "train_step",
        {
            "model": "cifar-resnet20",
            "batch_sizes": "2",
            "images": 4,
            "device": "cpu",
            "label_space": "cifar10",
            "idle_s": 0,
            "warmup_batches": 0,
            "min_timed_batches": 1,
            "min_time_s": 0,
        },
        cuda=False,
    )
    (r,) = api.train(spec, Store(tmp_path / "t.db")).records
    assert r["status"] == "ok" and r["label_space"] == "cifar10" and r["labels_mapped"] is True


@pytest.mark.parametrize("cmd", ["loadgen", "profile"])
def test_a_bad_value_is_one_line_exit_2(cmd, tmp_path):
    res = runner.invoke(
        app, [cmd, "-m", "cifar-resnet20", "--crop-pct", "3", "--device", "cpu", "--db", str(tmp_path / "z.db")]
    )
    assert res.exit_code == 2 and "crop_pct" in res.output
