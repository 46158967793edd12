"""The generate scenario's parts on tiny real models (CPU): weight-only linears, fused projections, the two decode
loops, prompts, checkpoints."""

import contextlib
import json

import pytest

pytest.importorskip("transformers")

import torch  # noqa: E402
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,  # noqa: E402
    MistralForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
)

SMALL = dict(
    vocab_size=300,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def tiny(cls=LlamaForCausalLM, config=LlamaConfig, seed=0, **kw):
    torch.manual_seed(seed)
    return cls(config(**{**SMALL, **kw})).eval()


def test_weight_only_int8_and_fp8_stay_within_their_rounding():
    from accelbench.quant.weight_only import WeightOnlyLinear, int8_kernel_works, quantize_weight

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 32, bias=True)
    x = torch.randn(5, 64)
    ref = lin(x)
    for scheme, step in (("int8", 1 / 127), ("fp8", 2**-3)):  # int8: half a step a weight; e4m3: 3 mantissa bits
        q, scale = quantize_weight(lin.weight, scheme)
        assert q.shape == lin.weight.shape and scale.shape == (32,)
        deq = q.float() * scale[:, None]
        row_max = lin.weight.detach().abs().amax(1, keepdim=True)
        assert ((deq - lin.weight.detach()).abs() <= step * row_max + 1e-7).all()
        got = WeightOnlyLinear(lin, scheme, int8_kernel=False)(x)
        assert (got - ref).abs().max() < 0.05 * ref.abs().max()
    assert int8_kernel_works(torch.device("cpu"), torch.float32)
    kernel = WeightOnlyLinear(lin, "int8", int8_kernel=True)(x)
    plain = WeightOnlyLinear(lin, "int8", int8_kernel=False)(x)
    assert torch.allclose(kernel, plain, atol=1e-5)
    with pytest.raises(ValueError):
        quantize_weight(lin.weight, "int4")


def test_quantized_model_reads_about_half_the_bytes_and_keeps_its_tokens_close():
    from accelbench.models.lm_shape import shape_of
    from accelbench.quant.weight_only import quantize_linears

    model = tiny().to(torch.bfloat16)
    before = shape_of(model, torch.bfloat16)
    cols = quantize_linears(model, "int8")
    after = shape_of(model, torch.bfloat16)
    linears = 2 * 7 + 1  # q k v o gate up down a layer, and the LM head
    assert cols["quant_layers"] == linears
    assert after.matmul_params == before.matmul_params and after.lm_head_params == before.lm_head_params
    linear_bytes = 2 * (before.matmul_params + before.lm_head_params)
    # each linear: int8 weight (1 byte a parameter) and a bf16 scale a row instead of 2 bytes a parameter
    assert before.weight_bytes - after.weight_bytes == linear_bytes // 2 - 2 * sum(
        m.out_features for m in model.modules() if type(m).__name__ == "WeightOnlyLinear"
    )


