"""accelbench compare: verdict rules, matching, a synthetic slower store through the Store API, the CLI contract,
and two real tiny CPU runs with --repeats 5."""

import json

import numpy as np
import pytest
from conftest import run_cli

from accelbench.core import compare as cmp
from accelbench.core.rundata import load_run, parse_ref
from accelbench.core.stats import summarize
from accelbench.store import Store

THR, LAT, P50, E = (cmp.METRICS[i] for i in (0, 1, 1, 3))


def test_verdict_rules():
    fine = 2 / 252  # 5 vs 5 windows
    assert cmp.verdict(0.80, 0.008, fine, THR) == "slower"
    assert cmp.verdict(1.25, 0.008, fine, THR) == "faster"
    assert cmp.verdict(1.25, 0.008, fine, P50) == "slower"  # latency: higher is worse
    assert cmp.verdict(0.80, 0.008, fine, E) == "better"
    assert cmp.verdict(0.99, 0.008, fine, THR) == "within noise"  # significant, but inside the 2 % margin
    assert cmp.verdict(0.97, 0.008, fine, THR, margin=0.05) == "within noise"
    assert cmp.verdict(0.80, 0.20, fine, THR) == "within noise"  # not significant
    assert cmp.verdict(0.50, None, 0.1, THR) == "too few windows"  # 3 vs 3: the test cannot reach 0.05
    assert cmp.verdict(0.50, 0.029, 2 / 70, THR) == "slower"  # 4 vs 4, perfectly separated


def add_run(
    store, *, speed=1.0, windows=5, validity="ok", precision="fp32", env=None, model="cifar-resnet20", extra=None
):
    """A synthetic inference run written through the Store API: one case, ``windows`` windows of 20 batches of 8
    images; latencies 10 ms / speed with a small deterministic wobble per batch and per window."""
    run = store.begin_run(
        "inference", {"scenario": "inference"}, "h", env or {"device_name": "Test CPU", "torch": "2.5"}
    )
    lat = [[(10.0 + 0.05 * ((3 * b) % 7) + 0.02 * w) / speed for b in range(20)] for w in range(windows)]
    walls = [sum(x) / 1e3 for x in lat]
    flat = [v for x in lat for v in x]
    thr = 8 * len(flat) / sum(walls)
    st = summarize(flat)
    rec = {
        "case_key": f"{model}|bs=8|{precision}|eager|cl=auto",
        "workload": "inference",
        "status": "ok",
        "model": model,
        "batch_size": 8,
        "precision": precision,
        "mode": "eager",
        "channels_last": False,
        "image_size": 32,
        "throughput_samples_per_s": thr,
        "latency_p50_ms": st.latency_p50_ms,
        "latency_p99_ms": st.latency_p99_ms,
        "timed_wall_s": sum(walls),
        "samples_timed": 8 * len(flat),
        "validity": validity,
        "validity_reason": None if validity == "ok" else "other processes used 60% of the host's CPU time > 10%",
        "energy_per_sample_j": 50.0 / thr,
        "price_per_hour_usd": 3.6,
        "cost_per_1000_samples_usd": 1.0 / thr,
        "power_mean_w": 50.0,
    }
    rec.update(extra or {})
    if windows >= 2:
        rec.update(windows=windows, window_batches=20)
    series = {
        "latency_ms": flat,
        **({"window_wall_s": walls, "window_samples": [160.0] * windows} if windows >= 2 else {}),
    }
    store.add_case(run, rec, series)
    store.finish_run(run, "complete")
    return run


