"""The suite's shared pieces: THE tiny CPU case (:data:`TINY_CASE`, :func:`tiny_case`; :data:`TINY` as flags), THE helper
that runs the command line (:func:`run_cli`), markers that skip without a GPU, and fixtures.

Test modules import the constants and helpers (``from conftest import TINY, run_cli``): the tests folder is on
``sys.path`` (below), so ``helpers:<factory>`` models import in this process and in the CLI's subprocesses.
"""

from __future__ import annotations

import contextlib
import os
import subprocess as _subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS))  # tests/helpers.py as an importable factory module
import inprocess  # noqa: E402  (on the path just above)

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist gives each worker COLUMNS = the controller's terminal width (80 when piped); the suite's
    # in-process CLI tests assume what a serial run has, no COLUMNS (the CLI's module console reads it at import).
    # Tests of the 80-column layout set COLUMNS themselves.
    os.environ.pop("COLUMNS", None)

# THE tiny CPU case: cifar-resnet20 (bundled weights, bundled real images) at batch 2 on 4 images, on the CPU,
# without the idle-power wait, one timed step: a few seconds end to end. Tests change a field with tiny_case(...).
TINY_CASE: dict[str, Any] = {
    "model": "cifar-resnet20",
    "batch_sizes": "2",
    "images": 4,
    "device": "cpu",
    "idle_s": 0,
    "min_timed_batches": 1,
}


def tiny_case(**fields: Any) -> dict[str, Any]:
    """:data:`TINY_CASE` with ``fields`` changed (a field set to None is left out): spec fields for ``api.spec``."""
    return {k: v for k, v in {**TINY_CASE, **fields}.items() if v is not None}


def flags(fields: dict[str, Any]) -> list[str]:
    """Spec fields as the command line spells them: ``{"batch_sizes": "2", "channels_last": False}`` ->
    ``["--batch-sizes", "2", "--no-channels-last"]``."""
    out: list[str] = []
    for key, value in fields.items():
        flag = "--" + key.replace("_", "-")
        out += [flag if value else flag.replace("--", "--no-", 1)] if isinstance(value, bool) else [flag, str(value)]
    return out


TINY = flags(TINY_CASE)  # the tiny case's flags: accelbench run *TINY --db ...
DATA = Path(__file__).resolve().parent / "data"


def old_store(name: str, dst: Path) -> Path:
    """Unpack the store ``tests/data/<name>.db.gz`` (a store written by an earlier accelbench, gzipped to keep the
    tree small) to ``dst`` and return ``dst``."""
    import gzip
    import shutil

    with gzip.open(DATA / f"{name}.db.gz") as src, open(dst, "wb") as out:
        shutil.copyfileobj(src, out)
    return dst


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an ``accelbench`` subprocess: this accelbench and the tests' factory modules importable,
    a wide terminal (no wrapped lines); ``env`` on top."""
    import accelbench

    src = Path(accelbench.__file__).resolve().parents[1]
    path = os.pathsep.join([str(src), str(TESTS), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "COLUMNS": "200", "PYTHONPATH": path, **(env or {})}


def run_cli(
    *args: str,
    env: dict[str, str] | None = None,
    cwd=None,
    check: bool = False,
    timeout: float = 600,
    subprocess: bool = False,
    **popen: Any,
) -> _subprocess.CompletedProcess:
    """``accelbench *args`` to its end, as a user runs it (:func:`cli_env`, ``env`` on top, in ``cwd``): its exit code,
    stdout and stderr as :func:`subprocess.run` gives them. With ``check``, an exit code other than 0 fails the test
    with the output.

    It runs in this process (:mod:`inprocess`: the process's global state is put back after), unless ``subprocess``
    asks for a real ``python -m accelbench`` (an end-to-end test of the exit-code contract), ``popen`` passes more of
    ``subprocess.run``'s keywords (``preexec_fn``), or ``env`` needs a fresh interpreter (``PYTHONPATH``:
    :func:`inprocess.needs_process`); ``ACCELBENCH_TESTS_SUBPROCESS=1`` runs every one in a subprocess (the suite as it
    was, to compare). ``timeout`` bounds a subprocess only."""
    if subprocess or popen or inprocess.needs_process(env) or os.environ.get("ACCELBENCH_TESTS_SUBPROCESS"):
        p = run_cli_process(*args, env=env, cwd=cwd, timeout=timeout, **popen)
    else:
        p = inprocess.run(list(args), cli_env(env), cwd)
    if check and p.returncode != 0:
        raise AssertionError(f"exit {p.returncode}\n{p.stdout[-4000:]}\n{p.stderr[-4000:]}")
    return p


def run_cli_process(
    *args: str, env: dict[str, str] | None = None, cwd=None, timeout: float = 600, **popen: Any
) -> _subprocess.CompletedProcess:
    """``python -m accelbench *args`` in a real process to its end (:func:`cli_env`); ``popen``: more of
    ``subprocess.run``'s keywords (``preexec_fn``)."""
    return _subprocess.run(
        [sys.executable, "-m", "accelbench", *args],
        capture_output=True,
        text=True,
        env=cli_env(env),
        cwd=cwd,
        timeout=timeout,
        **popen,
    )


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without xdist installed, not an unknown-hook error
def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto`` (the README's and CI's test command): one worker a CPU, at most 4. Many tests start real torchrun
    jobs (an agent and two ranks, each importing torch: ~1 GB), so more workers than that buy memory pressure, not
    time."""
    return max(1, min(_cpus(), 4))


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        ngpu = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        ngpu = 0
    import shutil

    for item in items:
        if "gpu" in item.keywords and ngpu < 1:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU"))
        if "multigpu" in item.keywords and ngpu < 2:
            item.add_marker(pytest.mark.skip(reason="needs 2 or more CUDA GPUs"))
        if "ncu" in item.keywords and (ngpu < 1 or shutil.which("ncu") is None):
            item.add_marker(pytest.mark.skip(reason="needs ncu and a CUDA GPU"))


@pytest.fixture
def db(tmp_path):
    return tmp_path / "results.db"


@pytest.fixture(autouse=True)
def _gpu_tests_in_a_real_process(request, monkeypatch):
    """A test marked ``gpu``, ``multigpu`` or ``ncu`` runs each command in a real process: on an H200 a GPU profile
    that passed alone failed in the test process after the GPU sweep tests had run there (CUDA state, compiled
    kernels and measured ceilings carry over in one process). These tests are not part of the CPU suite's time."""
    if {"gpu", "multigpu", "ncu"} & set(request.keywords):
        monkeypatch.setenv("ACCELBENCH_TESTS_SUBPROCESS", "1")
    yield


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


# torch's intra-op threads for the tests' work (this process's torch, and ``OMP_NUM_THREADS`` of the commands they run):
# the CPUs shared among pytest-xdist's workers, at most 2. Two workers on CI's 2 cores take one thread each: with two,
# the threads of the two workers (and of the ranks and servers they start) wait on each other at every operator, and
# small CPU kernels ran several times slower (single_torch_thread).
THREADS = max(1, min(2, _cpus() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))


def pytest_configure(config) -> None:
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def _threads():
    # Keep CPU tests predictable on a 2-core CI machine.
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    yield


@contextlib.contextmanager
def single_torch_thread():
    """One torch intra-op thread inside the block (restored after): small CPU kernels on a shared 2-core machine
    run several times faster than with 2 threads competing with other processes, whose threads wait on each other
    at every operator when the cores are oversubscribed. For module-scoped fixtures; tests take :func:`one_thread`."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


@pytest.fixture
def one_thread():
    """:func:`single_torch_thread` for the test."""
    with single_torch_thread():
        yield
