"""The shared options, declared once in groups (``cli/options.py``): every option reaches its spec field under its
own name, an alias is named as the user typed it, and the groups' machinery refuses what would slip."""

from __future__ import annotations

import inspect

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli import app
from accelbench.cli.options import Cost, How, Inputs, What, expand

runner = CliRunner()


class Captured(Exception):
    pass


@pytest.fixture
def layers(monkeypatch):
    """The spec layers a command passes to ``api.spec`` (the command stops there)."""
    from accelbench import api

    seen: list = []

    def spec(scenario, *lays, **kw):
        seen.append((scenario, lays))
        raise Captured

    monkeypatch.setattr(api, "spec", spec)
    return seen


# every shared option of `run`, a value each, and the spec field it must set
RUN_FLAGS = {
    "--model": ("models", "m1"),
    "--batch-sizes": ("batch_sizes", "3,5"),
    "--precisions": ("precisions", "bf16"),
    "--modes": ("modes", "compile"),
    "--images": ("images", "17"),
    "--device": ("device", "cpu"),
    "--data": ("data", "synthetic"),
    "--image-size": ("image_size", "40"),
    "--label-space": ("label_space", "cifar10"),
    "--labels": ("labels", "l.txt"),
    "--mean": ("mean", "cifar10"),
    "--std": ("std", "imagenet"),
    "--resize": ("resize", "48"),
    "--crop-pct": ("crop_pct", "0.5"),
    "--warmup-batches": ("warmup_batches", "7"),
    "--min-timed-batches": ("min_timed_batches", "11"),
    "--min-time-s": ("min_time_s", "0.25"),
    "--repeats": ("repeats", "3"),
    "--seed": ("seed", "13"),
    "--telemetry-period-ms": ("telemetry_period_ms", "50.0"),
    "--idle-s": ("idle_s", "0.0"),
    "--price-per-hour": ("price_per_hour", "2.5"),
    "--kwh-price": ("kwh_price", "0.3"),
}


def test_every_shared_option_reaches_its_own_spec_field(layers):
    args = [x for flag, (_, value) in RUN_FLAGS.items() for x in (flag, value)]
    res = runner.invoke(app, ["run", *args, "--channels-last", "--no-cudnn-benchmark", "--skip-bad-images"])
    assert isinstance(res.exception, Captured), res.output
    ((scenario, (flags,)),) = layers
    assert scenario == "inference"
    assert {field: str(flags[field]) for field, _ in RUN_FLAGS.values()} == {f: v for f, v in RUN_FLAGS.values()}
    assert (flags["channels_last"], flags["cudnn_benchmark"], flags["skip_bad_images"]) == (True, False, True)


def test_loadgen_max_batch_is_the_batch_size_and_named_as_typed(tmp_path):
    """``--max-batch`` went positionally into the ``batch_sizes`` slot of an 18-argument call, so a bad value was
    reported as ``batch_sizes``, an option loadgen does not have."""
    from accelbench import api

    spec = api.spec("loadgen", {"max_batch": "64,256", "device": "cpu"})
    assert spec.batch_sizes == (64, 256)
    db = tmp_path / "lg.db"
    for value, line in (
        ("abc", "invalid max_batch 'abc': allowed a comma-separated list of integers"),
        ("0", "invalid max_batch 0: allowed positive integers"),
    ):
        res = runner.invoke(app, ["loadgen", "--device", "cpu", "--max-batch", value, "--db", str(db)])
        assert res.exit_code == 2 and line in res.output and "batch_sizes" not in res.output, res.output
    assert not db.exists()


def test_scale_names_gpus_in_its_error(tmp_path):
    res = runner.invoke(app, ["scale", "--gpus", "1,x", "--device", "cpu", "--db", str(tmp_path / "s.db")])
    assert res.exit_code == 2 and "invalid gpus '1,x'" in res.output and "batch_sizes" not in res.output, res.output


def test_a_group_keeps_what_a_command_takes_and_words_it():
    take = What.take(omit=("batch_sizes",), images=typer.Option(None, "--images", help="mine"))
    params = {p.name: p for p in take.parameters()}
    assert list(params) == ["model", "precisions", "modes", "channels_last", "images", "device"]
    assert params["images"].default.help == "mine" and params["model"].default.param_decls == ("--model", "-m")
    assert [p.name for p in How.take(only=("seed", "repeats")).parameters()] == ["repeats", "seed"]
    with pytest.raises(KeyError, match="What has no option batch_size"):
        What.take(omit=("batch_size",))
    # given options only, under their spec names: the model option is `models`
    assert What(model="a", images=3).fields() == {"models": "a", "images": 3}
    assert Inputs().fields() == {} and Cost(idle_s=0.0).fields() == {"idle_s": 0.0}


def test_expand_refuses_an_option_taken_twice():
    def cmd(what: What = What.take(), device: str = typer.Option("cpu", "--device")) -> None:
        pass

    with pytest.raises(TypeError, match="options named twice: \\['device'\\]"):
        expand(cmd)


def test_an_expanded_command_gets_its_groups():
    got = {}

    def cmd(how: How = How.take(only=("seed",)), name: str = typer.Option("x", "--name")) -> None:
        got.update(how=how, name=name)

    wrapped = expand(cmd)
    assert list(inspect.signature(wrapped).parameters) == ["seed", "name"]
    wrapped(seed=3, name="y")
    assert got == {"how": How(seed=3), "name": "y"}
