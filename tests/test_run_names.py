"""Named runs (issue 24): schema 3 (a run's name and tags), ``--name`` / ``--tag`` on every measuring command and in
TOML, shown by ``results --runs``, in the JSON export and in the report's run title."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from accelbench import api
from accelbench.cli import app
from accelbench.core.errors import ConfigError
from accelbench.core.runlabel import RunLabel, check_name, parse_tags, run_label
from accelbench.store import SCHEMA_VERSION, Store
from conftest import TINY, run_cli, tiny_case

BEFORE_COLUMNS = Path(__file__).with_name("data") / "store-before-columns.db"


def _version(path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0])


def test_the_label_checks_name_and_tags():
    assert check_name("nightly") == "nightly" and check_name("pr/12.b_c-d+e@f") == "pr/12.b_c-d+e@f"
    for bad in ("", "12", "a b", "a:b", "x" * 101, 3):
        with pytest.raises(ConfigError, match="invalid name"):
            check_name(bad)
    assert parse_tags(["branch=main", "n = 2", "branch=dev", "url=a=b"]) == {"branch": "dev", "n": "2", "url": "a=b"}
    assert parse_tags({"gpu": "h100", "n": 2, "ok": True}) == {"gpu": "h100", "n": "2", "ok": "true"}
    for bad in (["novalue"], ["=x"], ["k="], ["1k=v"], {"k": [1]}, "k=v"):
        with pytest.raises(ConfigError):
            parse_tags(bad)
    # TOML layers first, the flags over them; tags merged key by key
    got = run_label("flag", ["a=2"], {"name": "toml", "tags": {"a": "1", "b": "1"}})
    assert got == RunLabel(name="flag", tags={"a": "2", "b": "1"})
    assert not run_label() and run_label(None, None, {"name": "toml"}).name == "toml"


def test_a_v2_store_is_upgraded_and_keeps_its_runs(tmp_path):
    old = tmp_path / "old.db"
    shutil.copy(BEFORE_COLUMNS, old)
    assert _version(old) == 2
    before = len(Store(old).runs())
    st = Store(old)
    assert _version(old) == SCHEMA_VERSION == 3
    runs = st.runs()
    assert len(runs) == before > 0
    assert {r["name"] for r in runs} == {None} and all(r["tags"] == {} for r in runs)
    rid = st.begin_run("inference", {}, "h", {}, label=RunLabel(name="after", tags={"k": "v"}))
    assert st.run(rid)["name"] == "after" and st.run(rid)["tags"] == {"k": "v"} and st.named("after") == [rid]


def test_a_store_written_by_schema_2_code_is_upgraded(tmp_path):
    # the schema-2 layout exactly: the runs table without name and tags, version 2
    path = tmp_path / "v2.db"
    st = Store(path)
    rid = st.begin_run("inference", {"models": ["m"]}, "h", {"device": "cpu"})
    st.finish_run(rid, "complete")
    st.close()
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN name")
        conn.execute("ALTER TABLE runs DROP COLUMN tags")
        conn.execute("UPDATE meta SET value='2' WHERE key='schema_version'")
    st = Store(path)
    assert _version(path) == 3
    assert st.run(rid)["name"] is None and st.run(rid)["tags"] == {}
    st.label_run(rid, RunLabel(name="late", tags={"a": "1"}))
    st.label_run(rid, RunLabel(tags={"b": "2"}))  # tags added, the name kept
    assert st.run(rid)["name"] == "late" and st.run(rid)["tags"] == {"a": "1", "b": "2"}
    assert st.names() == ["late"]


def test_a_named_run_is_listed_exported_and_titled(tmp_path):
    db, cfg = tmp_path / "r.db", tmp_path / "c.toml"
    cfg.write_text('name = "from-toml"\ntags = { team = "perf", branch = "toml" }\n')
    p = run_cli("run", *TINY, "--config", str(cfg), "--tag", "branch=main", "--tag", "pr=12", "--db", str(db))
    assert p.returncode == 0, p.stderr
    p = run_cli("run", *TINY, "--name", "nightly", "--db", str(db))
    assert p.returncode == 0, p.stderr
    runs = Store(db).runs()
    assert [(r["name"], r["tags"]) for r in runs] == [
        ("from-toml", {"team": "perf", "branch": "main", "pr": "12"}), ("nightly", {})]
    listed = run_cli("results", "--runs", "--db", str(db), check=True).stdout
    assert "from-toml" in listed and "nightly" in listed and "branch=main" in listed
    out = tmp_path / "2.json"
    run_cli("export", "--run", "2", "--format", "json", "--output", str(out), "--db", str(db), check=True)
    doc = json.loads(out.read_text())
    assert doc["name"] == "nightly" and doc["tags"] == {} and doc["finished_at"] >= doc["created_at"]
    shown = run_cli("results", "--run", "1", "--db", str(db), check=True).stdout
    assert "run 1 'from-toml' (inference, complete team=perf branch=main pr=12)" in shown
    from accelbench.report.sections import run_section

    assert run_section(Store(db), 2)["title"].startswith("Run 2 'nightly': inference")


def test_the_api_names_a_run(tmp_path):
    st = Store(tmp_path / "a.db")
    out = api.run(api.spec("inference", tiny_case()), st, name="api-run", tags={"by": "notebook"})
    assert st.run(out.run_id)["name"] == "api-run" and st.run(out.run_id)["tags"] == {"by": "notebook"}
    with pytest.raises(ConfigError, match="invalid tag"):
        api.run(api.spec("inference", tiny_case()), st, tags=["novalue"])
    assert len(st.runs()) == 1  # refused before a run was opened


@pytest.mark.parametrize("command", [["run"], ["train"], ["generate", "-m", "hf:tiny-shakespeare"], ["loadgen"],
                                     ["tune"], ["profile"]])
def test_every_measuring_command_refuses_a_tag_without_value(command, tmp_path):
    db = tmp_path / "x.db"
    res = CliRunner().invoke(app, [*command, "--tag", "novalue", "--device", "cpu", "--db", str(db)])
    assert res.exit_code == 2, res.output
    assert "invalid tag 'novalue'" in res.output and not db.exists()
    res = CliRunner().invoke(app, [*command, "--name", "a b", "--device", "cpu", "--db", str(db)])
    assert res.exit_code == 2 and "invalid name 'a b'" in res.output, res.output
