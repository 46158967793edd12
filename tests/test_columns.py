"""Columns declared once: the column table, typed reads from the store, one combiner for
ranks and GPUs, the JSON Schema of an exported row, and a new column reaching every reader from its declaration."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from accelbench.core import columns
from accelbench.core.columns import COLUMNS, INT, SUM, col
from accelbench.store import Store

DOCS_SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "result-row.schema.json"


def _render(table) -> str:
    console = Console(width=400, record=True, markup=False, force_terminal=False)
    console.print(table)
    return console.export_text()


# --- the table -------------------------------------------------------------------------------------------------
def test_the_table_imports_without_torch_or_pandas():
    code = (
        "import sys; from accelbench.core import columns; "
        "assert 'torch' not in sys.modules and 'pandas' not in sys.modules, sorted(sys.modules); "
        "print(len(columns.COLUMNS))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) == len(COLUMNS) > 300


def test_a_family_declaration_names_each_member_and_a_second_declaration_is_refused():
    assert columns.get("family_gemm_conv_time_s").name == "family_*_time_s"
    assert columns.get("family_gemm_conv_flops_fp32").name == "family_*_flops_fp32"
    assert columns.get("gpm_fp16_util_pct").name == "gpm_*_pct"  # a GPM metric without its own declaration
    assert columns.get("gpm_sm_util_pct").label == "SM Active (%)"  # its own declaration wins
    assert columns.get("not_a_column") is None
    with pytest.raises(ValueError, match="declared twice"):
        columns.declare(col("energy_j", "float"))
    with pytest.raises(ValueError, match="rule"):
        col("x_s", "float", combine="median")


# --- missing is None, types from the table ---------------------------------------------------------------------
def test_a_store_read_is_typed_and_missing_is_none(tmp_path):
    st = Store(tmp_path / "t.db")
    rid = st.begin_run("inference", {}, "h", {})
    st.add_case(
        rid,
        {
            "case_key": "a",
            "workload": "inference",
            "status": "ok",
            "batch_size": 8,
            "top1": 0.5,
            "outputs_finite": True,
            "analytic_flops_by_op": {"aten.mm": 2.0},
            "images": "64",
        },
    )
    st.add_case(rid, {"case_key": "b", "workload": "inference", "status": "oom", "batch_size": 16})
    a, b = st.records(rid)
    assert a["batch_size"] == 8 and type(a["batch_size"]) is int
    assert a["outputs_finite"] is True and a["analytic_flops_by_op"] == {"aten.mm": 2.0}
    assert a["images"] == 64 and type(a["images"]) is int  # a number kept as text (older stores) reads as one
    assert b["top1"] is None and b["outputs_finite"] is None  # missing: None, never NaN
    assert all(not (isinstance(v, float) and math.isnan(v)) for r in (a, b) for v in r.values())
    assert "error" not in a  # a column no selected row has is left out, as the DataFrame read did
    assert columns.typed("top1", float("nan")) is None and columns.typed("latency_p99_ms", float("inf")) is None
    assert (
        columns.exported(a)["outputs_finite"] == 1 and columns.exported(a)["analytic_flops_by_op"] == '{"aten.mm": 2.0}'
    )


def test_energy_per_sample_has_one_format_in_every_table():
    from accelbench.report.views import LAYOUTS, view

    cells = {v: [fmt(0.0401) for _, key, fmt in view(v) if key == "energy_per_sample_j"] for v in LAYOUTS}
    shown = [c for cs in cells.values() for c in cs]
    assert len(shown) >= 5 and set(shown) == {"40.1"}, cells  # mJ, three significant digits


# --- one combiner: ranks and GPUs alike -------------------------------------------------------------------------
def _gpu(temp_max_c, throttle, **kw):
    return {
        "temp_max_c": temp_max_c,
        "temp_mean_c": temp_max_c - 10,
        "throttle_sample_frac": throttle,
        "power_mean_w": 300.0,
        "energy_j": 10.0,
        "energy_source": "nvml-counter",
        "energy_confidence": "ok",
        "device_mem_used_bytes": 5e9,
        "gpu_util_mean_pct": 80.0,
        **kw,
    }


def _rank(rank, gpu, **kw):
    return {
        "rank": rank,
        "host": "h",
        "window_start_epoch_s": 100.0,
        "window_end_epoch_s": 102.0 + rank,
        "samples_timed": 64,
        "workload": "inference-dp",
        "model": "m",
        "batch_size": 32,
        **gpu,
        **kw,
    }


def test_the_rank_combiner_and_the_gpu_combiner_give_the_same_answer():
    """The old disagreements: max temperature 75 (mean over ranks) vs 90 °C (max over GPUs); throttle share 0.25
    (mean) vs 0.5: now both are the worst GPU's, and one throttled GPU flags the --gpus row."""
    from accelbench.core import validity
    from accelbench.launchers.torchrun.results import aggregate
    from accelbench.telemetry.aggregate import combine

    gpus = [_gpu(60.0, 0.0), _gpu(90.0, 0.5, energy_confidence="low")]
    by_gpu = combine(gpus)
    by_rank = aggregate([_rank(0, gpus[0]), _rank(1, gpus[1])])
    for row in (by_gpu, by_rank):
        assert row["temp_max_c"] == 90.0 and row["throttle_sample_frac"] == 0.5
        assert row["temp_mean_c"] == 65.0 and row["gpu_util_mean_pct"] == 80.0  # means stay means
        assert row["power_mean_w"] == 600.0 and row["energy_j"] == 20.0  # the job's draw adds up
        assert row["device_mem_used_bytes"] == 5e9 and row["energy_source"] == "nvml-counter"
        assert row["energy_confidence"] == "low"  # the least confident GPU's
    assert by_gpu["gpus_monitored"] == 2
    assert "throttled" in validity.assess(by_rank)["validity"]