def test_a_weight_quantized_in_chunks_is_the_whole_weight_quantized_at_once():
    """Rows over several chunks give what the per-row formula gives on the whole weight, bit for bit."""
    from accelbench.quant.weight_only import CHUNK_ELEMENTS, SCHEMES, quantize_weight

    torch.manual_seed(0)
    k = 4096
    w = torch.randn(2 * CHUNK_ELEMENTS // k + 37, k, dtype=torch.bfloat16)  # two whole chunks and a ragged one
    for scheme, top in SCHEMES.items():
        q, scale = quantize_weight(w, scheme)
        ref_scale = (w.float().abs().amax(dim=1) / top).clamp(min=1e-12)
        ref = w.float() / ref_scale[:, None]
        ref = ref.round().clamp(-127, 127).to(torch.int8) if scheme == "int8" else ref.to(torch.float8_e4m3fn)
        assert q.dtype == ref.dtype and torch.equal(scale, ref_scale)
        assert torch.equal(q.view(torch.int8), ref.view(torch.int8)), scheme


def test_quantizing_frees_each_full_precision_linear_as_it_goes():
    """Each replaced ``nn.Linear`` is freed when its quantized one takes its place, not after the last: at most one
    layer's full-precision weight beside the quantized model (an 8B model held both, 24 GB, on an H100)."""
    import weakref

    from accelbench.quant.weight_only import WeightOnlyLinear, quantize_linears

    model = tiny().to(torch.bfloat16)
    replaced_when_freed = []

    def freed():
        replaced_when_freed.append(sum(isinstance(m, WeightOnlyLinear) for m in model.modules()))

    finalizers = [weakref.finalize(m, freed) for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(finalizers) == 15
    quantize_linears(model, "int8")
    assert replaced_when_freed == list(range(1, 16))


def test_random_weights_are_quantized_a_layer_at_a_time_as_they_are_drawn():
    """Random weights with a weight-only precision are drawn a decoder layer at a time, each fused and quantized
    before the next is allocated: when a layer is converted, the layers before it hold 8-bit linears only and those
    after it are not allocated (what lets a 70B shape load in int8 on one 141 GB GPU). The converted model is the one
    drawn whole and converted after (same int8 weights, same logits), and a tied LM head stays the embedding table."""
    from accelbench.backends.lm_fuse import fuse_layer, fuse_projections
    from accelbench.models import hf
    from accelbench.models.lm_load import load_lm, materialize
    from accelbench.quant.lm import layer_quantizer, quantize_lm

    quantize_layer, name, cpu = layer_quantizer("int8-weight-only"), "hf:tiny-shakespeare", torch.device("cpu")

    def convert(layer):
        fuse_layer(layer)
        quantize_layer(layer)

    seen = hf.load_hf(name, torch.device("meta"), torch.float32, random_init=True).module
    layers, states = list(seen.model.layers), []

    def convert_and_look(layer):  # each layer's state when layer i is converted: 8 bits, full precision or meta
        def state(other):
            linears = [m for m in other.modules() if isinstance(m, torch.nn.Linear)]
            return "8-bit" if not linears else ("meta" if linears[0].weight.is_meta else "full")

        states.append([state(other) if other is not layer else "this" for other in layers])
        convert(layer)

    materialize(seen, cpu, 7, convert_and_look)
    assert states == [["this", "meta", "meta", "meta"], ["8-bit", "this", "meta", "meta"],
                      ["8-bit", "8-bit", "this", "meta"], ["8-bit", "8-bit", "8-bit", "this"]]  # fmt: skip
    streamed = load_lm(name, cpu, torch.float32, 7, random_init=True, each_layer=convert)
    assert streamed.module.lm_head.weight is streamed.module.model.embed_tokens.weight  # tied, as drawn
    cols = quantize_lm(streamed.module, "int8-weight-only")
    whole = hf.load_hf(name, torch.device("meta"), torch.float32, random_init=True)
    materialize(whole.module, cpu, 7)
    fuse_projections(whole.module)
    assert cols == quantize_lm(whole.module, "int8-weight-only") and cols["quant_layers"] == 4 * 4 + 1
    a, b = streamed.module.model.layers[3].mlp.gate_up_proj, whole.module.model.layers[3].mlp.gate_up_proj
    assert a.weight.dtype == torch.int8 and torch.equal(a.weight, b.weight) and torch.equal(a.scale, b.scale)
    prompts = torch.randint(0, streamed.info.vocab_size, (2, 12), generator=torch.Generator().manual_seed(0))
    assert torch.equal(streamed.module(prompts).logits, whole.module(prompts).logits)


def test_a_quantized_linear_keeps_the_hooks_and_shard_marks_of_the_one_it_replaces():
    """A tensor-parallel split's all-reduce is a forward hook on the linear and its shard a mark on the weight: both
    move onto the weight-only linear, so the split still sums and its degree is still read; a split refuses only
    what it does not split (torchao's fp8)."""
    from accelbench.backends.generation import tp_reason
    from accelbench.models.lm_shape import SHARDS
    from accelbench.models.tensor_parallel import degree
    from accelbench.quant.weight_only import WeightOnlyLinear, quantize_linears

    model = torch.nn.Sequential(torch.nn.Linear(8, 4, bias=False))
    setattr(model[0].weight, SHARDS, 2)
    model[0].register_forward_hook(lambda module, args, out: out * 2)  # stands for the all-reduce over 2 ranks
    x = torch.randn(3, 8)
    want = model(x)
    quantize_linears(model, "int8")
    assert isinstance(model[0], WeightOnlyLinear) and degree(model) == 2
    torch.testing.assert_close(model(x), want, rtol=0.02, atol=0.02 * want.abs().max().item())
    assert tp_reason("int8-weight-only") is None is tp_reason("fp8-weight-only") is tp_reason("bf16")
    assert "torchao's fp8 linears are not split" in tp_reason("fp8")


def test_weight_bytes_of_a_torchao_quantized_model_count_what_it_stores():
    """A torchao weight is a tensor subclass whose dtype is the one it stands for (bf16: 2 bytes); the bytes a
    decode step reads are its inner int8 data, scales and zero points (the fp8 precision's weights are of the same
    kind: torchao refuses to build those off a GPU of compute capability 8.9)."""
    pytest.importorskip("torchao")
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    from accelbench.models.lm_shape import shape_of, stored_bytes

    model = tiny().to(torch.bfloat16)
    before = shape_of(model, torch.bfloat16)
    quantize_(model, Int8WeightOnlyConfig())
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(weights) == 2 * 7 + 1 and all(type(w) is not torch.nn.Parameter for w in weights)
    assert all(w.element_size() == 2 for w in weights)  # the logical dtype: what a naive count would take
    after = shape_of(model, torch.bfloat16)
    assert after.matmul_params == before.matmul_params
    for w in weights:  # int8 data (1 byte a parameter) plus a scale (and zero point) a row of >= 64 parameters
        assert w.numel() + w.shape[0] <= stored_bytes(w) < 1.25 * w.numel()
    assert before.weight_bytes - after.weight_bytes == sum(w.numel() * 2 - stored_bytes(w) for w in weights)


@pytest.mark.parametrize(
    "cls,config,kw",
    [
        (LlamaForCausalLM, LlamaConfig, {}),
        (Qwen2ForCausalLM, Qwen2Config, {}),
        (MistralForCausalLM, MistralConfig, {"sliding_window": None}),
    ],
)
def test_fused_projections_compute_the_same_function(cls, config, kw):
    from accelbench.backends.lm_fuse import fuse_projections

    model = tiny(cls, config, **kw)
    ids = torch.randint(0, 300, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits
        assert fuse_projections(model) == 2
        got = model(ids).logits
    assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5)
    assert not hasattr(model.model.layers[0].self_attn, "q_proj")


def test_fusing_gpt2_is_refused_with_a_reason():
    from accelbench.backends.lm_fuse import fusable, fuse_projections
    from accelbench.core.errors import Unsupported

    model = GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=64, vocab_size=300))
    assert "model.layers" in fusable(model)
    with pytest.raises(Unsupported, match="fused projections: .*model.layers"):
        fuse_projections(model)


