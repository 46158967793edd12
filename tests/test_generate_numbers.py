"""``accelbench generate``'s numbers agree on one line, its default repeats let ``compare`` decide, and the small faults a
new user met are one clear line each.

Two tiny real runs on the CPU (the bundled trained model and a copy of it without a tokenizer, batch 1, prompt 16, 4 new
tokens, the default repeats) give the rows whose columns are checked against each other, the compact table as printed,
the notes before measuring, and a ``compare`` of the two; the refusals are decided before anything is built.
"""

import re
import shutil

import pytest
from conftest import run_cli

pytest.importorskip("transformers")

from accelbench.core.ci import min_attainable_p  # noqa: E402
from accelbench.core.compare import ALPHA, UNDECIDED, compare_runs  # noqa: E402
from accelbench.models.hf import BUNDLED  # noqa: E402
from accelbench.scenarios.generate import REPEATS  # noqa: E402
from accelbench.store import Store  # noqa: E402

BATCH, PROMPT, NEW = 1, 16, 4
CASE = ["-b", str(BATCH), "--prompt-lens", str(PROMPT), "--new-tokens", str(NEW), "--modes", "static-cache"]
CPU = ["--idle-s", "0", "--device", "cpu"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two runs of the same cases with the default repeats: A measures perplexity (with a window past the model's
    context) and prints the notes, B does not (the cases match all the same)."""
    folder = tmp_path_factory.mktemp("numbers")
    bare = folder / "no-tokenizer"
    bare.mkdir()
    for f in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(BUNDLED / "tiny-shakespeare" / f, bare / f)
    db = folder / "g.db"
    models = ["-m", f"hf:tiny-shakespeare,hf:{bare}"]
    a = run_cli(
        "generate", *models, *CASE, *CPU, "--perplexity-window", "100000", "--db", str(db), env={"COLUMNS": "80"}
    )
    assert a.returncode == 0, a.stderr[-3000:]
    b = run_cli("generate", *models, *CASE, *CPU, "--no-perplexity", "--db", str(db))
    assert b.returncode == 0, b.stderr[-3000:]
    return db, a, str(bare)


def _rows(db, run_id):
    return [r for r in Store(db).records(run_id) if not r.get("row_type")]


def test_every_rate_agrees_with_the_mean_latency_beside_it(runs):
    """Decode tokens/s is the decode phase's tokens over its time (batch / mean TPOT), prefill tokens/s the prompt's over
    the mean TTFT, output tokens/s every token over the whole generation (mean end-to-end); MBU and MFU at the same
    means. Output tokens/s is at most decode tokens/s whenever a prefill takes a decode step."""
    db, _, _ = runs
    rows = _rows(db, 1)
    assert len(rows) == 2 and {r["status"] for r in rows} == {"ok"}
    for r in rows:
        assert r["generations_timed"] == REPEATS
        assert r["decode_tokens_per_s"] == pytest.approx(BATCH * 1000 / r["tpot_mean_ms"], rel=1e-9)
        assert r["prefill_tokens_per_s"] == pytest.approx(BATCH * PROMPT * 1000 / r["ttft_mean_ms"], rel=1e-9)
        assert r["output_tokens_per_s"] == pytest.approx(BATCH * NEW * 1000 / r["e2e_latency_mean_ms"], rel=1e-9)
        assert r["throughput_samples_per_s"] == r["output_tokens_per_s"]  # a sample of a generate row: an output token
        assert r["decode_bytes_per_s"] == pytest.approx(r["decode_step_bytes"] / (r["tpot_mean_ms"] / 1e3), rel=1e-9)
        assert r["prefill_flops_per_s"] == pytest.approx(r["prefill_flops"] / (r["ttft_mean_ms"] / 1e3), rel=1e-9)
        # a generation's wall time holds its prefill and every decode step
        assert r["e2e_latency_mean_ms"] >= r["ttft_mean_ms"] + (NEW - 1) * r["tpot_mean_ms"] - 1e-6
        if r["ttft_mean_ms"] >= r["tpot_mean_ms"]:
            assert r["output_tokens_per_s"] <= r["decode_tokens_per_s"]


def test_output_tokens_per_s_never_exceeds_decode_tokens_per_s_with_slow_steps():
    """The issue's shape of numbers (a few slow decode steps pull the mean TPOT above its median): with every rate a
    mean, output tokens/s stays below decode tokens/s, and tok/s is batch over the mean TPOT shown beside it."""
    from accelbench.backends.lm_timing import Generation
    from accelbench.core.lm_analytic import Shape
    from accelbench.scenarios.generate.measure import Ceilings, generation_columns

    shape = Shape(
        layers=2,
        heads=4,
        kv_heads=4,
        head_dim=8,
        hidden=32,
        vocab=16,
        params=2000,
        embedding_params=512,
        tied_head=False,
        matmul_params=1000,
        lm_head_params=500,
        weight_bytes=6000,
    )
    itl = (0.02,) * 28 + (0.2,) * 3  # median 20 ms, mean 37.4 ms
    gens = [Generation(ttft_s=0.05, itl_s=itl, e2e_s=0.05 + sum(itl), tokens=None) for _ in range(REPEATS)]
    rec, _ = generation_columns(gens, shape, batch_size=8, prompt_len=64, new_tokens=32, ceilings=Ceilings())
    assert rec["tpot_p50_ms"] == pytest.approx(20.0) and rec["tpot_mean_ms"] == pytest.approx(1000 * sum(itl) / 31)
    assert rec["decode_tokens_per_s"] == pytest.approx(8 * 1000 / rec["tpot_mean_ms"])
    assert rec["output_tokens_per_s"] == pytest.approx(8 * 32 / (0.05 + sum(itl)))
    assert rec["output_tokens_per_s"] < rec["decode_tokens_per_s"]


def test_the_compact_table_says_its_statistic_and_its_cells_agree(runs):
    _, a, _ = runs
    lines = a.stdout.splitlines()
    assert any(re.search(r"TTFT ms +TPOT ms +tok/s", ln) for ln in lines), a.stdout
    assert any(ln.startswith("TTFT, TPOT: means of the timed generations (tok/s = batch / TPOT)") for ln in lines)
    assert max(len(ln) for ln in lines) <= 80
    cells = [ln.split() for ln in lines if re.match(r" *1 +16 +fp32 +static-cache ", ln)]  # a table a model
    assert len(cells) == 2
    for c in cells:  # Batch Prompt Precision Mode TTFT TPOT tok/s MBU Status: printed to 3 significant digits
        batch, tpot, toks = float(c[0]), float(c[5].replace(",", "")), float(c[6].replace(",", ""))
        # each printed value is within half a unit of its last digit of the stored one: allow both roundings
        expected = batch * 1000 / tpot
        slack = _half_unit(c[6]) + expected * _half_unit(c[5]) / tpot
        assert abs(toks - expected) <= slack * 1.0001, (c, expected, slack)


def _half_unit(printed: str) -> float:
    """Half a unit of the last printed digit of a table cell (``"4.2"`` -> 0.05, ``"1,234"`` -> 0.5)."""
    text = printed.replace(",", "")
    return 0.5 * 10 ** -(len(text.split(".")[1]) if "." in text else 0)


def test_two_default_runs_compared_decide(runs):
    """With the default repeats every matched case's throughput, TPOT p50 and TTFT p50 get a verdict (within noise,
    faster or slower), never "too few windows"; 3 repeats could not reach p < 0.05 at all."""
    db, _, _ = runs
    from accelbench.core.rundata import load_run

    store = Store(db)
    cmp = compare_runs(load_run(store, 1), load_run(store, 2))
    assert len(cmp.cases) == 2
    verdicts = [c.metrics[m].verdict for c in cmp.cases for m in ("throughput", "latency_p50", "ttft_p50")]
    assert not [v for v in verdicts if v in UNDECIDED], verdicts
    assert min_attainable_p(REPEATS, REPEATS) < ALPHA <= min_attainable_p(3, 3)


def test_perplexity_that_will_not_be_as_asked_is_a_note_before_measuring(runs):
    db, a, bare = runs
    notes = [ln for ln in a.stderr.splitlines() if ln.startswith("note:")]
    assert any(
        "perplexity_window 100000" in n and "hf:tiny-shakespeare's maximum context of 512 tokens" in n for n in notes
    ), a.stderr
    assert any(f"hf:{bare} has no tokenizer" in n and "no perplexity" in n for n in notes), a.stderr
    by_model = {r["model"]: r for r in _rows(db, 1)}
    assert by_model["hf:tiny-shakespeare"]["perplexity_window"] == 512 and by_model["hf:tiny-shakespeare"]["perplexity"]
    assert by_model[f"hf:{bare}"].get("perplexity") is None
    assert "no tokenizer" in by_model[f"hf:{bare}"]["quality_note"]


def test_language_model_rows_and_specs_claim_no_image_data(runs, tmp_path):
    db, _, _ = runs
    store = Store(db)
    assert store.run(1)["spec"]["data"] is None
    rows = _rows(db, 1)
    assert rows
    assert all(r.get("data") is None and r.get("images") is None for r in rows)
    # a profiled prefill of a language model: what it ran on is random token ids, not the spec's image data
    from accelbench import api
    from accelbench.scenarios import get
    from accelbench.scenarios.profile.lm import build

    spec = api.spec("profile", {"models": "hf:tiny-shakespeare", "steps": "prefill", "prompt_lens": 8, "device": "cpu"})
    (case,) = get("profile").cases(spec, "cpu")
    import torch

    cols = build(case, spec, torch.device("cpu")).columns
    assert (cols["data"], cols["images"], cols["prompt_source"]) == (None, None, "random")


def _one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, (p.returncode, p.stderr)
    return lines[0]


def test_an_empty_model_name_is_one_line(tmp_path):
    db = tmp_path / "x.db"
    line = _one_line_error(run_cli("generate", "-m", "", *CPU, "--db", str(db)))
    assert line == "error: invalid model '': allowed a non-empty model name, e.g. -m hf:tiny-shakespeare"
    assert not db.exists()


def test_too_many_new_tokens_names_new_tokens_and_the_context(tmp_path):
    p = run_cli(
        "generate", "-m", "hf:tiny-shakespeare", "--new-tokens", "1000000000", *CPU, "--db", str(tmp_path / "x")
    )
    line = _one_line_error(p)
    assert line.startswith("error: invalid new_tokens 1000000000: allowed at most 448 after a 64-token prompt")
    assert "hf:tiny-shakespeare's maximum context is 512 tokens" in line and "prompt_lens" not in line


def test_a_misspelt_toml_table_suggests_the_command_s(tmp_path):
    config = tmp_path / "g.toml"
    config.write_text("[generat]\nbatch_sizes = [1]\n")
    line = _one_line_error(run_cli("generate", "--config", str(config), *CPU, "--db", str(tmp_path / "x")))
    assert re.search(r"invalid config table '\[generat\]'.*\(did you mean '\[generate\]'\?\)$", line), line
