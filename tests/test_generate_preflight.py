"""``accelbench generate`` refuses, before building anything, a model that cannot fit the device and a damaged
checkpoint folder: exit 2, one line on stderr naming what is wrong, no store created. The folders are the bundled
tiny checkpoint copied and damaged; every command runs in this process (no model is built: ``load_lm`` fails the
test if called). The memory estimate is checked with exact numbers."""

import json
import shutil

import pytest
from conftest import run_cli

pytest.importorskip("transformers")

from accelbench.models import hf  # noqa: E402
from accelbench.models.lm_layout import layout  # noqa: E402
from accelbench.scenarios.generate import preflight  # noqa: E402
from accelbench.store import Store  # noqa: E402

SHAPE = ["--device", "cpu", "-b", "1", "--prompt-lens", "8", "--new-tokens", "2", "--modes", "static-cache"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # hf:./ckpt names the copy


@pytest.fixture
def no_build(monkeypatch):
    """Any model build fails the test: a refusal happens before one."""

    def built(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(hf, "load_hf", built)


@pytest.fixture
def ckpt(tmp_path):
    folder = tmp_path / "ckpt"
    shutil.copytree(hf.BUNDLED / "tiny-shakespeare", folder)
    return folder


def edit_json(path, **values):
    path.write_text(json.dumps({**json.loads(path.read_text()), **values}))


def refused(tmp_path, model: str, *words: str, args=SHAPE) -> str:
    """Run generate on ``model``: exit 2, exactly one stderr line holding ``words``, no ANSI codes, no store."""
    db = tmp_path / "g.db"
    p = run_cli("generate", "-m", model, *args, "--idle-s", "0", "--db", str(db))
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), p.stderr
    assert "\x1b" not in p.stderr and "Traceback" not in p.stderr
    assert words
    for w in words:
        assert w in lines[0], lines[0]
    assert not db.exists()
    return lines[0]


def test_the_8b_shape_in_fp32_is_refused_on_a_24_gb_cpu_before_anything_is_built(tmp_path, monkeypatch, no_build):
    """The Llama-3.1-8B shape at batch 1 in fp32: 8,030,261,248 parameters x 4 bytes = 32.1 GB of weights alone."""
    monkeypatch.setattr(preflight, "available_bytes", lambda device: 24 * 10**9)
    line = refused(
        tmp_path,
        "hf:llama-3.1-8b",
        "needs about 35.6 GB",
        "weights 32.1 GB",
        "24.0 GB of RAM available",
        "--precisions fp16 or bf16",
        args=["--device", "cpu", "-b", "1", "--new-tokens", "4", "--prompt-lens", "16", "--modes", "static-cache"],
    )
    assert "in fp32 at batch size 1, prompt 16 + 4 new tokens" in line


def test_invalid_config_json_names_the_file_and_position(tmp_path, ckpt, no_build):
    (ckpt / "config.json").write_text('{"model_type": "llama",\n  "hidden_size": }')
    refused(tmp_path, f"hf:{ckpt}", "config.json is not valid JSON", "line 2 column 18")


def test_an_unknown_model_type_is_named(tmp_path, ckpt, no_build):
    edit_json(ckpt / "config.json", model_type="llamaish")
    refused(tmp_path, f"hf:{ckpt}", "model_type 'llamaish'", "not a causal language model")


def test_a_checkpoint_with_its_own_code_is_refused(tmp_path, ckpt, no_build):
    edit_json(ckpt / "config.json", auto_map={"AutoModelForCausalLM": "modeling_mine.MyModel"})
    refused(tmp_path, f"hf:{ckpt}", "config.json has an auto_map", "never runs code read from disk")


def test_a_corrupt_tokenizer_json_is_named(tmp_path, ckpt, no_build):
    text = (ckpt / "tokenizer.json").read_text()
    (ckpt / "tokenizer.json").write_text(text[: len(text) // 2])
    refused(tmp_path, f"hf:{ckpt}", "tokenizer.json is not valid JSON", "line")


def test_a_truncated_safetensors_file_is_named(tmp_path, ckpt, no_build):
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    refused(tmp_path, f"hf:{ckpt}", "model.safetensors is truncated")


def test_a_tokenizer_larger_than_the_embedding_is_refused(tmp_path, ckpt, no_build):
    tok = json.loads((ckpt / "tokenizer.json").read_text())
    tok["added_tokens"].append({"id": 1999, "content": "<extra>", "special": True})
    (ckpt / "tokenizer.json").write_text(json.dumps(tok))
    refused(tmp_path, f"hf:./{ckpt.name}", "tokenizer.json has 2000 tokens, the embedding 1024 rows")


def test_a_config_that_disagrees_with_the_weights_names_the_tensor_and_both_shapes(tmp_path, ckpt, no_build):
    edit_json(ckpt / "config.json", intermediate_size=640)
    refused(tmp_path, f"hf:{ckpt}", "model.layers.0.mlp.down_proj.weight of shape [192, 512]", "implies [192, 640]")


def test_a_case_that_cannot_fit_is_an_oom_row_and_larger_batches_are_skipped(tmp_path, monkeypatch):
    """With 1 GB available the tiny model fits at batch 1 (about 0.28 GB, mostly the margin) but not at 16,384
    (its prefill activations alone: 16,384 x 8 x (4 x 192 + 3 x 512) x 4 bytes = 1.21 GB; the KV cache 16,384 x 10
    tokens x 3,072 bytes = 0.50 GB): that case is an ``oom`` row with the estimate, never built, the larger one
    ``skipped``, and the run exits 0 (every result stored)."""
    monkeypatch.setattr(preflight, "available_bytes", lambda device: 10**9)
    db = tmp_path / "g.db"
    args = ["-b", "1,16384,32768", "--repeats", "1", "--no-perplexity", "--idle-s", "0", "--db", str(db)]
    p = run_cli("generate", "-m", "hf:tiny-shakespeare", *SHAPE[:2], *SHAPE[4:], *args)
    assert p.returncode == 0, p.stdout + p.stderr
    rows = {r["batch_size"]: r for r in Store(db).records() if not r.get("row_type")}
    assert [rows[b]["status"] for b in (1, 16384, 32768)] == ["ok", "oom", "skipped"]
    assert "EstimatedOutOfMemory: not built: needs about 2.31 GB" in rows[16384]["error"]
    assert "KV cache 0.50 GB" in rows[16384]["error"] and "more than the 1.00 GB available" in rows[16384]["error"]
    assert "batch size 16384 already ran out of memory" in rows[32768]["error"]


def test_the_estimate_of_the_tiny_model_in_exact_numbers():
    """The bundled tiny model (vocab 1024, hidden 192, 4 layers, 4 heads, 2 KV heads, head_dim 48, MLP 512, tied):

    parameters: embedding 1024 x 192 = 196,608; a layer: q 192 x 192 + k, v 96 x 192 each + o 192 x 192 = 110,592,
    gate, up, down 512 x 192 each = 294,912, two norms 384: 405,888; 4 layers 1,623,552; final norm 192:
    1,820,352 in all; linear 4 x (110,592 + 294,912) = 1,622,016, with 4 x (192 + 96 + 96 + 192 + 512 + 512 + 192)
    = 7,168 rows.

    fp32, batch 2, prompt 8, 4 new tokens: weights 1,820,352 x 4 = 7,281,408; KV cache 2 x 4 layers x 2 x 48 x
    4 bytes = 3,072 a token x 12 tokens x 2 = 73,728; activations 16 tokens x (4 x 192 + 3 x 512) x 4 = 147,456, the
    mask 16 x 12 = 192, the logits 2 x 1024 x (4 + 4) = 16,384: 164,032; margin int(7,519,168 x 0.1) + 256 MiB =
    751,916 + 268,435,456 = 269,187,372; total 7,519,168 + 269,187,372 = 276,706,540.

    int8 weight-only (bf16 model dtype): loaded 1,820,352 x 2 = 3,640,704; kept (1,820,352 - 1,622,016) x 2 =
    396,672, linear 1,622,016 x 1, the tied head's copy 196,608 x 1, scales 4 x (7,168 + 1,024) = 32,768: 2,248,064.
    Split over 2 GPUs, a GPU's: whole on each the bf16 embedding table 393,216 and the head's copy and its scales
    196,608 + 4,096 (593,920), half of the rest (2,248,064 - 593,920) / 2 = 827,072: 1,420,992; the checkpoint
    loaded whole first (3,640,704); KV cache 73,728 / 2 x 2 bytes / 4 bytes = 18,432.
    """
    fp = preflight.footprint("hf:tiny-shakespeare")
    assert (fp.params, fp.linear_params, fp.linear_rows, fp.tied_head) == (1_820_352, 1_622_016, 7_168, True)
    e = preflight.estimate(fp, batch_size=2, prompt_len=8, new_tokens=4, dtype_bytes=4)
    assert (e.weights_bytes, e.kv_cache_bytes, e.activations_bytes) == (7_281_408, 73_728, 164_032)
    assert (e.margin_bytes, e.total_bytes) == (269_187_372, 276_706_540)
    q = preflight.estimate(fp, batch_size=2, prompt_len=8, new_tokens=4, dtype_bytes=2, eight_bit=True)
    assert (q.load_bytes, q.weights_bytes) == (3_640_704, 2_248_064)
    q2 = preflight.estimate(fp, batch_size=2, prompt_len=8, new_tokens=4, dtype_bytes=2, eight_bit=True, tp=2)
    assert (q2.load_bytes, q2.weights_bytes, q2.kv_cache_bytes) == (3_640_704, 1_420_992, 18_432)


def test_a_split_weight_only_case_is_estimated_a_gpu_at_its_quantized_size():
    """Llama-3.1-70B (random weights, untied head) in int8 weight-only over 2 GPUs: each draws its bf16 shards a layer
    at a time and quantizes them to half of the whole int8 model's weights (the table aside); at the loading peak one
    layer and the head are unquantized (their halves on each GPU). The estimate fits where the bf16 split's does not;
    on one GPU the int8 model fits a 141 GB H200 (the whole bf16 model, 141 GB of weights, does not)."""
    from accelbench import api, scenarios

    gen, fp, cases = scenarios.get("generate"), preflight.footprint("hf:llama-3.1-70b"), {}
    base = {"models": "hf:llama-3.1-70b", "precisions": "bf16,int8-weight-only", "device": "cpu"}
    for parallel, split in (("", {}), ("tp=2", {"parallel": "tp=2"})):
        spec = api.spec("generate", {**base, **split})
        cases.update({(c.precision, parallel): preflight.case_estimate(fp, c, spec) for c in gen.cases(spec, "cpu")})
    table = 128256 * 8192 * 2  # the bf16 embedding table, whole on each GPU
    one, two, bf16_two = cases["int8-weight-only", ""], cases["int8-weight-only", "tp=2"], cases["bf16", "tp=2"]
    assert two.weights_bytes == (one.weights_bytes - table) // 2 + table
    layer = (4 * 8192 * 8192 // 4 * 2 + 2 * 1024 * 8192 + 3 * 28672 * 8192) * 2  # q, o, k, v, gate, up, down
    head = 128256 * 8192 * 2
    assert one.load_bytes == one.weights_bytes + layer + head
    assert two.load_bytes == two.weights_bytes + (layer + head) // 2
    assert two.weights_bytes < 0.55 * bf16_two.weights_bytes and two.total_bytes < bf16_two.total_bytes
    h200 = 141e9
    assert one.total_bytes < h200 < cases["bf16", ""].weights_bytes


def test_the_layout_of_the_architectures_counts_their_published_parameters():
    """Parameter counts of the layouts, equal to ``transformers``' models of the same configs (built on the meta
    device when this was written) and to the model cards: Llama-3.1-8B 8,030,261,248; GPT-2 124,439,808."""
    counts = {a: preflight.footprint(f"hf:{a}").params for a in ("llama-3.1-8b", "gpt2", "qwen2.5-0.5b")}
    assert counts == {"llama-3.1-8b": 8_030_261_248, "gpt2": 124_439_808, "qwen2.5-0.5b": 494_032_768}
    assert all(preflight.footprint(f"hf:{a}") for a in hf.ARCHITECTURES)  # a new architecture needs its layout
    assert layout("gpt2", {}) is None and layout("bert", {"hidden_size": 8}) is None  # sizes missing, or a family