def test_both_loops_generate_the_same_greedy_tokens_and_time_every_token():
    from accelbench.backends.lm_loop import StaticLoop, hf_generate
    from accelbench.backends.lm_timing import time_generation, time_steps

    model, dev = tiny(), torch.device("cpu")
    prompts = torch.randint(0, 300, (3, 11))
    a = time_generation(lambda p, on_token: hf_generate(model, p, 6, on_token), prompts, dev)
    b = time_steps(StaticLoop(model, 3, 11, 6, dev), prompts, 6, dev)
    assert a.tokens.shape == b.tokens.shape == (3, 6)
    assert torch.equal(a.tokens, b.tokens)
    for g in (a, b):
        assert len(g.itl_s) == 5 and all(t > 0 for t in g.itl_s)
        assert 0 < g.ttft_s < g.e2e_s
        assert g.ttft_s + sum(g.itl_s) <= g.e2e_s + 1e-6  # the marks lie inside the synchronised window


def test_the_compiled_prefill_is_compiled_and_gives_the_eager_prefills_first_tokens():
    """A compiling engine's prefill is ``torch.compile``-d as its decode step is (matching steps): the first call
    compiles a graph specialised to its shape, a second call compiles none, a session of another prompt length
    compiles its own, Dynamo's recompile limit leaves room for a sweep's shapes, and the whole greedy generation
    equals the eager loop's (CPU: Inductor's C++ backend)."""
    import torch._dynamo.config as dynamo_config
    from torch._dynamo.utils import counters

    from accelbench.backends.lm_loop import SHAPES_LIMIT, StaticLoop, compiled_steps, prefill_step
    from accelbench.backends.lm_timing import time_steps

    model, dev = tiny(), torch.device("cpu")
    prompts = torch.randint(0, 300, (2, 9))
    eager_loop = StaticLoop(model, 2, 9, 5, dev)
    torch._dynamo.reset()
    steps = compiled_steps("default")
    assert steps.prefill is not prefill_step and not steps.graphs  # graphs: reduce-overhead (CUDA) only
    limit = getattr(dynamo_config, "recompile_limit", None) or dynamo_config.cache_size_limit
    assert limit >= SHAPES_LIMIT
    loop = StaticLoop(model, 2, 9, 5, dev, steps=steps)
    with torch.no_grad():
        eager_loop.reset(), loop.reset()
        counters.clear()
        first = loop.prefill(prompts)
        compiled_graphs = counters["stats"]["unique_graphs"]
        assert compiled_graphs >= 1 and torch.equal(first, eager_loop.prefill(prompts))
        loop.reset()
        assert torch.equal(loop.prefill(prompts), first) and counters["stats"]["unique_graphs"] == compiled_graphs
        short = prompts[:, :5].contiguous()
        shorter = StaticLoop(model, 2, 5, 4, dev, steps=steps)
        assert torch.equal(shorter.prefill(short), StaticLoop(model, 2, 5, 4, dev).prefill(short))
        assert counters["stats"]["unique_graphs"] == compiled_graphs + 1  # a graph a prompt length
    eager, compiled = time_steps(eager_loop, prompts, 5, dev), time_steps(loop, prompts, 5, dev)
    assert compiled.tokens.shape == (2, 5) and torch.equal(eager.tokens, compiled.tokens)


