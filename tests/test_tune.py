"""``accelbench tune``: the search as pure functions (exact numbers), then real tunes of tiny models on the CPU
(bracketing and bisection to a real out-of-memory boundary, constraints, resume, the TOML round trip)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import flags, tiny_case

from accelbench.core.errors import ConfigError
from accelbench.studies import tune_search as ts

TINY = tiny_case(model=None, batch_sizes=None, images=8, telemetry_period_ms=0, warmup_batches=0)

# One torch thread for every real tune: tiny CPU steps run several times faster than with two threads that wait on
# each other on a shared 2-core machine.
pytestmark = pytest.mark.usefixtures("one_thread")


def _walk(fails_above: int, score=lambda b: float(b), start: int = 1, max_batch: int = 256) -> dict:
    tried: dict[int, float | None] = {}
    while (b := ts.next_batch(tried, start, max_batch)) is not None:
        tried[b] = None if b > fails_above else score(b)
    return tried


def test_bracketing_then_bisection_finds_the_boundary():
    assert list(_walk(2)) == [1, 2, 4, 3]  # doubling hits the boundary at 4, bisection tries 3
    tried = _walk(100)
    assert list(tried) == [1, 2, 4, 8, 16, 32, 64, 128, 96, 112, 104]
    assert ts.best_batch(tried) == 96  # within 100/8 of the boundary, not a grid of 128 batch sizes
    assert list(_walk(10**6, max_batch=16)) == [1, 2, 4, 8, 16]  # never above max_batch
    assert list(_walk(0, start=8)) == [8, 4, 2, 1]  # a failing first batch halves down


def test_doubling_stops_on_a_plateau_and_does_not_bisect_past_the_best():
    tried = _walk(10**6, score=lambda b: float(min(b, 16)))
    assert list(tried) == [1, 2, 4, 8, 16, 32, 64]  # two doublings without a 2 % gain
    assert ts.best_batch(tried) == 16
    # the best batch is below the largest good one: no bisection towards the boundary
    assert ts.next_batch({1: 1.0, 2: 3.0, 4: 2.0, 8: None}, 1, 256) is None


def test_a_survivor_peaking_below_its_start_halves_down_while_it_gains():
    peak = lambda b: -abs(b - 512) + 2000.0  # noqa: E731  (a compiled training step peaking at 512)
    assert list(_walk(10**6, score=peak, start=1024, max_batch=1024)) == [1024, 512, 256]
    assert list(_walk(10**6, start=1024, max_batch=1024)) == [1024, 512]  # growing with batch: one step down only


def test_dominated_configurations_are_pruned():
    scores = {
        "fp32": {8: 100.0, 16: 150.0},
        "bf16": {8: 200.0, 16: 300.0},
        "fp16": {8: 250.0, 16: None},
        "alone": {1: 5.0},
    }
    assert ts.dominated(scores) == {"fp32"}  # fp16 loses at 16 (failed) but wins at 8; no common batch for alone
    assert ts.dominated({"a": {8: 1.0}, "b": {8: 1.0}}) == set()  # a tie dominates nothing
    assert ts.dominated({"a": {8: 100.0}, "b": {8: 106.0}, "c": {8: 110.0}}, margin=0.05) == {"a"}  # b: within 5 %


def test_halving_keeps_the_best():
    got = {"a": 10.0, "b": 40.0, "c": 30.0, "d": None, "e": 20.0}
    assert ts.halve(got, 2) == ["b", "c", "e"]  # ceil(5 / 2), the failed one dropped
    assert ts.halve({"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}, 4, keep_min=2) == ["d", "c"]


def test_scores_and_constraints():
    row = {
        "status": "ok",
        "throughput_samples_per_s": 500.0,
        "latency_p50_ms": 2.0,
        "latency_p99_ms": 4.0,
        "process_rss_bytes": 1000,
        "top1": 0.90,
    }
    assert ts.score(row, "throughput") == 500.0 and ts.score(row, "latency") == -2.0
    assert ts.score(row, "energy") == 500.0  # no energy counter: throughput stands in
    assert ts.score({**row, "status": "oom"}, "throughput") is None
    st = ts.TuneSettings(max_latency_p99_ms=3.0)
    assert "latency p99 4 ms > 3 ms" in ts.violation(row, st)
    assert ts.violation(row, ts.TuneSettings(max_memory_bytes=999)).startswith("memory 1000 bytes")
    assert ts.violation(row, ts.TuneSettings(min_top1_ratio=0.99), top1_ref=0.95) is not None  # 0.947 < 0.99
    assert ts.violation(row, ts.TuneSettings(min_top1_ratio=0.94), top1_ref=0.95) is None


def test_explain_names_what_got_the_winner_there():
    def row(stage, p, m, b, thr):
        return {
            "tune_stage": stage,
            "precision": p,
            "mode": m,
            "batch_size": b,
            "status": "ok",
            "throughput_samples_per_s": thr,
        }

    rows = [
        row("screen", "bf16", "compile", 256, 100.0),
        row("screen", "bf16", "compile-freeze", 256, 120.0),
        row("screen", "bf16", "compile-freeze", 128, 96.0),
        row("screen", "amp-bf16", "compile-freeze", 256, 80.0),
    ]
    lines = ts.explain(rows, rows[1], "throughput")
    assert lines == [
        "precision bf16 vs amp-bf16: x1.500 throughput_samples_per_s (screen)",
        "mode compile-freeze vs compile: x1.200 throughput_samples_per_s (screen)",
        "batch_size 256 vs 128: x1.250 throughput_samples_per_s (screen)",
    ]
    # no energy counter (a CPU without RAPL): throughput stands in for energy, and the better row still shows > 1
    assert (
        ts.explain(rows, rows[1], "energy")[1] == "mode compile-freeze vs compile: x1.200 energy_per_sample_j (screen)"
    )
    lower = [{**r, "latency_p50_ms": 1000.0 / r["throughput_samples_per_s"]} for r in rows]
    assert ts.explain(lower, lower[1], "latency")[1] == "mode compile-freeze vs compile: x1.200 latency_p50_ms (screen)"


def test_pareto_front():
    rows = [
        {"throughput_samples_per_s": 100.0, "latency_p99_ms": 1.0},
        {"throughput_samples_per_s": 300.0, "latency_p99_ms": 5.0},
        {"throughput_samples_per_s": 200.0, "latency_p99_ms": 6.0},
    ]
    assert [r["throughput_samples_per_s"] for r in ts.pareto_front(rows)] == [300.0, 100.0]


@pytest.mark.parametrize(
    "kw, field",
    [
        ({"objective": "speed"}, "objective"),
        ({"budget_s": 0}, "budget_s"),
        ({"budget_s": -5.0}, "budget_s"),
        ({"eta": 1}, "eta"),
    ],
)
def test_bad_settings(kw, field):
    with pytest.raises(ConfigError, match=f"invalid {field}"):
        ts.TuneSettings(**kw)


def _measured(thr_per_window: list[float], seed: int):
    from accelbench.core.ci import Windows
    from accelbench.core.rundata import Measured

    rng = np.random.default_rng(seed)
    lat = tuple(np.full(20, 8 / t * 1e3) * rng.normal(1, 0.01, 20) for t in thr_per_window)
    win = Windows(
        wall_s=np.array([20 * 8 / t for t in thr_per_window]), samples=np.full(len(lat), 160.0), latency_ms=lat
    )
    return Measured(record={"case_id": seed, "throughput_samples_per_s": win.throughput()}, windows=win)


def test_the_verdict_says_within_noise_or_faster():
    from accelbench.studies.tune_final import verdict_of

    rng = np.random.default_rng(1)
    a = _measured(list(1000 * rng.normal(1, 0.01, 6)), 1)
    same = verdict_of(a, _measured(list(1000 * rng.normal(1, 0.01, 6)), 2), "throughput")
    assert same.verdict == "within noise" and same.ci_low < 1 < same.ci_high
    faster = verdict_of(a, _measured(list(1300 * rng.normal(1, 0.01, 6)), 3), "throughput")
    assert faster.verdict == "faster" and faster.ci_low > 1.2


def _tune(tmp_path, model="cifar-resnet20", resume=False, on_trial=None, **kw):
    from accelbench import api
    from accelbench.store import Store

    # 8 timed steps a window (a whole pass of the 8 images at batch 1, as windows were before they counted steps):
    # one-step windows let a single scheduler hiccup rank batch 1 above batch 2
    spec = api.spec("inference", {**TINY, "model": model, "min_timed_batches": 8})
    settings = ts.TuneSettings(
        **{"modes": ("eager",), "screen_time_s": 0.0, "final_rounds": 2, "final_repeats": 2, "budget_s": 60.0, **kw}
    )
    store = Store(tmp_path / "tune.db")
    return api.tune(spec, store, settings, resume=resume, on_trial=on_trial), store


def test_a_real_tune_brackets_to_the_cpu_oom_boundary(tmp_path, one_thread):
    # the search, not the budget, is under test: a budget a loaded 2-core machine cannot exhaust (with 60 s, beside
    # a CPU-burning process, the planner rightly skipped the bisection's batch 3). One torch thread: bisection to 3
    # needs batch 2 to score above batch 1, and with two threads on a core shared with a burner and another xdist
    # worker, a tiny step's threads wait on each other long enough to rank batch 1 first (seen once: no batch 3).
    # Windows of at least 0.2 s, not 8 steps of a few milliseconds: a descheduling under load is a small part of each
    out, store = _tune(tmp_path, model="helpers:cpu_oom_model", precisions=("fp32",), budget_s=900.0, screen_time_s=0.2)
    screen = {int(r["batch_size"]): r["status"] for r in out.trials if r["tune_stage"] == "screen"}
    assert screen == {1: "ok", 2: "ok", 4: "oom", 3: "oom"}
    assert out.winner["batch_size"] == 2 and out.winner["final_windows"] == 4  # 2 rounds x 2 windows
    assert out.baseline is out.winner or out.baseline["case_id"] == out.winner["case_id"]
    rows = store.cases(out.run_id)
    assert len(rows) == len(out.trials) and set(rows["tune_stage"]) == {"screen", "final0", "final1"}
    assert {"freezing", "cudnn_benchmark"} <= set(rows.columns)  # compile_mode is None (NULL) for eager
    assert not rows["freezing"].any()


def test_a_tune_made_through_the_api_has_its_winner_in_the_html_report(tmp_path):
    """A notebook's tune (no CLI) stores its summary: the report's "Winner" block holds the winner, what got it
    there and the command, as ``accelbench tune`` prints them."""
    import html

    from accelbench import api

    out, store = _tune(tmp_path, precisions=("fp32",), batch_sizes=(1, 2), final_rounds=1)
    assert out.winner is not None and out.command.startswith("accelbench run ")
    assert out.summary[0].startswith("winner (throughput): fp32 eager batch ")
    assert out.report_lines == [
        *out.summary,
        *out.notes,
        *("what got it there: " + w for w in out.explain),
        f"run it: {out.command}",
    ]
    page = tmp_path / "r.html"
    doc = api.report(store, [out.run_id], html=page)
    blocks = [b for s in doc["sections"] for b in s["blocks"] if b and b.get("title") == "Winner"]
    assert len(blocks) == 1 and blocks[0]["lines"] == out.report_lines
    text = html.unescape(page.read_text())
    assert out.summary[0] in text and f"run it: {out.command}" in text


def test_constraints_are_respected(tmp_path):
    out, _ = _tune(tmp_path, precisions=("fp32",), batch_sizes=(2,), max_memory_bytes=1)
    assert out.winner is None and out.pareto == []
    assert any("met the constraints" in n for n in out.notes)


def test_resume_skips_finished_trials(tmp_path):
    seen = []

    def stop_after_two(row):
        seen.append(row["case_key"])
        if len(seen) == 2:
            raise KeyboardInterrupt

    first, store = _tune(tmp_path, precisions=("fp32", "bf16"), batch_sizes=(2,), on_trial=stop_after_two)
    assert first.interrupted and store.run(first.run_id)["status"] == "interrupted"
    again, _ = _tune(tmp_path, precisions=("fp32", "bf16"), batch_sizes=(2,), resume=True)
    assert again.run_id == first.run_id and again.skipped_done >= 2 and again.winner is not None
    keys = list(store.cases(first.run_id)["case_key"])
    assert len(keys) == len(set(keys)) and set(seen) <= set(keys)


def test_the_winner_round_trips_through_run_config(tmp_path):
    from accelbench import api
    from accelbench.cli.common import layers
    from accelbench.studies.tune_final import command, toml_text

    spec = api.spec("inference", {**TINY, "model": "cifar-resnet20", "channels_last": False})
    rec = {"model": "cifar-resnet20", "batch_size": 4, "precision": "bf16", "mode": "compile-freeze"}
    path = tmp_path / "best.toml"
    path.write_text(toml_text(spec, rec, "winner\nsecond line"))
    back = api.spec("inference", *layers(path, "sweep", {}))
    assert (back.models, back.batch_sizes, back.precisions, back.modes, back.channels_last, back.device) == (
        ("cifar-resnet20",),
        (4,),
        ("bf16",),
        ("compile-freeze",),
        "off",
        "cpu",
    )
    train = api.spec("train_step", *layers(path, "train", {}))
    assert train.batch_sizes == (4,) and train.channels_last == "off"
    assert command(spec, rec).startswith(
        "accelbench run --model cifar-resnet20 --batch-sizes 4 --precisions bf16 "
        "--modes compile-freeze --no-channels-last --device cpu"
    )


def test_cli_tune_writes_a_toml_that_run_accepts(tmp_path):
    from typer.testing import CliRunner

    from accelbench.cli import app
    from accelbench.store import Store

    db, toml, png, js = (str(tmp_path / n) for n in ("t.db", "best.toml", "front.png", "t.json"))
    tiny = [*flags(tiny_case(model=None, batch_sizes=None, images=8, telemetry_period_ms=0)), "--db", db]
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "-m",
            "cifar-resnet20",
            "-p",
            "fp32,bf16",
            "--modes",
            "eager",
            "-b",
            "2",
            "--final-rounds",
            "1",
            "--final-repeats",
            "2",
            "--screen-time-s",
            "0",
            "--out-toml",
            toml,
            "--plot",
            png,
            "--json",
            js,
            *tiny,
        ],
    )
    assert res.exit_code == 0, res.output
    assert "winner (throughput)" in res.output and "run it: accelbench run --model cifar-resnet20" in res.output
    tuned = json.loads(Path(js).read_text())["tune"]
    assert Path(png).stat().st_size > 0 and tuned["winner"]["batch_size"] == 2
    res = CliRunner().invoke(app, ["run", "-c", toml, *tiny])
    assert res.exit_code == 0, res.output
    rows = Store(db).cases(max(r["run_id"] for r in Store(db).runs()))
    assert list(rows["precision"]) == [tuned["winner"]["precision"]] and list(rows["batch_size"]) == [2]
    html = tmp_path / "r.html"
    assert CliRunner().invoke(app, ["report", "--db", db, "--html", str(html)]).exit_code == 0
    assert "Pareto front" in html.read_text()
    assert "winner (throughput)" in html.read_text() and "run it: accelbench run" in html.read_text()


def test_train_space_keeps_trainable_backends_and_searches_the_optimizer_kernels():
    from accelbench.studies.tune import configs, default_config, label

    cuda = configs(ts.TuneSettings(workload="train"), cuda=True)
    # no -freeze, no max-autotune; the whole-step CUDA graphs
    assert {c[1] for c in cuda} == {"eager", "compile", "reduce-overhead", "cudagraphs", "compile-cudagraphs"}
    assert {c[0] for c in cuda} == {"amp-bf16", "amp-fp16", "bf16"} and len(cuda) == 3 * 5 * 2
    assert cuda[0] == default_config(True, "train") == ("amp-bf16", "eager", True)
    assert label(cuda[0]) == "amp-bf16 eager fused" and label(("bf16", "compile", False)) == "bf16 compile foreach"
    assert configs(ts.TuneSettings(workload="train"), cuda=False)[0] == ("fp32", "eager", None)
    assert ts.TuneSettings().to_dict()["workload"] == "inference"  # in the tune run's spec hash
    row = ts.as_trial({"step_time_p50_ms": 3.0, "step_time_p99_ms": 5.0}, "train")
    assert (row["latency_p50_ms"], row["latency_p99_ms"]) == (3.0, 5.0)


def test_a_real_train_tune_brackets_the_step_to_the_cpu_oom_boundary(tmp_path):
    from accelbench import api
    from accelbench.store import Store

    spec = api.spec("train_step", {**TINY, "model": "helpers:cpu_oom_model"})
    settings = ts.TuneSettings(
        workload="train",
        precisions=("fp32",),
        modes=("eager",),
        screen_time_s=0.0,
        final_rounds=2,
        final_repeats=2,
        budget_s=60.0,
    )
    out = api.tune(spec, Store(tmp_path / "t.db"), settings)
    screen = [(int(r["batch_size"]), r["status"]) for r in out.trials if r["tune_stage"] == "screen"]
    assert screen[:3] == [(1, "ok"), (2, "ok"), (4, "oom")]  # the backward pass of batch 4 does not fit
    assert out.winner["batch_size"] in (1, 2) and out.winner["final_windows"] == 4
    assert out.winner["latency_p50_ms"] > 0 and out.winner["step_time_p50_ms"] > 0  # the step time, pooled
    rows = Store(tmp_path / "t.db").cases(out.run_id)
    ok = rows[rows["status"] == "ok"]
    assert ok["steps_timed"].notna().all() and rows["case_key"].str.endswith("|sgd|trial=screen").sum() >= 3


def test_train_rejects_the_accuracy_constraint_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from accelbench.cli import app

    with pytest.raises(ConfigError, match="invalid min_top1_ratio"):
        ts.TuneSettings(workload="train", min_top1_ratio=0.99)
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "--workload",
            "train",
            "-m",
            "cifar-resnet20",
            "--device",
            "cpu",
            "--min-top1-ratio",
            "0.99",
            "--db",
            str(tmp_path / "t.db"),
        ],
    )
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "min_top1_ratio" in res.output and not (tmp_path / "t.db").exists()


def test_cli_train_tune_stores_step_trials_and_its_toml_runs_in_train(tmp_path):
    import tomllib
    from typer.testing import CliRunner

    from accelbench.cli import app
    from accelbench.store import Store

    db, toml = str(tmp_path / "t.db"), tmp_path / "best.toml"
    tiny = [*flags(tiny_case(model=None, batch_sizes=None, telemetry_period_ms=0, warmup_batches=0)), "--db", db]
    res = CliRunner().invoke(
        app,
        [
            "tune",
            "--workload",
            "train",
            "-m",
            "cifar-resnet20",
            "-p",
            "fp32",
            "--modes",
            "eager",
            "-b",
            "2",
            "--optimizer",
            "adamw",
            "--fused-optimizers",
            "on",
            "--final-rounds",
            "1",
            "--final-repeats",
            "2",
            "--screen-time-s",
            "0",
            "--objective",
            "latency",
            "--out-toml",
            str(toml),
            *tiny,
        ],
    )
    assert res.exit_code == 0, res.output
    assert "winner (latency): fp32 eager fused batch 2" in res.output and "run it: accelbench train" in res.output
    run = max(Store(db).runs(), key=lambda r: r["run_id"])
    rows = Store(db).cases(run["run_id"])
    assert run["kind"] == "tune" and set(rows["tune_stage"]) == {"screen", "final0"}
    key = "cifar-resnet20|bs=2|fp32|eager|cl=auto|adamw"
    # the space (fused) and, in the final, the default configuration (the device's optimizer kernels: foreach)
    assert list(rows["case_key"]) == [f"{key}|fused|trial=screen", f"{key}|fused|trial=final0", f"{key}|trial=final0"]
    assert list(rows["optimizer_fused"]) == [1, 1, 0] and rows["step_time_p50_ms"].notna().all()
    html = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", "--db", db, "--run", str(run["run_id"]), "--html", str(html)])
    assert res.exit_code == 0, res.output
    assert "<td>eager fused" in html.read_text() and "Pareto front" in html.read_text()  # step time as latency
    doc = tomllib.loads(toml.read_text())
    assert (doc["optimizer"], doc["fused_optimizer"], doc["batch_sizes"], doc["modes"]) == (
        "adamw",
        True,
        [2],
        ["eager"],
    )
    res = CliRunner().invoke(app, ["train", "-c", str(toml), *tiny])
    assert res.exit_code == 0, res.output
    trained = Store(db).cases(max(r["run_id"] for r in Store(db).runs()))
    assert list(trained["case_key"]) == ["cifar-resnet20|bs=2|fp32|eager|cl=auto|adamw|fused"]
    assert list(trained["status"]) == ["ok"] and trained["optimizer_fused"].all()