def test_a_sum_needs_every_gpu_and_a_setting_of_the_case_survives():
    from accelbench.launchers.torchrun.results import aggregate

    recs = [
        _rank(
            0, _gpu(70.0, 0.0), compile_mode="max-autotune", freezing=True, cudnn_benchmark=False, latency_p50_ms=3.0
        ),
        _rank(
            1,
            _gpu(70.0, 0.0, energy_j=None),
            compile_mode="max-autotune",
            freezing=True,
            cudnn_benchmark=False,
            latency_p50_ms=4.0,
        ),
    ]
    agg = aggregate(recs)
    assert (agg["compile_mode"], agg["freezing"], agg["cudnn_benchmark"]) == ("max-autotune", True, False)
    assert agg["energy_j"] is None  # one GPU without energy: no job total
    assert "latency_p50_ms" not in agg  # per-rank: stays on the rank rows
    assert agg["samples_timed"] == 128 and agg["throughput_samples_per_s"] == 128 / 3.0


# --- the JSON Schema ----------------------------------------------------------------------------------------------
def test_the_shipped_schema_file_is_the_generated_one_and_the_command_prints_it(tmp_path):
    from typer.testing import CliRunner

    from accelbench.cli import app

    assert DOCS_SCHEMA.read_text() == columns.schema_text(), (
        "regenerate: accelbench schema -o docs/result-row.schema.json"
    )
    res = CliRunner().invoke(app, ["schema"])
    assert res.exit_code == 0 and json.loads(res.output) == columns.json_schema()
    out = tmp_path / "s.json"
    assert CliRunner().invoke(app, ["schema", "-o", str(out)]).exit_code == 0
    assert out.read_text() == DOCS_SCHEMA.read_text()


def test_the_schema_is_valid_and_refuses_a_wrong_type():
    jsonschema = pytest.importorskip("jsonschema")
    schema = columns.json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    ok = {
        "case_id": 1,
        "run_id": 1,
        "case_key": "k",
        "workload": "inference",
        "status": "ok",
        "batch_size": 8,
        "outputs_finite": 1,
        "family_gemm_conv_time_s": 0.5,
        "someone_elses_column": "x",
    }
    jsonschema.validate(ok, schema)
    for bad in ({"batch_size": "8"}, {"status": "fine"}, {"outputs_finite": 2}, {"family_gemm_conv_time_s": "a"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**ok, **bad}, schema)


# --- a new column reaches every reader from its declaration alone --------------------------------------------------
def test_a_toy_column_reaches_the_wide_table_the_export_the_schema_and_the_aggregate(tmp_path, monkeypatch):
    from accelbench.launchers.torchrun.results import aggregate
    from accelbench.report.table import results_table
    from accelbench.store.export import csv_text, run_document

    toy = col("toy_widgets", INT, "Toy widgets", "int", combine=SUM, views="inference", doc="Widgets counted.")
    monkeypatch.setitem(COLUMNS, toy.name, toy)

    row = {"model": "m", "batch_size": 2, "precision": "fp32", "mode": "eager", "status": "ok", "toy_widgets": 7}
    wide = _render(results_table([row]))
    assert "Toy widgets" in wide and " 7 " in wide
    assert wide.index("Toy widgets") < wide.index("Status")  # before the table's Status
    assert "Toy widgets" not in _render(results_table([row], compact=True))  # it asked for the wide table only

    st = Store(tmp_path / "t.db")
    rid = st.begin_run("inference", {}, "h", {})
    st.add_case(rid, {"case_key": "a", "workload": "inference", "status": "ok", "toy_widgets": 7.0})
    assert run_document(st, rid)["results"][0]["toy_widgets"] == 7  # typed: an int
    assert csv_text(st, rid).splitlines()[1].endswith(",7")

    prop = columns.json_schema()["properties"]["toy_widgets"]
    assert prop["type"] == ["integer", "null"] and prop["title"] == "Toy widgets" and prop["x-combine"] == "sum"

    ranks = [_rank(0, {}, toy_widgets=3), _rank(1, {}, toy_widgets=4)]
    assert aggregate(ranks)["toy_widgets"] == 7
