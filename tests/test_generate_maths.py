"""The generate scenario's pure maths against hand computation: FLOPs, bytes, KV cache, MBU/MFU, rates, perplexity."""

import math

import pytest

from accelbench.core import lm_analytic as m

SHAPE = m.Shape(
    layers=2,
    heads=4,
    kv_heads=2,
    head_dim=8,
    hidden=32,
    vocab=16,
    params=2000,
    embedding_params=512,
    tied_head=False,
    matmul_params=1000,
    lm_head_params=500,
    weight_bytes=4000,
    kv_bytes_per_value=2,
)


def test_kv_cache_bytes_by_hand():
    assert SHAPE.kv_bytes_per_token == 2 * 2 * 2 * 8 * 2 == 128  # keys and values x layers x kv heads x dim x bytes
    assert m.kv_cache_bytes(SHAPE, 3, 10) == 3 * 10 * 128


def test_causal_attention_flops_by_hand():
    # queries 0, 1, 2 attend to 1, 2, 3 positions: (QK^T + AV) 2 + 2 FLOPs x heads x dim x positions, 2 layers
    assert m.attention_flops(SHAPE, 0, 3) == 2 * 4 * 4 * 8 * (1 + 2 + 3)
    assert m.attention_flops(SHAPE, 4, 5) == 2 * 4 * 4 * 8 * 5


def test_prefill_and_decode_flops_by_hand():
    per_seq = 2 * 1000 * 3 + 2 * 500 + 2 * 4 * 4 * 8 * 6  # linears on 3 tokens, LM head on the last, attention
    assert m.prefill_flops(SHAPE, 2, 3) == 2 * per_seq
    assert m.decode_flops(SHAPE, 2, 5) == 2 * (2 * 1500 + 2 * 4 * 4 * 8 * 5)
    with pytest.raises(ValueError):
        m.prefill_flops(SHAPE, 0, 3)


def test_mean_decode_figures_equal_the_mean_over_every_step():
    prompt, new = 10, 4  # decode steps k = 1..3 attend over 11, 12, 13 positions
    contexts = [prompt + k for k in range(1, new)]
    assert m.mean_decode_context(prompt, new) == sum(contexts) / len(contexts) == 12
    assert m.mean_decode_bytes(SHAPE, 2, prompt, new) == pytest.approx(
        sum(m.decode_bytes(SHAPE, 2, c) for c in contexts) / len(contexts)
    )
    assert m.mean_decode_flops(SHAPE, 2, prompt, new) == pytest.approx(
        sum(m.decode_flops(SHAPE, 2, c) for c in contexts) / len(contexts)
    )
    with pytest.raises(ValueError):
        m.mean_decode_context(10, 1)


def test_utilisation_and_rates_by_hand():
    assert m.utilisation(100.0, 2.0, 10.0) == 5.0
    assert m.utilisation(100.0, None, 10.0) is None and m.utilisation(100.0, 1.0, 0.0) is None
    r = m.rates(2, 10, 4, ttft_s=0.5, tpot_s=0.1, e2e_s=1.0)
    assert (r.prefill_tokens_per_s, r.decode_tokens_per_s, r.output_tokens_per_s) == (40.0, 20.0, 8.0)
    assert m.rates(2, 10, 4, None, None, None).decode_tokens_per_s is None


def test_prefill_flops_agree_with_torchs_flop_counter():
    """torch's FlopCounterMode counts every matmul of a real prefill (eager attention: the full P x P products);
    our linear FLOPs are what it counts minus that full attention, our attention its causal half."""
    pytest.importorskip("transformers")
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers import LlamaConfig, LlamaForCausalLM

    from accelbench.models.lm_shape import shape_of

    cfg = LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        attn_implementation="eager",
    )
    model = LlamaForCausalLM(cfg).eval()
    shape = shape_of(model, torch.float32)
    b, p = 2, 7
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 300, (b, p)), logits_to_keep=1)
    counts = {mod: {str(op): n for op, n in ops.items()} for mod, ops in counter.get_flop_counts().items()}
    attention_counted = sum(c.get("aten.bmm", 0) for mod, c in counts.items() if mod.endswith(("layers.0", "layers.1")))
    full_attention = b * 4 * shape.layers * shape.heads * shape.head_dim * p * p
    ours = m.prefill_flops(shape, b, p)
    causal = b * m.attention_flops(shape, 0, p)
    assert attention_counted == full_attention  # eager attention: QK^T and AV over all P x P pairs
    assert counts["Global"]["aten.mm"] == ours - causal  # every linear layer (the rotary's tiny bmm is no weight)
    assert causal == b * 2 * shape.layers * shape.heads * shape.head_dim * p * (p + 1)


class Bigram:
    """A model whose logits at a position depend on that position's token only: a table lookup."""

    def __init__(self, table):
        self.table = table

    def parameters(self):
        return iter([self.table])

    def __call__(self, input_ids):
        class Out:
            logits = self.table[input_ids]

        return Out()


