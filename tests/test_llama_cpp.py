"""llama.cpp's llama-server pieces (accelbench.backends.servers.llamacpp): the GGUF files written and read back, the command,
the binary's lookup, and the contract with a real llama-server (skipped without one: set ACCELBENCH_LLAMA_SERVER to
its path or put it on PATH; the converter test needs ACCELBENCH_LLAMA_CPP_SRC, llama.cpp's source folder)."""

from __future__ import annotations

import json
import os
import random
import stat
import time
from pathlib import Path

import pytest

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from accelbench.backends.openai_api import RequestError  # noqa: E402
from accelbench.backends.servers.llamacpp import checkpoint as ck  # noqa: E402
from accelbench.backends.servers.llamacpp import server as srv  # noqa: E402
from accelbench.backends.servers.llamacpp import weights  # noqa: E402
from accelbench.core.errors import EXIT_USAGE, ConfigError  # noqa: E402
from accelbench.models import hf  # noqa: E402

# a Llama small enough to write and serve in a second, with a vocabulary past the bundled tokenizer's 1,024 ids (the
# covering tokens), untied output and Llama 3 RoPE (rope_freqs): every tensor kind an architecture's file has
TINY = dict(
    vocab_size=1536,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=512,
    rms_norm_eps=1e-5,
    tie_word_embeddings=False,
    rope_parameters={
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    },
)


def tiny_config():
    return transformers.LlamaConfig(**TINY)


def fields(reader) -> dict:
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.ggml.") or "id" in k}


@pytest.mark.parametrize(("precision", "qtype", "file_type"), [("bf16", "BF16", 32), ("q8_0", "Q8_0", 7)])
def test_write_gguf_metadata_and_tensors(tmp_path, precision, qtype, file_type):
    out = ck.write_config_gguf(tiny_config(), "tiny", tmp_path, precision, seed=3)
    assert out.gguf == tmp_path / f"tiny-{precision}-seed3.gguf" and out.precision == precision
    assert out.file_bytes == out.gguf.stat().st_size and not list(tmp_path.glob("*.partial"))
    r = gguf.GGUFReader(out.gguf)
    f = fields(r)
    assert f["general.architecture"] == "llama" and f["general.file_type"] == file_type
    expected = {
        "llama.block_count": 2,
        "llama.context_length": 512,
        "llama.embedding_length": 64,
        "llama.feed_forward_length": 128,
        "llama.attention.head_count": 4,
        "llama.attention.head_count_kv": 2,
        "llama.rope.dimension_count": 16,
        "llama.attention.key_length": 16,
        "llama.vocab_size": 1536,
        "llama.rope.freq_base": 500000.0,
    }
    assert {k: f[k] for k in expected} == expected
    assert f["llama.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    tensors = {t.name: t for t in r.tensors}
    assert len(tensors) == 1 + 1 + 2 * 9 + 2  # embeddings, rope_freqs, 9 a block, output_norm, output
    for name, kind, shape in [
        ("token_embd.weight", qtype, [64, 1536]),  # ggml order: columns first
        ("output.weight", qtype, [64, 1536]),
        ("blk.1.attn_q.weight", qtype, [64, 64]),
        ("blk.1.attn_k.weight", qtype, [64, 32]),
        ("blk.1.ffn_down.weight", qtype, [128, 64]),
        ("blk.0.attn_norm.weight", "F32", [64]),
        ("output_norm.weight", "F32", [64]),
        ("rope_freqs.weight", "F32", [8]),
    ]:
        t = tensors[name]
        assert (t.tensor_type.name, [int(n) for n in t.shape]) == (kind, shape), name
    assert list(tensors["rope_freqs.weight"].data) == pytest.approx(weights.rope_factors(tiny_config()).tolist())
    # random weights in transformers' initialisation scale (std 0.02), norms at one
    q = gguf.quants.dequantize(tensors["blk.0.ffn_up.weight"].data, tensors["blk.0.ffn_up.weight"].tensor_type)
    assert q.std() == pytest.approx(0.02, rel=0.05)
    assert set(tensors["blk.0.ffn_norm.weight"].data.tolist()) == {1.0}


def test_gguf_vocabulary_is_the_covering_tokenizer(tmp_path):
    out = ck.write_config_gguf(tiny_config(), "tiny", tmp_path, "bf16")
    r = gguf.GGUFReader(out.gguf)
    f = fields(r)
    tokens = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    tok = transformers.AutoTokenizer.from_pretrained(out.tokenizer_dir)
    assert len(tokens) == len(tok) == 1536
    assert tokens == tok.convert_ids_to_tokens(list(range(1536)))
    assert tokens[1200] == "<t1200>" and types[1200] == gguf.TokenType.USER_DEFINED
    assert types[0] == gguf.TokenType.CONTROL and types[500] == gguf.TokenType.NORMAL
    assert r.fields["tokenizer.ggml.model"].contents() == "gpt2"
    assert r.fields["tokenizer.ggml.pre"].contents() == "gpt-2"
    merges = json.loads((out.tokenizer_dir / "tokenizer.json").read_text())["model"]["merges"]
    assert r.fields["tokenizer.ggml.merges"].contents() == [" ".join(m) for m in merges]
    assert (f["tokenizer.ggml.bos_token_id"], f["tokenizer.ggml.eos_token_id"]) == (0, 0)
    assert r.fields["tokenizer.ggml.add_bos_token"].contents() is False


def test_bundled_model_keeps_its_weights_with_the_converters_qk_permutation(tmp_path):
    from safetensors.torch import load_file

    out = ck.write_gguf("hf:tiny-shakespeare", tmp_path, "bf16")
    assert out.gguf.name == "tiny-shakespeare-bf16.gguf" and out.weights == "bundled"
    state = load_file(hf.BUNDLED / "tiny-shakespeare" / "model.safetensors")
    tensors = {t.name: t for t in gguf.GGUFReader(out.gguf).tensors}

    def read(name, shape):
        t = tensors[name]
        return torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy()).reshape(shape)

    q = state["model.layers.2.self_attn.q_proj.weight"].float()
    k = state["model.layers.2.self_attn.k_proj.weight"].float()
    assert torch.equal(read("blk.2.attn_q.weight", q.shape), weights.permute_qk(q, 4))
    assert torch.equal(read("blk.2.attn_k.weight", k.shape), weights.permute_qk(k, 2))
    assert not torch.equal(weights.permute_qk(q, 4), q)
    assert "output.weight" not in tensors  # tied embeddings: llama.cpp reads token_embd


