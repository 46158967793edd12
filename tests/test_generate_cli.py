"""``accelbench generate`` end to end on the CPU, as a user runs it: the bundled trained model (hf:tiny-shakespeare),
two backends, two batch sizes; the stored row checked against the formulas of its own columns, perplexity against
uniform guessing, the compact table at 80 columns, the HTML report's section; bad input as one line."""

import json

import pytest
from conftest import run_cli

pytest.importorskip("transformers")

from accelbench.models.hf import BUNDLED  # noqa: E402
from accelbench.store import Store  # noqa: E402

ARGS = [
    "generate",
    "-m",
    "hf:tiny-shakespeare",
    "-b",
    "1,2",
    "--prompt-lens",
    "32",
    "--new-tokens",
    "8",
    "--modes",
    "hf-generate,static-cache",
    "--repeats",
    "5",
    "--idle-s",
    "0",
    "--device",
    "cpu",
]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gen")
    db = folder / "g.db"
    p = run_cli(*ARGS, "--db", str(db), env={"COLUMNS": "80"}, check=True)
    return db, p


def test_every_case_stores_its_phases_and_they_agree_with_their_formulas(generated):
    db, _ = generated
    rows = [r for r in Store(db).records() if not r.get("row_type")]
    assert len(rows) == 4 and {r["status"] for r in rows} == {"ok"}
    config = json.loads((BUNDLED / "tiny-shakespeare" / "config.json").read_text())
    head_dim = config["hidden_size"] // config["num_attention_heads"]
    for r in rows:
        assert 0 < r["ttft_p50_ms"] <= r["ttft_p99_ms"] and 0 < r["tpot_p50_ms"] <= r["tpot_p99_ms"]
        assert r["prompt_len"] == 32 and r["new_tokens"] == 8 and r["generations_timed"] == 5
        assert r["output_tokens_timed"] == 5 * r["batch_size"] * 8
        # decode tokens/s is the batch over the mean time per output token
        assert r["decode_tokens_per_s"] == pytest.approx(r["batch_size"] / (r["tpot_mean_ms"] / 1e3), rel=1e-9)
        # the KV cache: keys and values of every layer for batch x (prompt + new) tokens in fp32 (4 bytes)
        kv = 2 * config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * 4
        assert r["kv_bytes_per_token"] == kv and r["kv_cache_bytes"] == kv * r["batch_size"] * (32 + 8)
        assert r["decode_bytes_per_s"] == pytest.approx(r["decode_step_bytes"] / (r["tpot_mean_ms"] / 1e3), rel=1e-9)
        assert 0 < r["mbu"] < 1.5
        # a trained model beats guessing uniformly over its vocabulary by far
        assert 1 < r["perplexity"] < config["vocab_size"] / 4 and r["perplexity_tokens"] > 1000
        assert r["weights"] and r["pretrained"] is True
        # telemetry (energy, power) covers the timed generations, not the warm-up before them
        assert r["timed_wall_s"] <= r["telemetry_window_s"] < 1.1 * r["timed_wall_s"] + 0.05


def test_the_compact_table_fits_80_columns_and_the_report_has_the_generate_section(generated, tmp_path):
    db, p = generated
    table = [ln for ln in p.stdout.splitlines() if "static-cache" in ln or "hf-generate" in ln]
    assert len(table) >= 4 and max(len(ln) for ln in p.stdout.splitlines()) <= 80
    html = tmp_path / "r.html"
    run_cli("report", "--db", str(db), "--html", str(html), check=True)
    text = html.read_text()
    assert "<h3>Generation: prefill and decode</h3>" in text
    assert text.count("<svg") >= 4  # decode tokens/s, TPOT, TTFT, MBU, MFU against batch size
    assert 'alt="Roofline"' in text  # prefill and decode placed under the roofs measured on this CPU


def test_a_wrong_model_is_one_line_and_leaves_no_store(tmp_path):
    db = tmp_path / "x.db"
    p = run_cli("generate", "-m", "hf:llama-9", "--db", str(db), "--device", "cpu")
    assert p.returncode == 2 and "hf:llama-9" in p.stderr and len(p.stderr.strip().splitlines()) <= 2
    assert not db.exists()
    p = run_cli("generate", "-m", "hf:tiny-shakespeare", "-p", "int8", "--db", str(db), "--device", "cpu")
    assert p.returncode == 2 and "int8-weight-only" in p.stderr and not db.exists()