def test_a_sessions_repeated_compiled_step_skips_the_guards_that_do_not_tell_its_graphs_apart():
    """A compiled step's first call in a session checks its guards in full (and compiles); the session's later calls
    of the same step run under ``skip_guard_eval_unsafe`` (torch >= 2.7), eager steps never do, and the stance is
    the default again after each call (read inside steps that record it)."""
    from torch._dynamo import eval_frame

    from accelbench.backends.engine import Steps
    from accelbench.backends.lm_loop import StaticLoop, decode_step, guards_skipped, prefill_step

    if not hasattr(eval_frame._stance, "skip_guard_eval_unsafe"):
        pytest.skip("torch < 2.7 has no skip_guard_eval_unsafe stance")
    seen = []

    def recording(step):
        def run(*args):
            seen.append((step.__name__, eval_frame._stance.skip_guard_eval_unsafe))
            return step(*args)

        return run

    model, dev = tiny(), torch.device("cpu")
    prompts = torch.randint(0, 300, (1, 6))
    for compiled in (True, False):
        seen.clear()
        steps = Steps(prefill=recording(prefill_step), decode=recording(decode_step), compiled=compiled)
        loop = StaticLoop(model, 1, 6, 3, dev, steps=steps)
        with torch.no_grad():
            for _ in range(2):
                loop.reset()
                token = loop.prefill(prompts)
                for i in range(2):
                    token = loop.decode(token, i)
        first = [("prefill_step", False), ("decode_step", False), ("decode_step", compiled)]
        assert seen == first + [("prefill_step", compiled), ("decode_step", compiled), ("decode_step", compiled)]
        assert not eval_frame._stance.skip_guard_eval_unsafe
    assert isinstance(guards_skipped(Steps(prefill=prefill_step, decode=decode_step)), contextlib.nullcontext)


def test_a_compiled_weight_only_step_with_tuned_reductions_decodes_the_same_tokens():
    """The weight-only linears' one-token path (a multiply-and-sum inside the compiled step) with coordinate-descent
    tuning on gives the eager step's greedy tokens (CPU: Inductor's C++ backend)."""
    from accelbench.backends.lm_loop import StaticLoop, compiled_steps
    from accelbench.backends.lm_timing import time_steps
    from accelbench.quant.weight_only import quantize_linears

    model, dev = tiny(), torch.device("cpu")
    quantize_linears(model, "int8")
    prompts = torch.randint(0, 300, (1, 7))
    eager = time_steps(StaticLoop(model, 1, 7, 5, dev), prompts, 5, dev)
    torch._dynamo.reset()
    tuned_loop = StaticLoop(model, 1, 7, 5, dev, steps=compiled_steps("default", tune_reductions=True))
    tuned = time_steps(tuned_loop, prompts, 5, dev)
    assert tuned.tokens.shape == (1, 5) and torch.equal(eager.tokens, tuned.tokens)