def test_written_once_and_partial_files_never_loaded(tmp_path):
    first = ck.write_config_gguf(tiny_config(), "tiny", tmp_path, "q8_0")
    stamp = first.gguf.stat().st_mtime_ns
    again = ck.write_config_gguf(tiny_config(), "tiny", tmp_path, "q8_0")
    assert again == first and first.gguf.stat().st_mtime_ns == stamp


def test_q8_0_matches_gguf_quantize_bit_for_bit():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 96, generator=g) * 0.02
    x[1, :32] = 0  # a block of zeros: scale 0, quants 0
    x[2, 5] = 0.5 * x[2, :32].abs().max() / 127 * 2  # a value on a rounding tie of some block
    expected = gguf.quants.quantize(x.numpy(), gguf.GGMLQuantizationType.Q8_0)
    assert (weights.q8_0_bytes(x).numpy() == expected).all()


def test_precisions_and_refused_architectures(tmp_path):
    assert weights.PRECISIONS["q8_0"].bits_per_weight == 8.5
    with pytest.raises(ConfigError, match="allowed bf16, q8_0"):
        ck.write_gguf("hf:llama-3.2-1b", tmp_path, "fp8")
    with pytest.raises(ck.UnknownModelError, match="qwen2 model"):
        ck.write_gguf("hf:qwen2.5-0.5b", tmp_path, "bf16")


def test_checkpoint_takes_a_gguf_file_as_it_is(tmp_path):
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF")
    got = ck.gguf_checkpoint(str(path), tmp_path / "cache")
    assert (got.gguf, got.tokenizer_dir, got.file_bytes) == (path, None, 4)
    with pytest.raises(ck.UnknownModelError, match="no GGUF file"):
        ck.gguf_checkpoint(str(tmp_path / "none.gguf"), tmp_path)


def test_converter_source_is_required(monkeypatch, tmp_path):
    monkeypatch.delenv(ck.CONVERTER_ENV, raising=False)
    with pytest.raises(ck.ConversionError, match=ck.CONVERTER_ENV) as e:
        ck.converter_source()
    assert e.value.exit_code == EXIT_USAGE
    with pytest.raises(ck.ConversionError, match="no convert_hf_to_gguf.py"):
        ck.converter_source(tmp_path)