def test_perplexity_equals_a_hand_computation():
    import torch

    from accelbench.scenarios.generate.perplexity import perplexity, windows

    torch.manual_seed(0)
    table = torch.randn(5, 5)
    ids = torch.tensor([0, 3, 1, 4, 4, 2, 0, 1, 3, 2, 2])  # 11 tokens, windows of 4: [0,4) [4,8) [8,11)
    assert windows(11, 4) == [(0, 4), (4, 8), (8, 11)]
    logp = torch.log_softmax(table, dim=-1)
    nll = 0.0
    count = 0
    for a, b in windows(11, 4):
        for i in range(a + 1, b):  # each token scored from the previous one, inside its window
            nll -= logp[ids[i - 1], ids[i]].item()
            count += 1
    got = perplexity(Bigram(table), ids, window=4, batch_size=2, device="cpu")
    assert got.tokens == count == 8
    assert got.nll_sum == pytest.approx(nll, rel=1e-6)
    assert got.perplexity == pytest.approx(math.exp(nll / count), rel=1e-6)
    with pytest.raises(ValueError):
        windows(11, 1)


def test_cheapest_precision_within_one_percent_of_the_reference_perplexity():
    from accelbench.scenarios.generate.quality import cheapest_meeting_perplexity, quality_line

    rows = [
        {
            "model": "m",
            "precision": "bf16",
            "mode": "static-cache",
            "batch_size": 1,
            "status": "ok",
            "perplexity": 10.0,
            "cost_per_1000_samples_usd": 0.010,
        },
        {
            "model": "m",
            "precision": "int8-weight-only",
            "mode": "static-cache",
            "batch_size": 1,
            "status": "ok",
            "perplexity": 10.09,
            "cost_per_1000_samples_usd": 0.007,
        },
        {
            "model": "m",
            "precision": "fp8-weight-only",
            "mode": "static-cache",
            "batch_size": 1,
            "status": "ok",
            "perplexity": 10.2,
            "cost_per_1000_samples_usd": 0.006,
        },  # cheaper, but 2 % worse: misses
        {
            "model": "m",
            "precision": "bf16",
            "mode": "static-cache",
            "batch_size": 2,
            "status": "error",
            "perplexity": None,
        },
    ]
    got = cheapest_meeting_perplexity(rows)
    assert len(got) == 1
    best = got[0]
    assert (best["reference"], best["reference_perplexity"]) == ("bf16", 10.0)
    assert best["precision"] == "int8-weight-only" and best["missed"] == ["fp8-weight-only"]
    assert "int8-weight-only" in quality_line(best) and "above it: fp8-weight-only" in quality_line(best)
    assert cheapest_meeting_perplexity([{"model": "x", "precision": "bf16", "status": "ok"}]) == []


def test_ttft_floor_is_the_prefills_roofline_time_under_the_measured_ceilings():
    """A prefill of batch 2 x 4 tokens of SHAPE: 2 x (2 x 1000 x 4 + 2 x 500 + 4 x 2 x 4 x 8 x (1 + 2 + 3 + 4))
    = 23,120 FLOPs and 4000 + 2 x 4 x 128 = 5,024 bytes. Memory-bound under 1 MFLOP/s and 100 kB/s (50.24 ms), compute-
    bound when the bandwidth is 1 MB/s (23.12 ms); the median TTFT over the floor; no floor without a ceiling."""
    from accelbench.backends.lm_timing import Generation
    from accelbench.scenarios.generate.measure import Ceilings, generation_columns

    gens = [Generation(ttft_s=t, itl_s=(0.01,), e2e_s=t + 0.01, tokens=None) for t in (0.1, 0.3, 0.2)]

    def floor(**ceilings):
        rec, _ = generation_columns(
            gens, SHAPE, batch_size=2, prompt_len=4, new_tokens=2, ceilings=Ceilings(**ceilings)
        )
        return rec

    slow_memory = floor(flops_per_s=1e6, dram_bytes_per_s=1e5)
    assert slow_memory["prefill_flops"] == 23_120 and slow_memory["prefill_min_bytes"] == 5_024
    assert slow_memory["ttft_floor_ms"] == pytest.approx(50.24)
    assert slow_memory["ttft_over_floor"] == pytest.approx(200 / 50.24)  # the median TTFT, 200 ms
    fast_memory = floor(flops_per_s=1e6, dram_bytes_per_s=1e6)
    assert fast_memory["ttft_floor_ms"] == pytest.approx(23.12)
    assert fast_memory["ttft_over_floor"] == pytest.approx(200 / 23.12)
    no_roof = floor(dram_bytes_per_s=1e6)
    assert no_roof["ttft_floor_ms"] is None and no_roof["ttft_over_floor"] is None


def test_a_compiling_engines_first_generation_gives_each_steps_compile_time():
    from accelbench.backends.engine import Capabilities
    from accelbench.backends.lm_timing import Generation
    from accelbench.scenarios.generate.measure import compile_columns

    first = Generation(ttft_s=12.5, itl_s=(7.25, 0.01, 0.01), e2e_s=19.9, tokens=None)
    assert compile_columns(first, Capabilities(compiles=True)) == {
        "compile_s": 19.9,
        "compile_prefill_s": 12.5,
        "compile_decode_s": 7.25,
    }
    assert set(compile_columns(first, Capabilities()).values()) == {None}
