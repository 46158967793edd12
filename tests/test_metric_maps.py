"""A scenario's metric map says what its rows' numbers mean: every reader (compare, history, the tables, the report's
charts and histograms) asks it by the row's workload, and no module outside the declarations decides a row's kind from
which of its columns are filled. Synthetic runs through the Store API: no model runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from accelbench.core import columns, kinds
from accelbench.core.columns import MetricMap, maps
from accelbench.core.compare import compare_runs
from accelbench.core.history import history
from accelbench.core.rundata import load_run
from accelbench.store import Store

SRC = Path(__file__).resolve().parents[1] / "src" / "accelbench"
# a test of a latency column's presence: .get("tpot_p50_ms") is not None, "step_time_p50_ms" in rec, ...
PRESENCE = re.compile(
    r"""get\(\s*["'](?:tpot|step_time)_p50_ms["']\s*\)\s*(?:is\s+(?:not\s+)?None|\)|and|or|$)"""
    r"""|["'](?:tpot|step_time)_p50_ms["']\s+(?:not\s+)?in\s"""
)


def test_no_module_decides_a_row_s_kind_from_its_filled_columns():
    """Only the declarations (core/columns, the scenarios that fill the columns) name these columns for what they
    are; a reader that tests whether ``tpot_p50_ms`` or ``step_time_p50_ms`` is filled guesses the row's kind."""
    files = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[:2] != ("core", "columns")]
    readers = [p for p in files if p.relative_to(SRC).parts[0] != "scenarios"]
    assert len(readers) > 100 and any(p.name == "compare.py" for p in readers)
    found = [
        f"{p.relative_to(SRC)}:{i}: {line.strip()}"
        for p in readers
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if PRESENCE.search(line) or "latency_prefix" in line
    ]
    assert not found, "\n".join(found)
    assert PRESENCE.search('if rec.get("tpot_p50_ms") is not None:') and PRESENCE.search('"step_time_p50_ms" in rec')


def test_every_scenario_kind_has_one_map_and_its_tables_say_their_unit_and_statistic():
    from accelbench.report.views import caption, view

    for kind in (kinds.INFERENCE, kinds.TRAINING, kinds.GENERATE, kinds.LOADGEN, kinds.PROFILE, kinds.CONVERGENCE):
        assert columns.for_kind(kind) is not None, kind
    timed = [m for m in columns.MAPS.values() if m.throughput and m.latency_series]
    assert {m.name for m in timed} >= {"inference", "training", "generate"}
    for m in timed:
        headers = {key: head for head, key, _ in view(m.name)}
        assert m.throughput in headers and "/s" in headers[m.throughput], m.name  # the unit in the header
        assert m.throughput in {key for _, key, _ in view(f"{m.name}-compact")}
        assert caption(f"{m.name}-compact") == m.statistic and m.statistic, m.name  # which statistic, said
        assert m.workloads, m.name
        assert all(columns.for_workload(w) in columns.MAPS.values() for w in m.workloads)
    gen = columns.for_kind(kinds.GENERATE)
    assert (gen.throughput, gen.latency, gen.latency_series) == ("decode_tokens_per_s", "tpot", "itl_ms")
    assert caption("generate-compact").startswith("TTFT, TPOT: means")  # the compact figures: means with means


def test_a_second_map_for_a_workload_is_refused():
    with pytest.raises(ValueError, match="two metric maps"):
        maps.register(MetricMap(name="copy", workloads=(kinds.GENERATE,)))
    assert "copy" not in columns.MAPS


def _generate_run(store: Store, speed: float) -> int:
    """A generate run of one case: 5 timed generations of 8 decode steps at batch 2 (decode tokens/s = 2 / TPOT), its
    output tokens/s (the row's throughput_samples_per_s) a different figure on purpose."""
    run = store.begin_run(kinds.GENERATE, {"scenario": "generate"}, "h", {"device_name": "Test CPU"})
    itl = [(5.0 + 0.1 * ((3 * i) % 7)) / speed for i in range(40)]
    windows = [sum(itl[8 * w : 8 * w + 8]) / 8 for w in range(5)]
    decode = 2 * len(itl) / (sum(itl) / 1e3)
    rec = {
        "case_key": "lm|bs=2|fp32|eager|p=16|n=9",
        "workload": kinds.GENERATE,
        "status": "ok",
        "model": "lm",
        "batch_size": 2,
        "precision": "fp32",
        "mode": "eager",
        "prompt_len": 16,
        "new_tokens": 9,
        "decode_tokens_per_s": decode,
        "throughput_samples_per_s": 0.7 * decode,
        "tpot_p50_ms": sorted(itl)[20],
        "tpot_p99_ms": max(itl),
        "ttft_p50_ms": 20.0 / speed,
        "step_time_p50_ms": 99.0,  # a stray column: the row is still a generate row (its workload says so)
    }
    ttft = [(20.0 + 0.3 * w) / speed for w in range(5)]
    store.add_case(run, rec, {"itl_ms": itl, "tpot_window_ms": windows, "ttft_ms": ttft})
    store.finish_run(run, "complete")
    return run


