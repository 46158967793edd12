"""A store written before the renovation (by accelbench at commit 1109321: one run of every kind,
CPU, tests/data/store-before-renovation.db.gz) opens, lists, shows, exports and takes new runs."""

from __future__ import annotations

import io
import json
from csv import reader as csv_rows
from pathlib import Path

import pytest
from conftest import old_store, run_cli

from accelbench.store import Store

KINDS = ["inference", "training", "convergence", "profile", "input-pipeline", "inference-dp"]


@pytest.fixture
def old(tmp_path) -> Path:
    db = tmp_path / "old.db"
    old_store("store-before-renovation", db)
    return db


def test_every_old_run_opens_shows_and_exports(old, tmp_path):
    st = Store(old)
    assert [r["kind"] for r in st.runs()] == KINDS
    for run in st.runs():
        rid = str(run["run_id"])
        p = run_cli("results", "--run", rid, "--db", str(old))
        assert p.returncode == 0 and f"run {rid} ({run['kind']}, complete)" in p.stdout, p.stderr
        out = tmp_path / f"{rid}.json"
        assert (
            run_cli("export", "--run", rid, "--format", "json", "--output", str(out), "--db", str(old)).returncode == 0
        )
        doc = json.loads(out.read_text())
        assert doc["kind"] == run["kind"] and len(doc["results"]) == run["cases"]
        csv = run_cli("export", "--run", rid, "--format", "csv", "--db", str(old)).stdout
        assert len(csv.strip().splitlines()) == run["cases"] + 1
    profile = json.loads((tmp_path / "4.json").read_text())
    assert profile["ceilings"]["device_name"] and "kernels" in profile["results"][0]


def test_an_old_store_takes_new_runs_and_its_cost_comparison_spans_both(old):
    p = run_cli(
        "run",
        "--model",
        "cifar-resnet20",
        "--batch-sizes",
        "2",
        "--images",
        "4",
        "--device",
        "cpu",
        "--idle-s",
        "0",
        "--db",
        str(old),
    )
    assert p.returncode == 0, p.stderr
    st = Store(old)
    assert [r["kind"] for r in st.runs()] == KINDS + ["inference"]
    c = run_cli("cost", "--db", str(old), "--all")
    assert c.returncode == 0 and c.stdout.count("cifar-resnet20") >= 3, c.stdout


# A store written just before the column table (commit 34fe6e4, tests/data/make-store-before-columns.sh): one run of each
# kind, read now through the column table.
KINDS_22 = [
    "inference",
    "training",
    "convergence",
    "profile",
    "loadgen",
    "input-pipeline",
    "interconnect",
    "tune",
    "inference-dp",
]


def test_a_store_written_before_the_column_table_reads_typed_with_every_column_declared(tmp_path):
    from accelbench.core import columns

    db = tmp_path / "b.db"
    old_store("store-before-columns", db)
    st = Store(db)
    assert [r["kind"] for r in st.runs()] == KINDS_22
    rows = st.records()
    assert len(rows) == sum(r["cases"] for r in st.runs()) > 30
    undeclared = sorted({k for r in rows for k in r if columns.get(k) is None})
    assert not undeclared, undeclared
    for r in rows:
        for k, v in r.items():
            c = columns.get(k)
            if v is not None and c.type == "int":
                assert type(v) is int, (k, v)
            assert not (isinstance(v, float) and v != v), k


def test_a_store_written_before_the_column_table_shows_and_exports_valid_rows(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    from typer.testing import CliRunner

    from accelbench.cli import app
    from accelbench.core.columns import json_schema

    db = tmp_path / "b.db"
    old_store("store-before-columns", db)
    runner, validator = CliRunner(), jsonschema.Draft202012Validator(json_schema())
    runs = Store(db).runs()
    assert len(runs) >= 3
    for run in runs:
        rid = str(run["run_id"])
        for wide in ([], ["--wide"]):
            res = runner.invoke(app, ["results", "--run", rid, "--db", str(db), *wide])
            assert res.exit_code == 0 and f"run {rid} ({run['kind']}, complete)" in res.output, res.output
        out = tmp_path / f"{rid}.json"
        assert (
            runner.invoke(app, ["export", "--run", rid, "--format", "json", "-o", str(out), "--db", str(db)]).exit_code
            == 0
        )
        results = json.loads(out.read_text())["results"]
        assert len(results) == run["cases"]
        errors = [f"{e.path}: {e.message}" for r in results for e in validator.iter_errors(r)]
        assert not errors, errors[:5]
        csv = runner.invoke(app, ["export", "--run", rid, "--format", "csv", "--db", str(db)])
        assert csv.exit_code == 0 and len(list(csv_rows(io.StringIO(csv.output)))) == run["cases"] + 1
    html = tmp_path / "r.html"
    assert runner.invoke(app, ["report", "--db", str(db), "--html", str(html)]).exit_code == 0
    assert html.stat().st_size > 10_000 and "Run 9: inference-dp" in html.read_text()
