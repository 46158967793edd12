"""A store written before the renovation (by the issue-10 accelbench, commit 1109321: one run of every kind,
CPU, tests/data/store-before-renovation.db) opens, lists, shows, exports and takes new runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from accelbench.store import Store
from conftest import run_cli

OLD = Path(__file__).with_name("data") / "store-before-renovation.db"
KINDS = ["inference", "training", "convergence", "profile", "input-pipeline", "inference-dp"]


@pytest.fixture
def old(tmp_path) -> Path:
    db = tmp_path / "old.db"
    shutil.copy(OLD, db)
    return db


def test_every_old_run_opens_shows_and_exports(old, tmp_path):
    st = Store(old)
    assert [r["kind"] for r in st.runs()] == KINDS
    for run in st.runs():
        rid = str(run["run_id"])
        p = run_cli("results", "--run", rid, "--db", str(old))
        assert p.returncode == 0 and f"run {rid} ({run['kind']}, complete)" in p.stdout, p.stderr
        out = tmp_path / f"{rid}.json"
        assert run_cli("export", "--run", rid, "--format", "json", "--output", str(out), "--db",
                       str(old)).returncode == 0
        doc = json.loads(out.read_text())
        assert doc["kind"] == run["kind"] and len(doc["results"]) == run["cases"]
        csv = run_cli("export", "--run", rid, "--format", "csv", "--db", str(old)).stdout
        assert len(csv.strip().splitlines()) == run["cases"] + 1
    profile = json.loads((tmp_path / "4.json").read_text())
    assert profile["ceilings"]["device_name"] and "kernels" in profile["results"][0]


def test_an_old_store_takes_new_runs_and_its_cost_comparison_spans_both(old):
    p = run_cli("run", "--model", "cifar-resnet20", "--batch-sizes", "2", "--images", "4", "--device", "cpu",
                "--idle-s", "0", "--db", str(old))
    assert p.returncode == 0, p.stderr
    st = Store(old)
    assert [r["kind"] for r in st.runs()] == KINDS + ["inference"]
    c = run_cli("cost", "--db", str(old), "--all")
    assert c.returncode == 0 and c.stdout.count("cifar-resnet20") >= 3, c.stdout
