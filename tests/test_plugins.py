"""Backends, precisions and models from outside accelbench: a real installed distribution declaring entry points,
a backend file dropped into ``backends/`` of a copy of the package, and broken plugins (one warning line each)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import run_cli

from accelbench.store import Store

TESTS = Path(__file__).resolve().parent
SRC = TESTS.parent / "src"

PLUGIN = '''
"""A plugin distribution's module: a backend, a precision and a model."""
from accelbench.backends import Backend
from accelbench.precisions import Precision


class Toy(Backend):
    about = "the module called through a lambda"

    def _build(self, module, example, device):
        return lambda x: module(x)


Toy.name = "{mode}"
FP32_PLUGIN = Precision("fp32-plugin", ceiling="fp32", about="fp32 from a plugin")


def toy_net(pretrained):
    from accelbench.models import create_model

    return create_model("cifar-resnet20", pretrained)
'''
DROPPED = '''"""A backend file dropped into backends/: one class, one register line."""
from accelbench.backends.base import Backend, register


class Toy(Backend):
    name = "toy-dropped"
    about = "the module called through a lambda"

    def _build(self, module, example, device):
        return lambda x: module(x)


register(Toy())
'''
PYPROJECT = """
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "accelbench-toy-plugin"
version = "0.1"

[project.entry-points."accelbench.backends"]
toy-plugin = "accelbench_toy_plugin:Toy"

[project.entry-points."accelbench.precisions"]
fp32-plugin = "accelbench_toy_plugin:FP32_PLUGIN"

[project.entry-points."accelbench.models"]
toy-net = "accelbench_toy_plugin:toy_net"

[tool.setuptools]
py-modules = ["accelbench_toy_plugin"]
"""


def _probe(pythonpath: list[Path], mode: str, db: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, pythonpath)), "OMP_NUM_THREADS": "1"}
    p = subprocess.run(
        [sys.executable, str(TESTS / "plugin_probe.py"), mode, str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "warning:" not in p.stderr and "Warning" not in p.stderr, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _everywhere(got: dict, mode: str, db: Path) -> None:
    """The backend ``mode`` is in run's, train's and tune's help as its workloads say, runs, and tune tries it."""
    for command in ("run_help", "tune_help"):
        assert mode in got[command], got[command]
    assert mode not in got["train_help"]  # it serves inference only
    assert got["run"][0] == 0, got["run"][1]
    assert got["tune"][0] == 0, got["tune"][1]
    assert mode in got["default_modes"]  # tune's default space on a CPU, with no edit of the space
    store = Store(db)
    rows = [r for run in store.runs() for r in store.cases(run["run_id"]).to_dict("records") if r["mode"] == mode]
    assert rows and all(r["status"] == "ok" for r in rows)
    assert {r["workload"] for r in rows} == {"inference"} and len(rows) >= 2  # the run's case and tune's trials
    assert all(r["throughput_samples_per_s"] > 0 and r["compile_s"] is not None for r in rows)


def test_an_installed_plugin_distribution_adds_its_backend_precision_and_model(tmp_path):
    pkg, target = tmp_path / "pkg", tmp_path / "site"
    pkg.mkdir()
    (pkg / "pyproject.toml").write_text(PYPROJECT)
    (pkg / "accelbench_toy_plugin.py").write_text(PLUGIN.format(mode="toy-plugin"))
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--quiet",
            "--target",
            str(target),
            str(pkg),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert (target / "accelbench_toy_plugin-0.1.dist-info" / "entry_points.txt").exists()
    got = _probe([target, SRC], "toy-plugin", tmp_path / "p.db")
    _everywhere(got, "toy-plugin", tmp_path / "p.db")
    assert Path(got["backend_file"]).parent == target
    assert "fp32-plugin" in got["precisions"] and "fp32-plugin" in got["run_help"]
    assert "toy-net" in got["models"]


def test_a_backend_file_dropped_into_the_package_shows_up_everywhere(tmp_path):
    """docs/architecture.md: to add a backend, add one file in backends/; nothing else is edited."""
    copy = tmp_path / "src" / "accelbench"
    shutil.copytree(SRC / "accelbench", copy, ignore=shutil.ignore_patterns("__pycache__", "assets"))
    (copy / "assets").symlink_to(SRC / "accelbench" / "assets")
    (copy / "backends" / "toy_dropped.py").write_text(DROPPED)
    got = _probe([tmp_path / "src"], "toy-dropped", tmp_path / "d.db")
    _everywhere(got, "toy-dropped", tmp_path / "d.db")
    assert Path(got["backend_file"]) == copy / "backends" / "toy_dropped.py"


def test_a_broken_plugin_is_one_warning_line_naming_it(tmp_path):
    site = tmp_path / "site"
    info = site / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[accelbench.backends]\nbroken = no_such_module:Thing\n\n"
        "[accelbench.precisions]\nfp-bad = bad_precision:FP_BAD\n"
    )
    (site / "bad_precision.py").write_text(
        "from accelbench.precisions import Precision\nFP_BAD = Precision('fp-bad')\n"
    )
    p = run_cli(
        "run", "--help", env={"PYTHONPATH": os.pathsep.join([str(site), str(SRC)]), "COLUMNS": "1000"}, timeout=300
    )
    assert p.returncode == 0 and "eager" in p.stdout, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("warning: plugin ") for line in lines), p.stderr
    assert sorted(line.split(" not loaded: ")[0] for line in lines) == [
        "warning: plugin broken (no_such_module:Thing, from broken-plugin; accelbench.backends)",
        "warning: plugin fp-bad (bad_precision:FP_BAD, from broken-plugin; accelbench.precisions)",
    ]
    assert any("ModuleNotFoundError" in line for line in lines)
    assert any("roofline ceiling of precision fp-bad" in line for line in lines)  # no silent fp32 roof