def test_a_compiled_step_over_fused_projections_decodes_the_plain_models_tokens():
    """``static-compile-fused``'s model (fused q/k/v and gate/up, its own attention forward) under a compiled step
    writes to and reads from the KV cache: its greedy tokens equal the plain model's eager ones (float32). The fused
    attention takes the cache by either keyword ``transformers`` has used (``past_key_values``, then ``cache``): with
    the newer spelling the cache was silently skipped and the compiled attention failed on its shapes."""
    from accelbench.backends.lm_fuse import fuse_projections
    from accelbench.backends.lm_loop import StaticLoop, cache_argument, compiled_steps
    from accelbench.backends.lm_timing import time_steps

    model, dev = tiny(), torch.device("cpu")
    prompts = torch.randint(0, 300, (2, 7))
    plain = time_steps(StaticLoop(model, 2, 7, 6, dev), prompts, 6, dev)
    assert cache_argument(model) in ("cache", "past_key_values")
    fuse_projections(model)
    torch._dynamo.reset()
    fused = time_steps(StaticLoop(model, 2, 7, 6, dev, steps=compiled_steps("default")), prompts, 6, dev)
    assert fused.tokens.shape == (2, 6) and torch.equal(plain.tokens, fused.tokens)


def test_random_and_text_prompts():
    from accelbench.data.text import held_out_text, random_prompts, shipped_text, split, text_prompts

    text = shipped_text()
    assert len(text) == 1_115_394
    train, held = split(text)
    assert train + held == text and held == held_out_text() and train.endswith("\n")
    assert 0.09 < len(held) / len(text) < 0.11
    a, b = random_prompts(2, 5, 300, seed=1), random_prompts(2, 5, 300, seed=1)
    assert torch.equal(a, b) and a.shape == (2, 5) and int(a.max()) < 300

    class CharTokenizer:
        def __call__(self, s):
            return {"input_ids": [ord(c) % 300 for c in s]}

    p = text_prompts(CharTokenizer(), 3, 20, seed=0)
    assert p.shape == (3, 20)
    flat = [ord(c) % 300 for c in held]
    windows = {tuple(flat[i : i + 20]) for i in range(len(flat) - 19)}
    assert {tuple(row) for row in p.tolist()} <= windows  # each prompt is a window of the held-out text
    with pytest.raises(ValueError):
        text_prompts(CharTokenizer(), 1, len(held) + 1, seed=0)


def test_checkpoint_checks_are_one_line_errors(tmp_path):
    from accelbench.core.errors import UnknownModelError
    from accelbench.models.hf import check_lm

    with pytest.raises(UnknownModelError, match="did you mean 'hf:llama-3.1-8b'"):
        check_lm("hf:llama-3.1-8c")
    with pytest.raises(UnknownModelError, match="no checkpoint directory"):
        check_lm(f"hf:{tmp_path}/missing")
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "pytorch_model.bin").write_bytes(b"not loaded")
    with pytest.raises(UnknownModelError, match="pickled weights"):
        check_lm(f"hf:{tmp_path}")
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": "model-1.safetensors"}}))
    with pytest.raises(UnknownModelError, match="misses weight file model-1.safetensors"):
        check_lm(f"hf:{tmp_path}")


def test_a_saved_checkpoint_loads_and_a_foreign_tokenizer_is_refused(tmp_path):
    from accelbench.core.errors import UnknownModelError
    from accelbench.models.hf import LoadedLM, check_tokenizer
    from accelbench.models.lm_load import load_lm

    tiny().save_pretrained(tmp_path, safe_serialization=True)
    loaded = load_lm(f"hf:{tmp_path}", torch.device("cpu"), torch.float32)
    assert loaded.info.pretrained and loaded.info.vocab_size == 300 and loaded.tokenizer is None

    class Big:
        def __len__(self):
            return 301

    with pytest.raises(UnknownModelError, match="301 tokens, more than the model's 300"):
        check_tokenizer(LoadedLM(loaded.module, Big(), loaded.info))
