"""Help and completion: ``-h`` everywhere, grouped panels, defaults and allowed values
from the registries, commands in a logical order, completion from the registries, help text printed as written."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import run_cli

COMMANDS = [
    "run",
    "train",
    "input-pipeline",
    "profile",
    "loadgen",
    "tune",
    "scale",
    "interconnect",
    "concurrent",
    "results",
    "compare",
    "report",
    "export",
    "telemetry",
    "cost",
    "models",
]


def _help(*args: str) -> str:
    p = run_cli(*args, "-h", env={"COLUMNS": "1000"})  # no help text wraps
    assert p.returncode == 0, p.stderr
    assert "Usage:" in p.stdout
    return " ".join(p.stdout.split())


def test_dash_h_is_help_for_the_app_and_every_command_and_commands_are_in_order():
    text = _help()
    found = [text.find(f"│ {c} ") for c in COMMANDS]  # a command at the start of its panel row
    assert all(i >= 0 for i in found) and found == sorted(found), dict(zip(COMMANDS, found))
    for panel in ("Measure", "Search and scale", "Read results", "Utilities"):
        assert panel in text
    for command in COMMANDS[1:]:
        assert f"accelbench {command}" in _help(command)


def test_run_help_is_grouped_and_states_the_gpu_and_cpu_defaults():
    from accelbench import backends, precisions

    text = _help("run")
    for panel in ("What to measure", "How to measure", "Where to store", "Telemetry and cost", "Distributed"):
        assert panel in text, panel
    assert "(default: GPU 1,2,4,8,...,1024; CPU 1,8,32)" in text
    assert "(default: GPU fp32,tf32,amp-fp16,amp-bf16; CPU fp32)" in text
    assert "(default: GPU eager,compile; CPU eager)" in text and "(default: GPU 1000; CPU 32)" in text
    names = [*backends.names("inference"), *precisions.names()]  # the registries, so no list drifts
    assert "eager" in names and "fp32" in names
    for name in names:
        assert name in text, name
    assert "hf-generate" not in text and "int8-weight-only" not in text  # generate's own: not offered by run
    assert "[sweep] table" in text  # help text is escaped, never read as markup


def test_profile_takes_the_plural_spellings_and_lists_every_backend():
    from accelbench import backends

    text = _help("profile")
    assert "--precisions" in text and "--modes" in text and "--batch-sizes" in text
    assert "--precision" in text and "--mode" in text and "--batch-size" in text  # aliases kept
    served = [*backends.names("inference"), *backends.names("train")]
    assert served and all(name in text for name in served)


@pytest.mark.parametrize(
    "command, option, words",
    [
        ("train", "--momentum", "SGD momentum"),
        ("train", "--weight-decay", "Weight decay"),
        ("interconnect", "--warmup", "Untimed iterations"),
        ("interconnect", "--iters", "Timed iterations"),
        ("compare", "--json", "write the comparison as JSON"),
    ],
)
def test_every_option_has_help(command, option, words):
    text = _help(command)
    assert f"{option} " in text and words in text
    if command == "compare":
        assert "the run (spec, environment, results)" not in text


def test_completion_reads_the_registries():
    from accelbench.cli.help import complete_backends, complete_precisions

    assert complete_precisions("fp32,amp-") == ["fp32,amp-fp16", "fp32,amp-bf16"]
    assert complete_backends("compile-c") == ["compile-cudagraphs"]
    p = run_cli(
        env={"_ACCELBENCH_COMPLETE": "complete_bash", "COMP_WORDS": "accelbench run -p fp32,bf", "COMP_CWORD": "3"},
        timeout=120,
    )
    assert p.returncode == 0 and p.stdout.split() == ["fp32,bf16"], p.stdout + p.stderr


def test_app_help_imports_no_registry_and_no_torch():
    code = (
        "import sys; sys.argv = ['accelbench', '--help']\nfrom accelbench.cli import main\ntry:\n    main()\n"
        "except SystemExit:\n    pass\n"
        "print([m for m in ('torch', 'accelbench.scenarios', 'accelbench.models') if m in sys.modules])"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout + p.stderr