def test_compare_gives_decode_and_prefill_ratios_with_intervals(generated):
    """A run against itself: every generate case matched (prompt and new tokens in the key), decode tokens/s and
    time to first token each a ratio of exactly 1 inside its bootstrap interval over the 5 generations."""
    from accelbench.core.compare import compare_runs
    from accelbench.core.rundata import load_run

    db, _ = generated
    run = load_run(Store(db), 1)
    assert len(run.cases) == 4 and all(m.windows.n == 5 and len(m.ttft_ms) == 5 for m in run.cases)
    for m in run.cases:  # a window's throughput is its decode tokens/s: the row's figure is their pooled value
        assert m.windows.throughput() == pytest.approx(m.record["decode_tokens_per_s"], rel=1e-9)
    cmp = compare_runs(run, run)
    assert len(cmp.cases) == 4 and not cmp.only_a
    for c in cmp.cases:
        for name in ("throughput", "ttft_p50", "latency_p50"):
            r = c.metrics[name]
            assert r.ratio == 1.0 and r.ci_low <= 1.0 <= r.ci_high and r.p_value is not None
    p = run_cli("compare", "1", "1", "--db", str(db), check=True)
    assert "Decode tok/s" in p.stdout and "TTFT p50" in p.stdout


def test_generate_help_offers_the_generation_backends_and_precisions_only():
    text = run_cli("generate", "--help", env={"COLUMNS": "1000"}, check=True).stdout
    for name in (
        "hf-generate",
        "static-cache",
        "static-compile",
        "static-compile-fused",
        "int8-weight-only",
        "fp8-weight-only",
        "bf16",
        "--prompt-lens",
        "--new-tokens",
    ):
        assert name in text, name
    assert "compile-freeze" not in text and "amp-bf16" not in text and "onnxruntime" not in text


def test_weight_only_int8_keeps_the_trained_models_perplexity_and_the_quality_line_says_so(tmp_path):
    """The bundled model has real weights: int8 weight-only (one scale a row) stays within 1 % of fp32's held-out
    perplexity, and the run prints the cheapest precision meeting that target."""
    db = tmp_path / "q.db"
    p = run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "-b",
        "1",
        "--prompt-lens",
        "16",
        "--new-tokens",
        "4",
        "-p",
        "fp32,int8-weight-only",
        "--modes",
        "static-cache",
        "--repeats",
        "1",
        "--idle-s",
        "0",
        "--device",
        "cpu",
        "--db",
        str(db),
        env={"COLUMNS": "200"},
        check=True,
    )
    ppl = {r["precision"]: r["perplexity"] for r in Store(db).records()}
    assert set(ppl) == {"fp32", "int8-weight-only"} and ppl["fp32"] > 1
    assert abs(ppl["int8-weight-only"] / ppl["fp32"] - 1) < 0.01
    assert "cheapest precision meeting the target (perplexity at most 1 % above fp32's" in p.stdout


def test_an_oom_on_a_reused_model_is_tried_once_fresh_and_only_a_fresh_oom_is_the_boundary(tmp_path):
    """Batch 3 runs out of memory only on the model built for batch 1 (memory held for earlier cases): it is tried
    again on a fresh build and runs (``oom_retried``); batch 5 runs out of memory fresh too: the boundary."""
    db = tmp_path / "g.db"
    run_cli(
        "generate",
        "-m",
        "helpers:held_memory_lm",
        "-b",
        "1,3,5",
        "--prompt-lens",
        "8",
        "--new-tokens",
        "4",
        "--modes",
        "static-cache",
        "--repeats",
        "1",
        "--idle-s",
        "0",
        "--device",
        "cpu",
        "--db",
        str(db),
    )
    rows = {r["batch_size"]: r for r in Store(db).records() if not r.get("row_type")}
    assert sorted(rows) == [1, 3, 5]
    assert rows[1]["status"] == "ok" and not rows[1].get("oom_retried")
    assert rows[3]["status"] == "ok" and rows[3]["oom_retried"] is True
    assert rows[5]["status"] == "oom" and "batch 5" in rows[5]["error"]


def test_fp8_off_a_gpu_is_an_unsupported_row_with_its_reason(tmp_path):
    """fp8 (W8A8 through torch._scaled_mm) needs FP8 tensor cores: on a CPU the case is an ``unsupported`` row that
    says so (a result, exit 0), before any model is built."""
    db = tmp_path / "f.db"
    p = run_cli(
        "generate",
        "-m",
        "hf:tiny-shakespeare",
        "-b",
        "1",
        "--prompt-lens",
        "16",
        "--new-tokens",
        "4",
        "-p",
        "fp8",
        "--modes",
        "static-cache",
        "--repeats",
        "1",
        "--idle-s",
        "0",
        "--device",
        "cpu",
        "--db",
        str(db),
    )
    assert p.returncode == 0, p.stdout + p.stderr
    rows = [r for r in Store(db).records() if not r.get("row_type")]
    assert len(rows) == 1 and rows[0]["status"] == "unsupported" and rows[0]["precision"] == "fp8"
    assert "compute capability 8.9" in rows[0]["error"]