def test_a_slower_b_is_slower_with_intervals(tmp_path):
    s = Store(tmp_path / "s.db")
    a, b = add_run(s), add_run(s, speed=0.8, env={"device_name": "Test CPU", "torch": "2.6"})
    c = cmp.compare_runs(load_run(s, a), load_run(s, b))
    assert c.env_diff == [("torch", "2.5", "2.6")] and not c.only_a and not c.only_b
    (case,) = c.cases
    thr, p50, energy, cost = (
        case.metrics[n] for n in ("throughput", "latency_p50", "energy_per_sample", "cost_per_1000")
    )
    assert thr.ratio == pytest.approx(0.8) and thr.ci_high < 1 and thr.p_value == pytest.approx(2 / 252)
    assert (thr.verdict, p50.verdict, energy.verdict, cost.verdict) == ("slower", "slower", "worse", "worse")
    assert (
        p50.ratio == pytest.approx(1.25) and energy.ratio == pytest.approx(1.25) and cost.ratio == pytest.approx(1.25)
    )
    assert energy.ci_low <= 1.25 <= energy.ci_high
    # 3600 s x throughput / 3.6 USD per hour; 1 / (50 W / throughput) J per sample; throughput / 50 W
    assert case.normalised["a"]["samples_per_usd"] == pytest.approx(1000 * thr.a)
    assert (
        case.normalised["b"]["samples_per_j"] == pytest.approx(thr.b / 50) == case.normalised["b"]["throughput_per_w"]
    )
    assert [n for _, n in c.slower()] == ["throughput", "latency_p50"] and not case.ambiguous


def test_a_verdict_between_autotuned_runs_says_the_kernels_may_differ(tmp_path):
    s = Store(tmp_path / "s.db")
    tuned = {"compile_mode": "max-autotune"}
    a, b = add_run(s, extra=tuned), add_run(s, speed=0.9, extra=tuned)
    (case,) = cmp.compare_runs(load_run(s, a), load_run(s, b)).cases
    assert case.metrics["throughput"].verdict == "slower" and any("max-autotune" in n for n in case.notes)
    (plain,) = cmp.compare_runs(load_run(s, add_run(s)), load_run(s, add_run(s, speed=0.9))).cases
    assert plain.metrics["throughput"].verdict == "slower" and not any("max-autotune" in n for n in plain.notes)


def test_a_pair_whose_quantized_matmuls_ran_different_kernels_says_so(tmp_path):
    s = Store(tmp_path / "s.db")
    bits = {"quant_kernels": "Triton 8-bit GEMV (int8 converted by bits at 5 of 5 shapes)"}
    same = cmp.compare_runs(load_run(s, add_run(s, extra=bits)), load_run(s, add_run(s, extra=bits))).cases
    assert len(same) == 1 and not same[0].notes
    other = {"quant_kernels": "Triton 8-bit GEMV (int8 converted by bits at 4 of 5 shapes)"}
    (case,) = cmp.compare_runs(load_run(s, add_run(s, extra=bits)), load_run(s, add_run(s, extra=other))).cases
    assert case.notes == [
        f"the quantized matmuls ran different kernels: A {bits['quant_kernels']}; B {other['quant_kernels']}"
    ]


def test_same_speed_is_within_noise_and_flags_make_it_ambiguous(tmp_path):
    s = Store(tmp_path / "s.db")
    a, b = add_run(s), add_run(s, speed=1.005, validity="cpu-contention")
    (case,) = cmp.compare_runs(load_run(s, a), load_run(s, b)).cases
    assert case.metrics["throughput"].verdict == "within noise" and case.metrics["throughput"].ci_low < 1.0051
    assert case.ambiguous == ["B: other processes used 60% of the host's CPU time > 10%"]


def test_too_few_windows_and_one_window(tmp_path):
    s = Store(tmp_path / "s.db")
    a, b = add_run(s, windows=3), add_run(s, windows=3, speed=0.5)
    thr = cmp.compare_runs(load_run(s, a), load_run(s, b)).cases[0].metrics["throughput"]
    assert (
        thr.verdict == "too few windows"
        and thr.p_value is None
        and "smallest attainable Mann-Whitney p is 0.1" in thr.note
    )
    assert thr.ratio == pytest.approx(0.5) and thr.ci_high < 1  # the interval is still given
    a1, b1 = add_run(s, windows=1), add_run(s, windows=1)
    thr1 = cmp.compare_runs(load_run(s, a1), load_run(s, b1)).cases[0].metrics["throughput"]
    assert thr1.verdict == "too few windows" and thr1.note.startswith(
        "one window on a side: the interval resamples its batches"
    )