@pytest.mark.skipif(not os.environ.get(ck.CONVERTER_ENV), reason=f"no llama.cpp source: set {ck.CONVERTER_ENV}")
def test_converter_refuses_a_locally_trained_tokenizer_in_one_line(tmp_path):
    # its reason: the unrecognised pre-tokenizer, or before that (LlamaModel.set_vocab tries SentencePiece first)
    # the missing sentencepiece package where it is not installed
    reasons = "BPE pre-tokenizer was not recognized|No module named 'sentencepiece'"
    with pytest.raises(ck.ConversionError, match=f"llama.cpp's converter refused .*: .*({reasons})") as e:
        ck.convert_folder(hf.BUNDLED / "tiny-shakespeare", tmp_path, "q8_0")
    assert "\n" not in str(e.value) and not list(tmp_path.glob("*.gguf*"))


# --- the binary and its command ---


def test_missing_binary_is_one_line_naming_the_build(monkeypatch, tmp_path):
    monkeypatch.delenv(srv.SERVER_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(srv.ServerNotFound, match="no llama-server on PATH: build it .*build_llama_server.sh") as e:
        srv.find_server()
    assert e.value.exit_code == EXIT_USAGE and "\n" not in str(e.value)
    with pytest.raises(srv.ServerNotFound, match="--server-bin /nonexistent is not an executable file"):
        srv.find_server("/nonexistent")
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'version: 0.2.0-dev (build 10587, commit 3f545bec)' >&2\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert srv.find_server() == fake.resolve()  # on PATH
    monkeypatch.setenv(srv.SERVER_ENV, str(fake))
    assert srv.find_server() == fake.resolve()
    assert srv.server_version(fake) == "b10587-3f545bec"
    fake.write_text("#!/bin/sh\necho 'version: 0.2.0-dev (build 0, commit unknown)' >&2\n")
    assert srv.server_version(fake) is None


def test_server_command():
    cmd = srv.server_command("/b/llama-server", "/m/x.gguf", 8123, parallel=4, ctx_per_slot=1000, gpu=True)
    assert cmd == (
        "exec /b/llama-server -m /m/x.gguf --host 127.0.0.1 --port 8123 -np 4 -c 4000 --metrics --alias x -ngl 99"
    )
    cpu = srv.server_command("s", "x.gguf", 1, parallel=1, ctx_per_slot=64, gpu=False, alias="m", extra=["-t", "2"])
    assert cpu.endswith("-np 1 -c 64 --metrics --alias m -ngl 0 -t 2")
    assert srv.fixed_length(16) == {"ignore_eos": True, "max_tokens": 16}
    assert srv.banned_body([3, 9]) == {"logit_bias": [[3, False], [9, False]]} and srv.banned_body(()) == {}
    assert srv.build_info({"build_info": "b10587-3f545bec"}) == "b10587-3f545bec"
    assert srv.build_info({"build_info": "b0-unknown"}) is None


# --- a real llama-server ---


def _server_bin():
    try:
        return srv.find_server()
    except srv.ServerNotFound:
        return None


SERVER = _server_bin()
needs_server = pytest.mark.skipif(SERVER is None, reason=f"no llama-server: set {srv.SERVER_ENV} or put it on PATH")


def _start(tmp: Path, model: ck.Checkpoint, alias: str):
    import httpx

    from accelbench.launchers.server import free_port, start

    port = free_port()
    cmd = srv.server_command(SERVER, model.gguf, port, parallel=2, ctx_per_slot=256, gpu=False, alias=alias)
    server = start(cmd + " -t 2", tmp / f"{alias}.log", f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.alive():
        try:
            if httpx.get(server.base_url + srv.READY_PATH, timeout=1).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    server.stop()
    pytest.fail(f"llama-server did not become ready: {server.tail()}")


@pytest.fixture(scope="module")
def tiny_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("llama")
    model = ck.write_config_gguf(tiny_config(), "tiny", tmp, "q8_0")
    server = _start(tmp, model, "tiny")
    tok = transformers.AutoTokenizer.from_pretrained(model.tokenizer_dir)
    yield server, tok, srv.banned_body(model.banned_ids)  # what accelbench sends for a random-weight model
    server.stop()


def _stream(base_url: str, body: dict) -> list[str]:
    import httpx

    with httpx.stream("POST", base_url + "/v1/completions", json=body, timeout=60) as r:
        assert r.status_code == 200, r.read()
        return list(r.iter_lines())


def _events(lines: list[str]):
    from accelbench.backends.openai_api import DONE, chunk_event, parse_sse_line

    chunks = [c for c in map(parse_sse_line, lines) if c is not None]  # None: the blank line after each event
    events = [chunk_event(c, "completions") for c in chunks if c is not DONE]  # an error chunk raises here
    assert chunks[-1] is DONE
    return events


@needs_server
def test_server_answers_health_props_models_and_metrics(tiny_server):
    import httpx

    server, _, _ = tiny_server
    assert httpx.get(server.base_url + srv.READY_PATH).json() == {"status": "ok"}
    assert [m["id"] for m in httpx.get(server.base_url + "/v1/models").json()["data"]] == ["tiny"]
    assert httpx.get(server.base_url + srv.PROPS_PATH).json()["total_slots"] == 2
    text = httpx.get(server.base_url + srv.METRICS_PATH).text
    for name in srv.METRICS.values():
        assert f"# TYPE {name} " in text, name


@needs_server
def test_fixed_length_stream_and_what_accelbench_reads_of_it(tiny_server):
    server, tok, bans = tiny_server
    prompt = "ROMEO: what light"
    body = {"model": "tiny", "prompt": prompt, "stream": True, "stream_options": {"include_usage": True}, **bans}
    lines = _stream(server.base_url, {**body, **srv.fixed_length(16), "seed": 1})
    print("first lines:", *lines[:3], "last lines:", *lines[-3:], sep="\n")
    events = _events(lines)  # every line accepted by accelbench's parser
    output = [e for e in events if e.output]
    last = json.loads(lines[-4][len("data:") :])
    # the last chunk closes the choice and carries usage and llama.cpp's timings; then [DONE]
    assert events[-1].finish_reason == "length" and events[-1].usage["completion_tokens"] == 16
    assert last["timings"]["predicted_n"] == 16 and lines[-2:] == ["data: [DONE]", ""]
    assert events[-1].usage["prompt_tokens"] == len(tok.encode(prompt, add_special_tokens=False))
    # with the lone high bytes banned every token is whole UTF-8 text: one chunk a token, none held back
    assert len(output) == 16 and all(e.text for e in output)  # the closing chunk (empty text) is no output
    text = "".join(e.text for e in events)
    # the text re-tokenized: BPE over the joined pieces may merge across a boundary or split a piece differently
    # (over 40 seeds of this model: 16 tokens 38 times, 17 twice)
    assert abs(len(tok.encode(text, add_special_tokens=False)) - 16) <= 2


def test_incomplete_utf8_tokens_are_the_lone_high_bytes(tmp_path):
    out = ck.write_config_gguf(tiny_config(), "tiny", tmp_path, "bf16")
    tok = transformers.AutoTokenizer.from_pretrained(out.tokenizer_dir)
    assert len(out.banned_ids) == 128  # the bytes 0x80-0xFF of the byte-level alphabet
    ids = range(len(tok))
    assert len(ids) == TINY["vocab_size"]
    for i in ids:
        text = tok.convert_tokens_to_string([tok.convert_ids_to_tokens(i)])
        assert ("\ufffd" in text) == (i in out.banned_ids), i


@needs_server
def test_random_model_streams_stay_whole_utf8(tiny_server):
    server, _, bans = tiny_server
    body = {"model": "tiny", "prompt": "a", "stream": True, "stream_options": {"include_usage": True}, **bans}
    for seed in range(4):  # 1 token in 12 of this vocabulary is a lone high byte: unbanned, each request would fail
        events = _events(_stream(server.base_url, {**body, **srv.fixed_length(64), "seed": seed, "temperature": 2}))
        assert events[-1].usage["completion_tokens"] == 64


@needs_server
def test_a_request_can_ban_the_tokens_itself(tiny_server):
    server, _, bans = tiny_server
    body = {"model": "tiny", "prompt": "a", "stream": True, **srv.fixed_length(64), "temperature": 2}
    with pytest.raises(RequestError, match="server error: .*does not match the expected Content-only format"):
        _events(_stream(server.base_url, {**body, "seed": 0}))  # a lone high byte ends the stream with an error
    for seed in range(4):
        events = _events(_stream(server.base_url, {**body, **bans, "seed": seed}))
        assert sum(1 for e in events if e.output) == 64


@needs_server
def test_prompt_token_counts_match_the_covering_tokenizer(tiny_server):
    import httpx

    server, tok, _ = tiny_server
    rng = random.Random(0)
    special = set(tok.all_special_ids)
    vocab = [i for i in range(len(tok)) if i not in special]
    for n in (1, 7, 64, 200):
        prompt = tok.decode([rng.choice(vocab) for _ in range(n)])  # as accelbench's ``random`` workload does
        ids = tok.encode(prompt, add_special_tokens=False)
        served = httpx.post(server.base_url + srv.TOKENIZE_PATH, json={"content": prompt}).json()["tokens"]
        assert served == ids, n
        body = {"model": "tiny", "prompt": prompt, "stream": True, "stream_options": {"include_usage": True}}
        events = _events(_stream(server.base_url, {**body, **srv.fixed_length(1)}))
        assert events[-1].usage["prompt_tokens"] == len(ids)


@needs_server
def test_bundled_model_generates_what_transformers_generates(tmp_path):
    model = ck.write_gguf("hf:tiny-shakespeare", tmp_path, "bf16")
    server = _start(tmp_path, model, "tiny-shakespeare")
    try:
        body = {"model": "tiny-shakespeare", "prompt": "ROMEO:", "stream": True, "temperature": 0}
        text = "".join(e.text for e in _events(_stream(server.base_url, {**body, **srv.fixed_length(16)})))
    finally:
        server.stop()
    folder = hf.BUNDLED / "tiny-shakespeare"
    tok = transformers.AutoTokenizer.from_pretrained(folder)
    lm = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    ids = tok("ROMEO:", return_tensors="pt").input_ids
    out = lm.generate(ids, max_new_tokens=16, min_new_tokens=16, do_sample=False)
    assert text == tok.decode(out[0, ids.shape[1] :])


# --- accelbench serve against a real llama-server, launched by accelbench and by the user ---

SERVE_FAST = ("--input-len", "96", "--output-len", "12", "--requests", "8", "--warmup-requests", "1")
SERVE_FAST += ("--device", "cpu", "--idle-s", "0")


def _served_rows(db) -> list[dict]:
    from accelbench.store import Store

    store = Store(db)
    rows = store.records(max(r["run_id"] for r in store.runs()))
    assert rows
    return rows


@needs_server
def test_serve_engine_llama_cpp_measures_every_level_with_no_failure(tmp_path, db):
    """``--engine llama.cpp``: accelbench writes the GGUF file, starts llama-server with a slot a request in flight,
    and every request of every level comes back whole, at the length asked (the server's usage)."""
    from conftest import run_cli

    p = run_cli("serve", "--engine", "llama.cpp", "--server-bin", str(SERVER), "-m", "hf:tiny-shakespeare",
                "--concurrency", "1,3", *SERVE_FAST, "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    rows = _served_rows(db)
    assert [r["concurrency"] for r in rows] == [1, 3]
    for r in rows:
        assert r["status"] == "ok" and r["requests_failed"] == 0 and r["requests_ok"] >= 6, r
        assert r["server_engine"] == "llama.cpp" and r["served_model"] == "tiny-shakespeare-bf16"
        assert r["output_tokens_timed"] == 12 * r["requests_ok"]  # usage: exactly the length asked
        assert "failed-requests" not in str(r["validity"])
    command = (tmp_path / "serve-checkpoints").glob("*.gguf")
    assert [g.name for g in command] == ["tiny-shakespeare-bf16.gguf"]


@needs_server
def test_a_users_own_launch_of_llama_server_is_measured_alike(tmp_path, db):
    """``--launch "llama-server ..."`` as a user writes it, on a GGUF file of accelbench's: the kind is found by its
    endpoints, and the requests ask it the way llama.cpp understands."""
    from conftest import run_cli

    model = ck.write_gguf("hf:tiny-shakespeare", tmp_path, "q8_0")
    launch = f"{SERVER} -m {model.gguf} --port {{port}} -np 2 -c 512 -ngl 0 -t 2 --alias mine"
    p = run_cli("serve", "--launch", launch, "-m", "hf:tiny-shakespeare", "--concurrency", "2", *SERVE_FAST,
                "--db", str(db))  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (row,) = _served_rows(db)
    assert row["status"] == "ok" and row["requests_failed"] == 0
    assert (row["server_engine"], row["served_model"]) == ("llama.cpp", "mine")
    assert row["output_tokens_timed"] == 12 * row["requests_ok"]


def test_engine_llama_cpp_without_a_binary_is_one_line_before_anything_runs(tmp_path, db):
    from conftest import run_cli

    p = run_cli("serve", "--engine", "llama.cpp", "--server-bin", str(tmp_path / "none"), "-m", "hf:tiny-shakespeare",
                *SERVE_FAST, "--db", str(db))  # fmt: skip
    assert p.returncode == EXIT_USAGE
    (line,) = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "is not an executable file" in line and "build_llama_server.sh" in line
    assert not list(tmp_path.glob("**/*.gguf"))  # nothing was written
