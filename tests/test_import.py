"""Parquet exports and ``accelbench import``: a run exported (JSON or Parquet) and imported into another
store reads back column for column (floats exact), with its provenance, name, tags and raw series, so ``compare``
matches every case; CSV is refused (no run metadata), a missing pyarrow is one line naming the extra."""

from __future__ import annotations

import json
import os

import pytest
from conftest import cli_env, run_cli, tiny_case

from accelbench import api
from accelbench.store import Store

IGNORED = ("case_id", "run_id")  # numbered by the importing store


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A real tiny run: two batch sizes, 5 windows each (so compare gives verdicts), named and tagged."""
    db = tmp_path_factory.mktemp("src") / "src.db"
    st = Store(db)
    out = api.run(api.spec("inference", tiny_case(batch_sizes="1,2", repeats=5)), st, name="lab", tags={"gpu": "none"})
    st.close()
    return db, out.run_id


def _rows(store, run_id):
    return [{k: v for k, v in r.items() if k not in IGNORED} for r in store.records(run_id)]


def _round_trip(source, tmp_path, fmt):
    db, rid = source
    path = tmp_path / f"run.{fmt}"
    run_cli("export", "--run", str(rid), "--format", fmt, "--output", str(path), "--db", str(db), check=True)
    dst = tmp_path / "dst.db"
    p = run_cli("import", str(path), "--db", str(dst), check=True)
    assert f"run 1 (inference, 2 cases) in {dst}" in p.stdout
    return Store(db), Store(dst), path


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_export_then_import_reads_back_column_for_column(source, tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    orig, new, path = _round_trip(source, tmp_path, fmt)
    rid = source[1]
    a, b = _rows(orig, rid), _rows(new, 1)
    assert len(a) == 2 and a == b  # every column, floats compared exactly
    assert [type(v) for v in a[0].values()] == [type(v) for v in b[0].values()]
    ra, rb = orig.run(rid), new.run(1)
    for key in ("kind", "status", "created_at", "finished_at", "spec", "spec_hash", "name", "tags"):
        assert ra[key] == rb[key], key
    assert rb["env"]["imported_from"]["file"] == str(path.resolve()) and rb["env"]["imported_from"]["run_id"] == rid
    assert {k: v for k, v in rb["env"].items() if k != "imported_from"} == ra["env"]
    pairs = list(zip(orig.records(rid), new.records(1)))
    assert len(pairs) == 2
    for ca, cb in pairs:
        assert orig.all_series(ca["case_id"]) == new.all_series(cb["case_id"]) != {}
    (c,) = api.compare(orig, f"{orig.path}:{rid}", [f"{new.path}:1"])
    assert len(c.cases) == 2 and not c.only_a and not c.only_b
    assert {case.metrics["throughput"].ratio for case in c.cases} == {1.0}


def test_csv_and_other_files_are_refused_in_one_line(source, tmp_path):
    db, rid = source
    csv = tmp_path / "run.csv"
    run_cli("export", "--run", str(rid), "--output", str(csv), "--db", str(db), check=True)
    dst = tmp_path / "dst.db"
    p = run_cli("import", str(csv), "--db", str(dst))
    assert p.returncode == 2 and "a CSV export holds no run metadata" in p.stderr and p.stderr.count("\n") == 1
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "inference", "results": [{"case_key": 1}]}))
    p = run_cli("import", str(bad), "--db", str(dst))
    assert p.returncode == 2 and "not an accelbench run export" in p.stderr
    bad.write_text("{not json")
    p = run_cli("import", str(bad), "--db", str(dst))
    assert p.returncode == 2 and "not readable JSON" in p.stderr and not dst.exists()


def test_without_pyarrow_parquet_is_one_line_naming_the_extra(source, tmp_path):
    hide = tmp_path / "hide" / "pyarrow"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hide.parent), cli_env()["PYTHONPATH"]])}
    db, rid = source
    out = tmp_path / "x.parquet"
    p = run_cli("export", "--run", str(rid), "--format", "parquet", "--output", str(out), "--db", str(db), env=env)
    assert p.returncode == 2 and "pip install 'accelbench[parquet]'" in p.stderr and p.stderr.count("\n") == 1
    assert not out.exists()
    out.write_bytes(b"PAR1")
    p = run_cli("import", str(out), "--db", str(tmp_path / "d.db"), env=env)
    assert p.returncode == 2 and "pip install 'accelbench[parquet]'" in p.stderr


def test_a_gzipped_json_export_imports_as_the_json_does(source, tmp_path):
    """The repository keeps its recorded results as ``.json.gz``: they import without unpacking."""
    import gzip

    db, rid = source
    path = tmp_path / "run.json"
    run_cli("export", "--run", str(rid), "--format", "json", "--output", str(path), "--db", str(db), check=True)
    packed = tmp_path / "run.json.gz"
    packed.write_bytes(gzip.compress(path.read_bytes()))
    dst = tmp_path / "dst.db"
    p = run_cli("import", str(packed), "--db", str(dst), check=True)
    assert f"run 1 (inference, 2 cases) in {dst}" in p.stdout
    a, b = _rows(Store(db), rid), _rows(Store(dst), 1)
    assert len(a) == 2 and a == b
    packed.write_bytes(b"\x1f\x8b not gzip")
    p = run_cli("import", str(packed), "--db", str(tmp_path / "d2.db"))
    assert p.returncode == 2 and "not readable JSON" in p.stderr and p.stderr.count("\n") == 1
