"""Tensor parallelism on CPUs: the layout's arithmetic by hand, and the bundled tiny model split over two gloo ranks
generating the same greedy tokens as the whole model in one process (a real check: every layer's partial sums are
all-reduced, every rank's KV cache holds its own heads)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env

from accelbench.core.errors import ConfigError
from accelbench.core.parallel_dims import ParallelDims

TINY = "hf:tiny-shakespeare"  # 4 heads, 2 key-value heads, a tied LM head


def test_parallel_dims_world_label_and_strategies():
    assert ParallelDims().world == 1 and ParallelDims().label == "" and ParallelDims().tp_degree == 1
    assert ParallelDims(dp=2, tp=4).world == 8 and ParallelDims(dp=2, tp=4).label == "dp=2,tp=4"
    assert ParallelDims.of("fsdp", 4) == ParallelDims(dp_shard=4) and ParallelDims.of("fsdp", 4).label == "dp_shard=4"
    assert ParallelDims.of("ddp", 1).label == "dp=1"  # DDP over one rank: the scaling curve's 1-rank point
    assert ParallelDims.of("tp", 2).tp_degree == 2
    with pytest.raises(ValueError, match="use one of ddp, fsdp, tp"):
        ParallelDims.of("pp", 2)
    with pytest.raises(ValueError, match="0 \\(unused\\) or more"):
        ParallelDims(tp=-1)
    with pytest.raises(ConfigError, match="4 ranks \\(tp=4\\)"):
        ParallelDims(tp=4).check_world(2)


def test_tp_must_divide_the_query_and_key_value_heads():
    assert ParallelDims(tp=2).tp_reason(4, 2) is None
    assert "divide the attention heads (4) and key-value heads (2)" in ParallelDims(tp=4).tp_reason(4, 2)
    assert ParallelDims(tp=3).tp_reason(64, 8) is not None and ParallelDims(tp=8).tp_reason(64, 8) is None


def _generate(tmp_path: Path, ranks: int) -> dict:
    out = tmp_path / f"tp{ranks}.json"
    script = Path(__file__).with_name("tp_ranks.py")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    p = subprocess.run([*argv, str(script), str(out), TINY], capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


def _whole_model_tokens() -> list:
    """The same generation as ``tp_ranks.py``'s, of the model loaded whole in this process."""
    import torch

    from accelbench.backends.lm_loop import StaticLoop
    from accelbench.models.lm_load import load_lm

    lm = load_lm(TINY, torch.device("cpu"), torch.float32, 0)
    prompts = torch.randint(0, lm.info.vocab_size, (2, 16), generator=torch.Generator().manual_seed(0))
    loop = StaticLoop(lm.module, 2, 16, 8, torch.device("cpu"))
    with torch.no_grad():
        tokens = [loop.prefill(prompts)]
        for i in range(7):
            tokens.append(loop.decode(tokens[-1], i))
    return torch.cat(tokens, 1).tolist()


def test_two_gloo_ranks_generate_the_whole_models_greedy_tokens(tmp_path):
    whole, two = _whole_model_tokens(), _generate(tmp_path, 2)
    assert two["tp_degree"] == 2 and two["q_local"] == [96, 192]  # 2 of 4 heads of 48 a rank
    assert two["kv_heads"] == 1  # the static cache holds this rank's key-value head (1 of 2)
    assert not two["tp_sharded_head"]  # tied to the embedding: replicated
    assert len(whole) == 2 and len(whole[0]) == 8  # batch 2, 8 new tokens
    assert two["tokens"][0] == two["tokens"][1] == whole
