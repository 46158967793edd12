"""Named runs: schema 3 (a run's name and tags), ``--name`` / ``--tag`` on every measuring command and in
TOML, shown by ``results --runs``, in the JSON export and in the report's run title."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import TINY, old_store, run_cli, tiny_case
from typer.testing import CliRunner

from accelbench import api
from accelbench.cli import app
from accelbench.core.errors import ConfigError
from accelbench.core.runlabel import RunLabel, check_name, parse_tags, run_label
from accelbench.store import SCHEMA_VERSION, Store


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
    old_store("store-before-columns", old)
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
        ("from-toml", {"team": "perf", "branch": "main", "pr": "12"}),
        ("nightly", {}),
    ]
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


@pytest.mark.parametrize(
    "command", [["run"], ["train"], ["generate", "-m", "hf:tiny-shakespeare"], ["loadgen"], ["tune"], ["profile"]]
)
def test_every_measuring_command_refuses_a_tag_without_value(command, tmp_path):
    db = tmp_path / "x.db"
    res = CliRunner().invoke(app, [*command, "--tag", "novalue", "--device", "cpu", "--db", str(db)])
    assert res.exit_code == 2, res.output
    assert "invalid tag 'novalue'" in res.output and not db.exists()
    res = CliRunner().invoke(app, [*command, "--name", "a b", "--device", "cpu", "--db", str(db)])
    assert res.exit_code == 2 and "invalid name 'a b'" in res.output, res.output


@pytest.fixture(scope="module")
def named_store(tmp_path_factory):
    """A real tiny store: run 1 named ``base``, run 2 unnamed, run 3 named ``base`` again, run 4 named ``pr``."""
    db = tmp_path_factory.mktemp("named") / "n.db"
    st = Store(db)
    for name in ("base", None, "base", "pr"):
        api.run(api.spec("inference", tiny_case()), st, name=name)
    st.close()
    return db


def test_compare_baseline_takes_the_newest_run_of_that_name(named_store):
    p = run_cli("compare", "--baseline", "base", "--db", str(named_store), check=True)
    # A: the newest 'base' (run 3); B: the newest other run (run 4)
    assert "run 4 'pr' (B) vs run 3 'base' (A): 1 matched cases" in p.stdout, p.stdout
    p = run_cli("compare", "--baseline", "base", "2", "--db", str(named_store), check=True)
    assert "run 2 (B) vs run 3 'base' (A): 1 matched cases" in p.stdout, p.stdout


def test_a_run_name_is_a_run_reference_wherever_ids_are(named_store, tmp_path):
    p = run_cli("compare", "name:base", "name:pr", "--db", str(named_store), check=True)
    assert "run 4 'pr' (B) vs run 3 'base' (A)" in p.stdout
    other = tmp_path / "elsewhere.db"  # no --db store needed: both runs named by PATH:name:NAME
    p = run_cli("compare", f"{named_store}:name:base", f"{named_store}:1", "--db", str(other), check=True)
    assert f"{named_store}:1 'base' (B) vs {named_store}:3 'base' (A)" in p.stdout and not other.exists()
    p = run_cli("results", "--run", "name:pr", "--db", str(named_store), check=True)
    assert p.stdout.startswith("run 4 'pr' (inference")
    out = tmp_path / "pr.csv"
    run_cli("export", "--run", "name:pr", "--output", str(out), "--db", str(named_store), check=True)
    assert out.read_text().count("\n") == 2  # the header and the one case


def test_an_unknown_name_lists_the_known_ones(named_store, tmp_path):
    p = run_cli("compare", "--baseline", "nightly", "--db", str(named_store))
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0
    assert "no run named 'nightly'" in p.stderr and "known names: base, pr" in p.stderr
    p = run_cli("compare", "name:nope", "1", "--db", str(named_store))
    assert p.returncode == 2 and "known names: base, pr" in p.stderr
    empty = tmp_path / "unnamed.db"
    api.run(api.spec("inference", tiny_case()), Store(empty))
    p = run_cli("compare", "--baseline", "x", "--db", str(empty))
    assert p.returncode == 2 and "no run in it has a name" in p.stderr
