"""The fused engine's decode attention over grouped KV heads: the same logits as the plain model, every choice."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from accelbench.backends import lm_fuse as fuse  # noqa: E402


def _decode_logits(model, prompts, steps: int):
    """The prefill and ``steps`` greedy decode steps over a StaticCache: the decode steps' logits ``(B, steps, V)``."""
    p = prompts.shape[1]
    cache = transformers.StaticCache(config=model.config, max_cache_len=p + steps)
    arg = "cache" if "cache" in __import__("inspect").signature(type(model).forward).parameters else "past_key_values"
    pos = torch.arange(p + steps)
    out = []
    with torch.no_grad():
        logits = model(
            prompts, cache_position=pos[:p], position_ids=pos[None, :p], use_cache=True, **{arg: cache}
        ).logits
        token = logits[:, -1:].argmax(-1)
        for i in range(steps):
            at = pos[p + i : p + i + 1]
            logits = model(token, cache_position=at, position_ids=at[None], use_cache=True, **{arg: cache}).logits
            out.append(logits)
            token = logits[:, -1:].argmax(-1)
    return torch.cat(out, 1)


@pytest.mark.parametrize("choice", ["gqa", "pack"])
def test_decode_attention_matches_the_plain_model(monkeypatch, choice):
    config = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,  # 4 query heads a KV head
        max_position_embeddings=128,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    plain = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    fused = copy.deepcopy(plain)
    assert fuse.fuse_projections(fused, decode_attention=choice) == 2
    calls = []
    attend = fuse._decode_attention
    monkeypatch.setattr(fuse, "_decode_attention", lambda *a: calls.append(a[0]) or attend(*a))
    prompts = torch.randint(0, 300, (3, 9))
    want, got = _decode_logits(plain, prompts, 5), _decode_logits(fused, prompts, 5)
    assert calls == [choice] * 5 * 2  # every decode step of every layer ran accelbench's attention
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)


def test_an_unknown_decode_attention_is_refused():
    config = transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4
    )
    model = transformers.AutoModelForCausalLM.from_config(config)
    with pytest.raises(ValueError, match="gqa, pack, transformers"):
        fuse.fuse_projections(model, decode_attention="flash")
