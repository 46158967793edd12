"""Options declared once (:mod:`accelbench.core.options`): a declaration's flag, TOML key, aliases, check, error
message, default and help all come from it, so changing the declaration changes each of them; the generate command
takes its settings from its declarations alone."""

from __future__ import annotations

import dataclasses
import re

import pytest
import typer
from typer.testing import CliRunner

from accelbench.cli.declared import Given, declared
from accelbench.cli.options import expand
from accelbench.core.errors import ConfigError
from accelbench.core.options import Option, check_declared, declare, device_defaults
from accelbench.core.options.generate import OPTIONS as GENERATE
from accelbench.core.options.inference import INFERENCE
from accelbench.core.options.loadgen import LOADGEN
from accelbench.core.options.profile import PROFILE
from accelbench.core.spec import Extras, Settings, build_spec

BASE = Option(
    name="toy_count",
    type=int,
    low=2,
    high=64,
    default=4,
    gpu=16,
    cpu=3,
    unit="steps",
    short="-t",
    help="Toy steps a case",
    aliases=("toy_steps",),
)
CHANGED = [
    BASE,
    dataclasses.replace(BASE, name="toy_other", low=5, high=9, default=6, gpu=8, cpu=5, short="-o", aliases=("t2",)),
]


def _world(opt: Option):
    """A settings type, a scenario and a typer command made from the one declaration ``opt``."""
    table = declare(opt)

    @dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
    class ToySettings(Settings):
        def __post_init__(self) -> None:
            check_declared(self)

    ToySettings = dataclasses.make_dataclass(
        "ToySettings",
        [(opt.name, int, opt.field())],
        bases=(ToySettings,),
        frozen=True,
        kw_only=True,
    )

    class Toy:
        name, settings_type, extras_type, rejects = "toy", ToySettings, Extras, ()
        aliases = {a: opt.name for a in opt.aliases}

        def defaults(self, cuda: bool):
            return {"models": ("m",), "batch_sizes": (1,), **device_defaults(table, cuda)}

        def normalize(self, merged):
            return merged

        def validate(self, spec):
            pass

    seen = {}

    def toy(settings: Given = declared(table)) -> None:
        seen.update(settings.fields())

    app = typer.Typer()
    app.command()(expand(toy))
    return Toy(), app, seen


@pytest.mark.parametrize("opt", CHANGED, ids=lambda o: o.name)
def test_flag_toml_key_check_message_and_help_default_come_from_the_declaration(opt):
    scenario, app, seen = _world(opt)
    flag = "--" + opt.name.replace("_", "-")
    runner = CliRunner()
    assert runner.invoke(app, [flag, str(opt.low)]).exit_code == 0 and seen == {opt.name: opt.low}
    assert runner.invoke(app, [opt.short, str(opt.high)]).exit_code == 0 and seen == {opt.name: opt.high}
    # TOML key and alias; the device defaults
    assert getattr(build_spec(scenario, {opt.name: opt.high}, cuda=False).settings, opt.name) == opt.high
    assert getattr(build_spec(scenario, {opt.aliases[0]: opt.low}, cuda=False).settings, opt.name) == opt.low
    assert getattr(build_spec(scenario, cuda=True).settings, opt.name) == opt.gpu
    assert getattr(build_spec(scenario, cuda=False).settings, opt.name) == opt.cpu
    # the check and its one-line message
    with pytest.raises(ConfigError) as err:
        build_spec(scenario, {opt.name: opt.high + 1}, cuda=False)
    assert str(err.value) == f"invalid {opt.name} {opt.high + 1}: allowed an integer in {opt.low}..{opt.high}"
    # the help states the declaration's default, per device
    text = " ".join(runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output.split())
    assert f"(default: GPU {opt.gpu}; CPU {opt.cpu})" in text and f"in {opt.unit}" in text


def test_a_declaration_refuses_its_own_bad_default_and_a_name_declared_twice():
    with pytest.raises(ConfigError, match="toy_count"):
        dataclasses.replace(BASE, default=1)
    with pytest.raises(ValueError, match="declared twice"):
        declare(BASE, dataclasses.replace(BASE, name="other"))  # same short flag and alias


def test_a_list_option_parses_and_checks_each_item():
    lens = Option(name="lens", type=int, many=True, low=1, default=(8,), help="Lengths")
    assert lens.parse("8, 16") == (8, 16) and lens.parse(4) == (4,)
    with pytest.raises(ConfigError, match=re.escape("invalid lens 0: allowed integers >= 1")):
        lens.check((8, 0))
    with pytest.raises(ConfigError, match=re.escape('invalid lens "": allowed integers >= 1')):
        lens.check(())


@pytest.mark.parametrize(
    "command, scenario, table",
    [
        ("generate", "generate", GENERATE),
        ("loadgen", "loadgen", LOADGEN),
        ("profile", "profile", PROFILE),
        ("run", "inference", INFERENCE),
    ],
)
def test_a_command_takes_its_scenario_settings_from_their_declarations_alone(command, scenario, table):
    from accelbench import scenarios
    from accelbench.cli.common import app
    from accelbench.core.options.evaluation import EVALUATION

    sc = scenarios.get(scenario)
    own = (
        {f.name for f in dataclasses.fields(sc.settings_type)}
        - set(EVALUATION)
        - ({"repeats"} if command == "run" else set())
    )
    assert own == set(table)
    for cuda in (True, False):
        assert {k: sc.defaults(cuda)[k] for k in table} == device_defaults(table, cuda)
    params = {p.name: p for p in typer.main.get_command(app).commands[command].params}
    assert len(table) >= 2
    for name, opt in table.items():  # the generated flag: the declaration's flag and help, nothing written by hand
        assert params[name].opts[0] == opt.flags[0].split("/")[0] and params[name].help == opt.help_text()
    assert {a: sc.aliases[a] for opt in table.values() for a in opt.aliases} == {
        a: n for n, opt in table.items() for a in opt.aliases
    }


def test_the_declared_choices_are_the_ones_the_data_layer_reads():
    from accelbench.core.options.evaluation import EVALUATION
    from accelbench.data.labels import LABEL_SPACES
    from accelbench.data.text import PROMPT_SOURCES
    from accelbench.scenarios.profile.scenario import STEPS

    assert EVALUATION["label_space"].choices == tuple(LABEL_SPACES)
    assert PROFILE["steps"].choices == STEPS
    assert GENERATE["prompt_source"].choices == PROMPT_SOURCES
