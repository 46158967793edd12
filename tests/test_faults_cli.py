"""Fault rows of the command line's surface: refused input is one line and exit 2
before anything runs; names are printed as written; the OOM boundary says when no batch size ran."""

from __future__ import annotations

from pathlib import Path

import conftest
import pytest
from fault_harness import Fault, check, no_run, statuses

TINY = [*conftest.TINY, "--db", "{db}"]


def _a_file(tmp: Path) -> dict:
    (tmp / "charts.png").write_bytes(b"not a folder")
    return {}


def _emoji_folder(tmp: Path) -> dict:
    """An ImageFolder named ``:ok:`` (rich would print an emoji for it) with two tiny images."""
    import numpy as np
    from PIL import Image

    d = tmp / ":ok:" / "cats"
    d.mkdir(parents=True)
    for k in range(2):
        Image.fromarray(np.full((8, 8, 3), 40 * k, dtype=np.uint8)).save(d / f"{k}.png")
    return {}


def _store_with_one_run(tmp: Path) -> dict:
    from accelbench.store import Store

    with Store(tmp / "one.db") as st:
        st.finish_run(st.begin_run("inference", {}, "h", {}), "complete")
    return {}


def _no_emoji(db: Path, tmp: Path) -> None:
    assert statuses(db) == ["ok"]


def _all_oom(db: Path, tmp: Path) -> None:
    assert statuses(db) == ["oom", "skipped"]


FAULTS = [
    # item 20: `interconnect --gpus 0` ran 2 ranks, `run --gpus 0` one: refused
    Fault(
        "interconnect-gpus-0",
        ["interconnect", "--gpus", "0", "--device", "cpu", "--db", "{db}"],
        2,
        "invalid --gpus 0",
        no_run,
        one_line=True,
    ),
    Fault("run-gpus-0", ["run", *TINY, "--gpus", "0"], 2, "invalid --gpus 0", no_run, one_line=True),
    # item 20: `input-pipeline -w abc` said "invalid batch_sizes"
    Fault(
        "input-pipeline-workers-not-integers",
        ["input-pipeline", "-w", "abc", "--db", "{db}"],
        2,
        "invalid workers 'abc'",
        no_run,
        one_line=True,
    ),
    # item 20: `profile --charts <a file>` exited 0 writing nothing; refused before profiling
    Fault(
        "profile-charts-is-a-file",
        ["profile", "-m", "cifar-resnet20", "--device", "cpu", "--charts", "{tmp}/charts.png", "--db", "{db}"],
        2,
        "is a file",
        no_run,
        _a_file,
        one_line=True,
    ),
    # item 20: the singular spellings of profile stay accepted (aliases of --precisions/--modes/--batch-sizes)
    Fault(
        "profile-singular-alias",
        ["profile", "--precision", "fp64", "--device", "cpu", "--db", "{db}"],
        2,
        "invalid precision 'fp64'",
        no_run,
        one_line=True,
    ),
    Fault(
        "profile-singular-mode-alias",
        ["profile", "--mode", "warp-drive", "--device", "cpu", "--db", "{db}"],
        2,
        "warp-drive",
        no_run,
        one_line=True,
    ),
    # item 20: "largest batch that ran None"
    Fault(
        "oom-at-every-batch-size",
        ["run", *TINY, "--model", "helpers:cpu_oom_model", "--batch-sizes", "4,8"],
        0,
        stdout="no batch size ran, out of memory at 4",
        store=_all_oom,
    ),
    # item 20: rich turned :ok: / :fire: in names into emoji
    Fault("emoji-code-in-a-model-name", ["run", *TINY, "--model", ":fire:"], 2, "':fire:'", no_run, one_line=True),
    Fault(
        "emoji-code-in-a-data-path",
        ["run", *TINY, "--model", "helpers:tiny_conv_net", "--data", "{tmp}/:ok:"],
        0,
        stdout=":ok:",
        store=_no_emoji,
        setup=_emoji_folder,
    ),
    # item 20: `results`, `export`, `telemetry`, `cost --run` take PATH:ID, as compare and report do
    Fault(
        "results-path-id-missing-store",
        ["results", "--run", "{tmp}/nonexist.db:1"],
        2,
        "no results store at",
        one_line=True,
    ),
    Fault(
        "results-path-id",
        ["results", "--run", "{tmp}/one.db:1", "--db", "{tmp}/none.db"],
        0,
        setup=_store_with_one_run,
        stdout="run 1 (inference, complete)",
    ),
    Fault(
        "export-path-id", ["export", "--run", "{tmp}/one.db:1", "--db", "{tmp}/none.db"], 0, setup=_store_with_one_run
    ),
    Fault(
        "telemetry-path-id-unknown-run",
        ["telemetry", "--run", "{tmp}/one.db:7"],
        2,
        "no run 7",
        setup=_store_with_one_run,
        one_line=True,
    ),
    Fault(
        "cost-path-id",
        ["cost", "--run", "{tmp}/one.db:1", "--db", "{tmp}/none.db"],
        2,
        "no finished inference cases",
        setup=_store_with_one_run,
        one_line=True,
    ),
    Fault(
        "results-bad-ref",
        ["results", "--run", "one.db:x", "--db", "{tmp}/one.db"],
        2,
        "invalid run 'one.db:x'",
        setup=_store_with_one_run,
        one_line=True,
    ),
]


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    p = check(fault, tmp_path)
    assert "🔥" not in p.stdout + p.stderr and "🆗" not in p.stdout + p.stderr  # codes print as written