def _inference_run(store: Store, speed: float) -> int:
    run = store.begin_run(kinds.INFERENCE, {"scenario": "inference"}, "h", {"device_name": "Test CPU"})
    lat = [[(10.0 + 0.05 * ((3 * b) % 7) + 0.02 * w) / speed for b in range(20)] for w in range(5)]
    walls = [sum(x) / 1e3 for x in lat]
    flat = [v for x in lat for v in x]
    rec = {
        "case_key": "m|bs=8|fp32|eager|cl=auto",
        "workload": kinds.INFERENCE,
        "status": "ok",
        "model": "m",
        "batch_size": 8,
        "precision": "fp32",
        "mode": "eager",
        "throughput_samples_per_s": 8 * len(flat) / sum(walls),
        "latency_p50_ms": sorted(flat)[50],
        "latency_p99_ms": max(flat),
        "windows": 5,
        "tpot_p50_ms": 1.0,  # a stray column: still an inference row
    }
    store.add_case(run, rec, {"latency_ms": flat, "window_wall_s": walls, "window_samples": [160.0] * 5})
    store.finish_run(run, "complete")
    return run


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    st = Store(tmp_path_factory.mktemp("maps") / "m.db")
    ids = {
        "gen": (_generate_run(st, 1.0), _generate_run(st, 0.8)),
        "inf": (_inference_run(st, 1.0), _inference_run(st, 0.8)),
    }
    return st, ids


def test_compare_reads_each_case_through_its_scenario_s_map(runs):
    st, ids = runs
    (gen,) = compare_runs(*(load_run(st, i) for i in ids["gen"])).cases
    ra, rb = (st.records(i)[0] for i in ids["gen"])
    assert gen.scenario == "generate" and "ttft_p50" in gen.metrics
    thr, tpot = gen.metrics["throughput"], gen.metrics["latency_p50"]
    assert (thr.a, thr.b) == (ra["decode_tokens_per_s"], rb["decode_tokens_per_s"])  # not the output tokens/s
    assert (tpot.a, tpot.b) == (ra["tpot_p50_ms"], rb["tpot_p50_ms"])
    assert thr.ratio == pytest.approx(0.8) and thr.verdict == "slower" and thr.ci_low <= 0.8 <= thr.ci_high
    (inf,) = compare_runs(*(load_run(st, i) for i in ids["inf"])).cases
    ia = st.records(ids["inf"][0])[0]
    assert inf.scenario == "inference" and "ttft_p50" not in inf.metrics
    assert inf.metrics["throughput"].a == ia["throughput_samples_per_s"]
    assert inf.metrics["latency_p50"].a == ia["latency_p50_ms"] and inf.metrics["throughput"].verdict == "slower"


def test_history_and_the_report_read_the_maps(runs):
    from accelbench.report.compare_table import compact_rows, rows
    from accelbench.report.distributions import case_latencies
    from accelbench.report.runs import table_for

    st, ids = runs
    series = history([load_run(st, i) for i in ids["gen"] + ids["inf"]])
    by = {(s.label.split()[0], s.metric): s.column for s in series}
    assert by == {
        ("lm", "throughput"): "decode_tokens_per_s",
        ("lm", "latency_p50"): "tpot_p50_ms",
        ("m", "throughput"): "throughput_samples_per_s",
    }
    gen = compare_runs(*(load_run(st, i) for i in ids["gen"]))
    heads, _ = rows(gen, wide=True)
    assert "Decode tok/s B/A (95% CI)" in heads and "TPOT p50 B/A (95% CI)" in heads and "TTFT p50 A" in heads
    assert [r[2] for r in compact_rows(gen)[1]] == ["Decode tok/s", "TTFT p50"]
    inf = compare_runs(*(load_run(st, i) for i in ids["inf"]))
    assert [r[2] for r in compact_rows(inf)[1]] == ["Throughput", "Latency p50"]
    found, _ = case_latencies(st, st.records(ids["gen"][0]))
    assert len(found) == 1 and len(found[0][1]) == 40  # the inter-token latencies, by the generate map
    found, _ = case_latencies(st, st.records(ids["inf"][0]))
    assert len(found) == 1 and len(found[0][1]) == 100
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(table_for(kinds.GENERATE)(st.records(ids["gen"][0]), compact=True))
    assert "TTFT, TPOT: means of the timed generations" in " ".join(console.export_text().split())
