"""Install problems are caught before anything runs (``accelbench.sweep.requirements``): one line, exit 2, naming
the versions and the install command; ``accelbench doctor`` shows the same; ``profile --charts`` reports a chart
failure on stderr and exits 1; the extras in ``pyproject.toml`` agree with the check.

A missing package is a None entry in ``sys.modules`` for its name (what ``import`` meets for an absent package:
ModuleNotFoundError), set for the command's duration in this process (:func:`_blocked`; the command runs in-process
through :func:`conftest.run_cli`). Where the check must meet a package that this process has already imported
under other names (transformers, imported by accelbench's own modules), a real ``python -m accelbench`` process
gets the entry from a ``sitecustomize`` (:func:`_blocking`). A torchvision whose C++ library is left out (a copy of
the package of links, without its ``.so`` files) stands for a torchvision built for another torch, in a real process
too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

from conftest import flags, run_cli, tiny_case
from fault_harness import TESTS, Fault, cases, check, no_run, runs

ROOT = TESTS.parent
TINY = [*flags(tiny_case(model="helpers:tiny_conv_net")), "--db", "{db}"]
PROFILE = ["--model", "helpers:tiny_conv_net", "--device", "cpu", "--idle-s", "0", "--db", "{db}"]
SITE = (
    "import os, sys\nfor name in os.environ.get('BLOCK_IMPORTS', '').split(','):\n    if name:\n"
    "        sys.modules[name] = None\n"
)


@contextlib.contextmanager
def _blocked(names: str) -> Iterator[None]:
    """Inside the block, the packages ``names`` (comma-separated) do not import in this process: a None entry in
    ``sys.modules`` for each, and a submodule imported earlier no longer an attribute of its package (``from
    matplotlib import pyplot`` would find it there); all put back after."""
    with pytest.MonkeyPatch.context() as mp:
        for name in names.split(","):
            parent, _, child = name.rpartition(".")
            if parent and parent in sys.modules:
                mp.delattr(sys.modules[parent], child, raising=False)
            mp.setitem(sys.modules, name, None)
        yield


def _blocking(tmp: Path, names: str) -> dict:
    """The environment of a process in which the packages ``names`` (comma-separated) do not import."""
    (tmp / "site").mkdir(exist_ok=True)
    (tmp / "site" / "sitecustomize.py").write_text(SITE)
    return {
        "BLOCK_IMPORTS": names,
        "PYTHONPATH": os.pathsep.join([str(tmp / "site"), str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }


def _torchvision_without_ops(tmp: Path) -> dict:
    """The environment of a process whose torchvision has no C++ operators for this torch."""
    import torchvision

    real = Path(torchvision.__file__).parent
    fake = tmp / "tv" / "torchvision"
    fake.mkdir(parents=True)
    for entry in real.iterdir():
        if entry.suffix != ".so" and entry.name != "__pycache__":
            (fake / entry.name).symlink_to(entry)
    return {"PYTHONPATH": os.pathsep.join([str(tmp / "tv"), str(TESTS), os.environ.get("PYTHONPATH", "")])}


QUANT, TIMM = "pip install 'accelbench[quant]'", "pip install 'accelbench[timm]'"
ROWS = [
    # (id, blocked imports, extra args, the one line holds all of these). int8's check imports accelbench's PT2E
    # module, which an earlier test of this process may have imported with torchao: that row runs in a real process.
    ("int8-without-torchao", "torchao", ["-p", "int8"], ["error: torchao ", "int8 needs it", QUANT]),
    (
        "onnxruntime-mode-without-onnxruntime",
        "onnxruntime",
        ["--modes", "onnxruntime"],
        ["error: onnxruntime ", "--modes onnxruntime needs it", QUANT],
    ),
    ("timm-model-without-timm", "timm", ["--model", "timm:resnet18"], ["error: timm ", "timm:resnet18 needs it", TIMM]),
]


@pytest.mark.parametrize("blocked, extra, parts", [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_a_missing_extra_is_one_line_and_exit_2_before_anything_runs(tmp_path: Path, blocked, extra, parts):
    fault = Fault("x", ["run", *TINY, *extra], 2, parts[0], no_run, one_line=True)
    if blocked == "torchao":
        p = check(dataclasses.replace(fault, env=_blocking(tmp_path, blocked)), tmp_path)
    else:
        with _blocked(blocked):
            p = check(fault, tmp_path)
    assert parts and all(part in p.stderr for part in parts), p.stderr


def test_profile_charts_without_matplotlib_is_refused_before_anything_runs(tmp_path: Path):
    args = ["profile", *PROFILE, "--charts", "{tmp}/charts"]
    with _blocked("matplotlib"):
        check(Fault("x", args, 2, "error: matplotlib ", no_run, one_line=True), tmp_path)
    assert not (tmp_path / "charts").exists()


def test_a_torchvision_built_for_another_torch_is_one_line_naming_both_versions(tmp_path: Path):
    import torch
    import torchvision

    p = check(
        Fault(
            "x",
            ["run", *TINY],
            2,
            "does not work with torch",
            no_run,
            one_line=True,
            env=_torchvision_without_ops(tmp_path),
        ),
        tmp_path,
    )
    assert (
        f"torchvision {torchvision.__version__.split('+')[0]}" in p.stderr and f"torch {torch.__version__}" in p.stderr
    )
    assert "pip install --force-reinstall torch torchvision --index-url https://download.pytorch.org/whl/" in p.stderr


def test_doctor_reports_the_install(tmp_path: Path):
    ok = run_cli("doctor")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    for package in ("torch", "torchvision", "matplotlib", "timm", "mlcommons-loadgen", "torchao", "onnxruntime"):
        assert any(line.split()[:1] == [package] for line in ok.stdout.splitlines()), ok.stdout
    assert "C++ operators loaded (torchvision::nms)" in ok.stdout and "ready: accelbench run" in ok.stdout
    broken = run_cli("doctor", env=_torchvision_without_ops(tmp_path))
    assert broken.returncode == 2 and "does not work with torch" in broken.stderr, broken.stdout + broken.stderr
    with _blocked("timm"):
        optional = run_cli("doctor")
    assert optional.returncode == 0 and "optional: timm " in optional.stdout and TIMM in optional.stdout


def test_profile_chart_failure_is_reported_on_stderr_and_exits_1(tmp_path: Path):
    # matplotlib imports (the check passes) but its pyplot does not: drawing fails after the case was measured
    args = ["profile", *PROFILE, "--charts", "{tmp}/charts"]
    with _blocked("matplotlib.pyplot"):
        p = check(Fault("x", args, 1, "error: charts not written for helpers:tiny_conv_net inference"), tmp_path)
    assert "matplotlib" in p.stderr
    rows = cases(tmp_path / "faults.db")
    assert rows and all(r["status"] == "ok" for r in rows)  # the measurement is kept
    assert runs(tmp_path / "faults.db") == [(1, "profile", "complete")]


# the check's plan of a spec, without processes ---------------------------------------------------------------------
def _needs(scenario: str, device: str = "cpu", **fields) -> list[tuple[str, str]]:
    import torch

    from accelbench import api, scenarios
    from accelbench.sweep.requirements import needs

    spec = api.spec(scenario, {"device": device, **fields})
    return [(n.package, n.why) for n in needs(scenarios.get(scenario), spec, torch.device(device))]


def test_what_each_spec_needs():
    assert _needs("inference", models="resnet18") == []
    assert _needs("inference", models="timm:resnet18,timm:vit_tiny_patch16_224") == [("timm", "timm:resnet18")]
    assert _needs("inference", models="resnet18", precisions="int8") == [("torchao", "int8")]
    # int8 through onnxruntime is onnxruntime's own quantizer: no PT2E
    assert _needs("inference", models="resnet18", precisions="int8", modes="onnxruntime") == [
        ("onnxruntime", "--modes onnxruntime"),
        ("onnx", "--modes onnxruntime"),
    ]
    assert _needs("inference", models="resnet18", precisions="fp8") == []  # simulated on a CPU: no torchao
    assert _needs("train_step", models="resnet18", precisions="int8") == []  # an unsupported row, no quantizing
    assert _needs("loadgen", models="resnet18") == [("mlcommons-loadgen", "accelbench loadgen")]
    assert _needs("profile", models="resnet18", chart_dir="charts") == [("matplotlib", "--charts")]


def test_the_extras_in_pyproject_agree_with_the_check():
    from accelbench.sweep.requirements import PACKAGES

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {d.split(">")[0].split(";")[0].strip() for d in meta["dependencies"]}
    extras = meta["optional-dependencies"]
    for package, (_, extra) in PACKAGES.items():
        if extra is None:
            assert package in base, package
        else:
            assert any(d.startswith(package + ">=") for d in extras[extra]), (package, extra)
    assert {"matplotlib", "pillow", "jinja2", "scipy"} <= base
    assert extras["test"][0] == "accelbench[all]" and extras["all"] == [
        "accelbench[timm,loadgen,quant,llm,parquet,serve]"
    ]
    assert set(extras) == {"timm", "loadgen", "quant", "llm", "parquet", "serve", "all", "test"}
    assert meta["license"] == "MIT" and meta["license-files"] == ["LICENSE"] and (ROOT / "LICENSE").is_file()


def test_generate_without_transformers_is_one_line_naming_the_llm_extra(tmp_path: Path):
    args = ["generate", "-m", "hf:tiny-shakespeare", "--device", "cpu", "--idle-s", "0", "--db", "{db}"]
    p = check(
        Fault("x", args, 2, "error: transformers ", no_run, one_line=True, env=_blocking(tmp_path, "transformers")),
        tmp_path,
    )
    assert "pip install 'accelbench[llm]'" in p.stderr and "accelbench generate needs it" in p.stderr, p.stderr