def test_matching_and_ignore(tmp_path):
    s = Store(tmp_path / "s.db")
    a, b = load_run(s, add_run(s)), load_run(s, add_run(s, precision="amp-bf16"))
    c = cmp.compare_runs(a, b)
    assert (
        not c.cases
        and c.only_a == ["cifar-resnet20 bs=8 fp32 eager"]
        and c.only_b == ["cifar-resnet20 bs=8 amp-bf16 eager"]
    )
    assert len(cmp.compare_runs(a, b, ignore=("precision",)).cases) == 1


def test_refs():
    assert parse_ref("12") == (None, 12) and parse_ref("/x/a:b.db:3") == ("/x/a:b.db", 3)
    with pytest.raises(ValueError):
        parse_ref("a.db")


def test_cli_fail_on_slower_exit_codes(tmp_path):
    db, other = tmp_path / "s.db", tmp_path / "o.db"
    s = Store(db)
    a, slow, fast = add_run(s), add_run(s, speed=0.8), add_run(s, speed=1.25)
    add_run(Store(other), speed=0.8)
    p = run_cli("compare", str(a), str(slow), "--db", str(db), "--fail-on-slower")
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert (
        p.returncode == 1
        and len(lines) == 1
        and lines[0].startswith("slower: run 2 is slower than run 1 beyond the 2% margin")
    )
    assert "slower" in p.stdout and "0.800x" in p.stdout
    p = run_cli(
        "compare",
        str(a),
        str(fast),
        "--db",
        str(db),
        "--fail-on-slower",
        "--json",
        str(tmp_path / "c.json"),
        check=True,
    )
    assert "faster" in p.stdout
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc[0]["cases"][0]["metrics"]["throughput"]["verdict"] == "faster"
    p = run_cli("compare", f"{db}:{a}", f"{other}:1", "--fail-on-slower")  # runs in two stores
    assert p.returncode == 1 and f"{other}:1 is slower than {db}:{a}" in p.stderr
    assert (
        run_cli(
            "compare", str(a), str(slow), "--db", str(db), "--margin", "30%", "--fail-on-slower", check=True
        ).returncode
        == 0
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (["1", "9"], "error: no run 9 in"),
        (["1", "2", "--margin", "x"], "error: invalid margin 'x'"),
        (["1", "2", "--ignore", "colour"], "error: invalid --ignore 'colour'"),
        (["1", "nope.db:1"], "error: no results store at nope.db"),
    ],
)
def test_cli_bad_input_is_one_line_exit_2(tmp_path, args, needle):
    db = tmp_path / "s.db"
    s = Store(db)
    add_run(s), add_run(s)
    p = run_cli("compare", *args, "--db", str(db), cwd=tmp_path)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith(needle), p.stderr


def test_two_real_cpu_runs_with_five_windows(tmp_path, one_thread):
    from accelbench import api

    db = tmp_path / "r.db"
    flags = {
        "model": "cifar-resnet20",
        "batch_sizes": "4",
        "images": 8,
        "device": "cpu",
        "idle_s": 0,
        "repeats": 5,
        "telemetry_period_ms": 0,
    }
    runs = [api.run(api.spec("inference", flags, cuda=False), Store(db)).run_id for _ in range(2)]
    rec = Store(db).cases(runs[0]).to_dict("records")[0]
    # 3 steps (min 3 timed) cycling through a pass of 2 batches, 5 times
    assert (
        rec["windows"] == 5 and rec["window_batches"] == 3 and rec["pass_batches"] == 2 and rec["samples_timed"] == 60
    )
    assert (
        rec["throughput_ci95_low_samples_per_s"]
        <= rec["throughput_samples_per_s"]
        <= rec["throughput_ci95_high_samples_per_s"]
    )
    assert len(Store(db).series(rec["case_id"], "window_wall_s")) == 5
    p = run_cli("compare", str(runs[0]), str(runs[1]), "--db", str(db), "--json", str(tmp_path / "c.json"), check=True)
    thr = json.loads((tmp_path / "c.json").read_text())[0]["cases"][0]["metrics"]["throughput"]
    assert thr["verdict"] in ("within noise", "faster", "slower") and thr["p_value"] is not None
    assert thr["ci_low"] <= thr["ratio"] <= thr["ci_high"] and p.returncode == 0
    assert np.isfinite(thr["ratio"])


