"""The Python API: the README's example runs as written, and every command returns a typed, frozen result with
the run id, the store, how it ended, the rows and ``to_dataframe()``."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from conftest import tiny_case

README = Path(__file__).resolve().parents[1] / "README.md"


def readme_example() -> str:
    """The first python block of the README's "Python API" section."""
    section = README.read_text().split("\n## Python API\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no python example in the README's Python API section"
    return blocks[0]


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch, capsys):
    import pandas as pd

    from accelbench.api import RunResult

    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(readme_example(), "README.md", "exec"), names)  # noqa: S102  (our own README)
    out, df = names["out"], names["df"]
    assert isinstance(out, RunResult) and isinstance(df, pd.DataFrame)
    assert (out.run_id, out.store_path, out.interrupted, out.exit_code) == (1, Path("a.db"), False, 0)
    assert capsys.readouterr().out.startswith("1 a.db False 0\n")
    assert list(df["batch_size"]) == [1, 8] and (df["throughput_samples_per_s"] > 0).all()
    assert [r["batch_size"] for r in out.records] == [1, 8] and out.statuses == ["ok", "ok"]
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["run_id"] == 1 and len(doc["results"]) == 2


def test_a_result_is_frozen_and_reads_its_run_back(tmp_path):
    from accelbench import api
    from accelbench.store import Store

    out = api.run(api.spec("inference", tiny_case()), Store(tmp_path / "r.db"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.run_id = 2
    assert out.store_path == tmp_path / "r.db" and out.notes == [] and out.errors == 0
    df = out.to_dataframe()
    assert list(df["case_id"]) == [r["case_id"] for r in out.records] and len(df) == 1


def test_a_failed_case_is_in_the_result_and_its_exit_code(tmp_path):
    from accelbench import api
    from accelbench.store import Store

    spec = api.spec("inference", tiny_case(model="helpers:broken_model"))
    out = api.run(spec, Store(tmp_path / "r.db"))
    assert out.statuses == ["error"] and out.errors == 1 and out.exit_code == 1
    assert list(out.to_dataframe()["status"]) == ["error"]


def test_profile_returns_its_ceilings_and_still_unpacks(tmp_path):
    from accelbench import api
    from accelbench.api import ProfileResult
    from accelbench.store import Store

    spec = api.spec(
        "profile",
        tiny_case(
            model="helpers:tiny_conv_net", images=None, min_timed_batches=None, ncu="off", timed_steps=1, warmup_steps=0
        ),
    )
    res = api.profile(spec, Store(tmp_path / "p.db"))
    assert isinstance(res, ProfileResult) and res.ceilings is not None and res.ceilings_cached is False
    out, ceilings, cached = res  # the 3-tuple of earlier releases
    assert out is res and ceilings is res.ceilings and cached is False
    assert [r["status"] for r in res.records] == ["ok"] and res.to_dataframe()["analytic_flops"].iloc[0] > 0