def test_the_gate_never_passes_what_it_cannot_judge(tmp_path):
    """`--fail-on-slower` exited 0 at 0.5x throughput with too few windows, and when nothing matched.

    End to end: the first comparison in a real process (exit 3, undecided, one line); the rest in this one."""
    db = tmp_path / "s.db"
    s = Store(db)
    a3, slow3 = add_run(s, windows=3), add_run(s, windows=3, speed=0.5)  # 0.5x, but 3 vs 3 windows: undecidable
    a5, flagged = add_run(s), add_run(s, speed=1.0, validity="cpu-contention")  # within noise, but a flag fired
    other = add_run(s, precision="amp-bf16")  # matches nothing of run a5
    p = run_cli("compare", str(a3), str(slow3), "--db", str(db), "--fail-on-slower", subprocess=True)
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert p.returncode == 3 and len(lines) == 1 and lines[0].startswith("undecided: 1 matched case(s)")
    assert "throughput too few windows" in lines[0] and "--allow-undecided" in lines[0]
    assert (
        run_cli(
            "compare", str(a3), str(slow3), "--db", str(db), "--fail-on-slower", "--allow-undecided", check=True
        ).returncode
        == 0
    )
    p = run_cli("compare", str(a5), str(flagged), "--db", str(db), "--fail-on-slower")
    assert p.returncode == 3 and "flagged (B: other processes used 60%" in p.stderr
    p = run_cli("compare", str(a5), str(other), "--db", str(db), "--fail-on-slower")
    assert p.returncode == 2 and "no case matched" in p.stderr and len(p.stderr.strip().splitlines()) <= 2
    assert run_cli("compare", str(a5), str(other), "--db", str(db)).returncode == 0  # without the gate: a report
    md = tmp_path / "summary.md"
    p = run_cli("compare", str(a3), str(slow3), "--db", str(db), "--fail-on-slower", "--markdown", str(md))
    text = md.read_text()
    assert p.returncode == 3 and text.startswith("**Gate: UNDECIDED, 1 case(s) could not be judged**")
    assert "| Case | Windows | Metric | B/A | 95% CI | Verdict |" in text and "too few windows" in text


def test_serve_levels_and_training_sequence_lengths_are_cases_of_their_own():
    """A serve level (concurrency, request rate) and a language model's sequence length tell cases apart: two levels
    of one run are two cases, each named by what distinguishes it."""
    level = {"workload": "serve", "model": "m", "concurrency": 1}
    keys = {cmp.match_key({**level, "concurrency": c}) for c in (1, 8)}
    keys |= {cmp.match_key({**level, "concurrency": None, "request_rate_per_s": 2.5, "arrival": "poisson"})}
    assert len(keys) == 3
    assert {cmp.case_label(k) for k in keys} == {
        "m concurrency=1 serve",
        "m concurrency=8 serve",
        "m rate=2.5/s poisson serve",
    }
    lm = {"workload": "train-lm", "model": "hf:x", "batch_size": 4, "seq_len": 512, "activation_checkpointing": "full"}
    assert cmp.match_key(lm) != cmp.match_key({**lm, "seq_len": 2048})
    assert cmp.case_label(cmp.match_key(lm)) == "hf:x bs=4 seq=512 checkpointing=full train-lm"
