"""Tensor parallelism on CPUs: the layout's arithmetic by hand, and the bundled tiny model split over two gloo ranks
generating the same greedy tokens as the whole model in one process (a real check: every layer's partial sums are
all-reduced, every rank's KV cache holds its own heads)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, run_cli
from tp_ranks import greedy, prompts_of, quantized_run, random_run

from accelbench.core.errors import OK, ConfigError
from accelbench.core.parallel_dims import ParallelDims
from accelbench.store import Store

TINY = "hf:tiny-shakespeare"  # 4 heads, 2 key-value heads, a tied LM head
UNTIED = "helpers:tiny_untied_llama"  # 2 layers, an untied LM head (split over the vocabulary)


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
    assert ParallelDims.parse("tp", 4) == ParallelDims(tp=4) == ParallelDims.parse(ParallelDims(tp=4).label)
    assert ParallelDims.parse("dp=2,tp=4") == ParallelDims(dp=2, tp=4)
    for bad in ("tp", "tp=0", "tp=x", "pp=2", "tp=2,tp=2"):  # a bare name needs the job's world size
        with pytest.raises(ConfigError, match="invalid parallel"):
            ParallelDims.parse(bad)
    with pytest.raises(ConfigError, match="4 ranks \\(tp=4\\)"):
        ParallelDims(tp=4).check_world(2)


def test_tp_must_divide_the_query_and_key_value_heads():
    assert ParallelDims(tp=2).tp_reason(4, 2) is None
    assert "divide the attention heads (4) and key-value heads (2)" in ParallelDims(tp=4).tp_reason(4, 2)
    assert ParallelDims(tp=3).tp_reason(64, 8) is not None and ParallelDims(tp=8).tp_reason(64, 8) is None


def _generate(tmp_path: Path, ranks: int, name: str = TINY, *extra: str) -> dict:
    out = tmp_path / f"tp{ranks}.json"
    script = Path(__file__).with_name("tp_ranks.py")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}"]
    p = subprocess.run(
        [*argv, str(script), str(out), name, *extra], capture_output=True, text=True, env=cli_env(), timeout=300
    )
    # a failing rank's traceback, not the warnings every rank prints before it
    said = [ln for ln in p.stderr.splitlines() if "Warning" not in ln and ln.strip() != "return inner()"]
    assert p.returncode == 0, "\n".join(said)[-6000:]
    return json.loads(out.read_text())


def _whole_model_tokens(name: str = TINY) -> list:
    """The same generation as ``tp_ranks.py``'s, of the model loaded whole in this process."""
    import torch

    from accelbench.models.lm_load import load_lm

    lm = load_lm(name, torch.device("cpu"), torch.float32, 0)
    return greedy(lm.module, prompts_of(lm))


WEIGHT_ONLY = ("int8-weight-only", "fp8-weight-only")


@pytest.fixture(scope="module")
def split_tiny(tmp_path_factory) -> dict:
    """The tiny model's generation on two gloo ranks (``tp_ranks.py``, eager), then in the same processes its
    generations in the weight-only precisions; shared by the tests that read it."""
    return _generate(tmp_path_factory.mktemp("tp"), 2, TINY, "eager", *WEIGHT_ONLY, "fused", *RANDOM)


RANDOM = ("random:float32", "random:int8-weight-only")


@pytest.mark.parametrize("precision", RANDOM)
def test_random_weights_drawn_on_shards_are_the_whole_models(split_tiny, precision):
    """Random weights drawn on each rank's shards from the meta device (every split of an architecture's random
    weights, a 70B shape's on GPUs), quantized a decoder layer at a time where the precision quantizes: each shard is
    its slice of the whole tensor drawn the same way, so the split generates the whole model's greedy tokens, and
    its logits are the whole model's: in float32 to the sums' order (measured 5e-7 of the largest logit, 1.1), in
    int8 to the row-parallel shards' own scales (1 %). Shards drawn apart, as before, differ by the logits' size; a
    random model's greedy tokens repeat one token, so the logits are the check that counts."""
    whole, two = random_run(TINY, precision.split(":")[1]), split_tiny[precision]
    assert len(two["tokens"]) == 2 and two["tokens"] == whole["tokens"]
    apart = max(abs(a - b) for x, y in zip(whole["logits"], two["logits"]) for a, b in zip(x, y))
    spread = max(abs(a) for x in whole["logits"] for a in x)
    assert apart <= (1e-5 if precision.endswith("float32") else 0.05) * spread, (apart, spread)


def test_fused_projections_on_shards_generate_the_whole_models_greedy_tokens(split_tiny):
    """static-compile-fused's fusion on two gloo ranks: each fuses its own q/k/v shards (2 query heads and 1
    key-value head of 48: 96 + 48 + 48 rows) and gate/up shards after the split; the greedy tokens are the whole
    model's and the parameters still count the whole model's."""
    import torch

    from accelbench.models.lm_load import load_lm

    fused = split_tiny["fused"]
    assert fused["qkv_local"] == [192, 192] and fused["fused_layers"] == 4
    assert fused["tokens"][0] == fused["tokens"][1] == _whole_model_tokens()
    whole = load_lm(TINY, torch.device("cpu"), torch.float32, 0).module
    assert fused["params"] == sum(p.numel() for p in whole.parameters())


def test_two_gloo_ranks_generate_the_whole_models_greedy_tokens(split_tiny):
    whole, two = _whole_model_tokens(), split_tiny
    assert two["tp_degree"] == 2 and two["q_local"] == [96, 192]  # 2 of 4 heads of 48 a rank
    assert two["kv_heads"] == 1  # the static cache holds this rank's key-value head (1 of 2)
    assert not two["tp_sharded_head"]  # tied to the embedding: replicated
    assert len(whole) == 2 and len(whole[0]) == 8  # batch 2, 8 new tokens
    assert two["tokens"][0] == two["tokens"][1] == whole


@pytest.mark.parametrize("precision", WEIGHT_ONLY)
def test_weight_only_shards_generate_the_whole_quantized_models_greedy_tokens(split_tiny, precision):
    """Each rank quantizes its own shards after the split (the generate scenario's load path): 8-bit weights of the
    shards' shapes on every rank, the split's all-reduces kept on the quantized linears, and the whole model's
    weight-only greedy tokens. A column-parallel shard's per-row scales are the whole weight's; the row-parallel
    o_proj's and down_proj's are taken over half the input dimension, so logits differ slightly from the whole
    model's."""
    whole, two = quantized_run(TINY, precision), split_tiny[precision]
    dtype = "torch.int8" if precision.startswith("int8") else "torch.float8_e4m3fn"
    expected = {  # (weight shape, scale shape) on each of the 2 ranks: hidden 192, MLP 512, 4 of 2 x 48 heads, vocab
        "self_attn.q_proj": ([96, 192], [96]),
        "self_attn.k_proj": ([48, 192], [48]),
        "self_attn.v_proj": ([48, 192], [48]),
        "self_attn.o_proj": ([192, 96], [192]),
        "mlp.gate_proj": ([256, 192], [256]),
        "mlp.up_proj": ([256, 192], [256]),
        "mlp.down_proj": ([192, 256], [192]),
        "lm_head": ([1024, 192], [1024]),  # tied to the embedding: replicated, quantized whole on each rank
    }
    for rank in two["ranks"]:
        assert rank["linears"] == {n: [dtype, w, s] for n, (w, s) in expected.items()}
    assert two["quant_layers"] == whole["quant_layers"] == 4 * 7 + 1
    assert two["ranks"][0]["tokens"] == two["ranks"][1]["tokens"] == two["tokens"]
    assert two["tokens"] == whole["tokens"]  # all 2 x 8 greedy tokens (seed 0): int8 and fp8 both
    # bf16 logits of the prompts' last tokens (|logit| < 10, std 2.3): measured at most 0.0625 apart (int8; fp8
    # 0.094), one to two bf16 steps at 8..16, from the row-parallel shards' own scales and the split sums' order;
    # 0.25 leaves room for other CPU kernels, far below what a lost all-reduce moves (half a layer's output)
    apart = max(abs(a - b) for x, y in zip(whole["logits"], two["logits"]) for a, b in zip(x, y))
    assert apart <= 0.25, apart


def test_a_split_step_performs_two_all_reduces_a_layer_and_nothing_else(split_tiny):
    """One eager decode step (and the prefill) of the tiny model (4 layers, tied head) on two gloo ranks: the
    row-parallel o_proj's and down_proj's all-reduces, no other collective (no weight or KV cache moved), and no
    DTensor left in the model (its shards are plain tensors)."""
    two = split_tiny
    assert two["decode_collectives"] == {"all_reduce": 2 * 4} == two["prefill_collectives"]
    assert two["dtensors"] == 0


def test_the_collective_share_counts_nccl_kernels_over_every_kernel():
    """The device share of a hand-made profile: two NCCL kernels among a GEMV, an elementwise kernel and a copy."""
    from accelbench.core.parallel import host_collective_share, kernel_collective_share

    kernels = [
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 30.0),
        ("void gemv2T_kernel_val<int, int, __nv_bfloat16, float, 128, 16, 4, 4, false, false>", 50.0),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>>", 5.0),
        ("Memcpy DtoD (Device -> Device)", 5.0),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", 10.0),
    ]
    assert kernel_collective_share(kernels) == 40.0 / 100.0
    assert kernel_collective_share(kernels[1:4]) == 0.0  # no collective: a share of 0, not None
    assert kernel_collective_share([]) is None and kernel_collective_share([("ncclKernel_x", 0.0)]) is None
    ops = [("_c10d_functional::all_reduce", 2.0), ("_c10d_functional::wait_tensor", 3.0), ("aten::mm", 4.0)]
    assert host_collective_share(ops, 10.0) == 0.5 and host_collective_share(ops, 0.0) is None


def test_a_decode_steps_kernels_are_summed_by_family_and_named_most_first():
    """Where a profiled step's device time goes: two steps of a hand-made profile (µs, the profiler's unit) give each
    kernel's and each family's time a step in ms, the NCCL kernels as their own family, and the wall time a step."""
    from accelbench.scenarios.generate.step_profile import kernel_breakdown

    gemv = "void gemv2T_kernel_val<int, int, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(int, float)"
    kernels = [
        (gemv, 500.0),
        (gemv, 500.0),
        ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 300.0),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_3", 60.0),
        ("Memcpy DtoD (Device -> Device)", 40.0),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu<float>>(int)",
            20.0,
        ),
    ]
    out = kernel_breakdown(kernels, 2, 1.2e-3)
    assert out["decode_kernel_ms"] == pytest.approx(0.71) and out["decode_profiled_step_ms"] == pytest.approx(0.6)
    assert (
        out["decode_kernel_families"]
        == "gemm 0.500 ms; collective 0.150 ms; norm 0.030 ms; copy 0.020 ms; activation 0.010 ms"
    )
    top = out["decode_top_kernels"].split("; ")
    assert top[0] == "gemv2T_kernel_val<int, int, __nv_bfloat16, float, 128, 16, 4, 4, false, false> 0.500 ms x1"
    assert top[1] == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL 0.150 ms x0.5" and len(top) == 5
    assert top[3] == "Memcpy DtoD 0.020 ms x0.5"  # the name without its arguments
    # the first parenthesis outside template brackets ends the name; 80 characters at most
    assert top[4] == "at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace):… 0.010 ms x0.5"
    assert kernel_breakdown([], 2, 1.0) == {}
    with pytest.raises(ValueError, match="steps 0"):
        kernel_breakdown(kernels, 0, 1.0)


def test_a_gpu_row_without_a_profiled_step_says_why():
    """A case of one GPU whose engine runs whole generations (``hf-generate``: no decode step of its own) gets a
    ``decode_profile_note`` in place of the breakdown; a CPU case gets neither (nothing is profiled there). The
    branch is taken before any device work, so the runner of the real engine on the CPU shows it."""
    import torch

    from accelbench.backends import engine
    from accelbench.backends.lm_timing import Runner, runner
    from accelbench.scenarios.generate.step_profile import decode_profile_columns

    hf = engine.get("hf-generate")
    run = runner(hf, None, 1, 8, 4, torch.device("cpu"))
    assert isinstance(run, Runner) and run.session is None
    out = decode_profile_columns(run, None, 4, torch.device("cuda"), split=False)
    assert out == {"decode_profile_note": "the engine runs whole generations: no decode step of its own to profile"}
    assert decode_profile_columns(run, None, 4, torch.device("cpu"), split=False) == {}


def test_a_gpu_profiles_share_leaves_out_host_ops_and_annotation_spans():
    """The CUDA reading of a profile's events: device activities only, not the GPU span of a ``record_function``
    (the profiler's step) that covers the kernels already counted, nor a host op's time."""
    from types import SimpleNamespace as Event

    from torch.autograd import DeviceType

    from accelbench.backends.lm_timing import DecodeProfile
    from accelbench.core.parallel import kernel_collective_share
    from accelbench.scenarios.generate.step_profile import _kernels

    def ev(name, t, device=DeviceType.CUDA, annotation=False):
        return Event(name=name, self_device_time_total=t, device_type=device, is_user_annotation=annotation)

    events = [
        ev("ProfilerStep#1", 100.0, annotation=True),
        ev("_c10d_functional::all_reduce", 50.0, device=DeviceType.CPU),
        ev("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", 20.0),
        ev("gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, float, false, true>", 60.0),
        ev("Memset (Device)", 0.0),
    ]
    share = kernel_collective_share(_kernels(DecodeProfile(events=events, wall_s=1e-4, steps=1)))
    assert share == 20.0 / 80.0


@pytest.fixture(scope="module")
def split_untied(tmp_path_factory) -> dict:
    """The untied tiny model split over two gloo ranks in one launch: eager (with its collectives), then its steps
    compiled, then loaded in int8 weight-only."""
    return _generate(tmp_path_factory.mktemp("tp-untied"), 2, UNTIED, "eager,default", "int8-weight-only")


@pytest.mark.slow
def test_compiled_steps_on_shards_generate_the_whole_models_greedy_tokens(split_untied):
    """static-compile's prefill and decode steps (``torch.compile``, fullgraph) over the split model's hooks: the
    row-parallel all-reduces and the vocabulary-split head's gather (an untied head: every hook a split has; the tied
    bundled model's eager split is checked above)."""
    compiled = split_untied["default"]
    assert compiled["tokens"][0] == compiled["tokens"][1] == _whole_model_tokens(UNTIED)


@pytest.mark.slow
def test_an_untied_lm_head_is_split_over_the_vocabulary_and_keeps_the_tokens(split_untied):
    whole, two = _whole_model_tokens(UNTIED), split_untied
    assert two["tp_sharded_head"] and two["q_local"] == [64, 128]
    assert two["tokens"][0] == two["tokens"][1] == whole
    # two all-reduces a layer (2 layers) and the split head's logits gathered once
    assert two["decode_collectives"] == {"all_reduce": 4, "all_gather_into_tensor": 1} == two["prefill_collectives"]
    # int8 weight-only: each rank's half of the vocabulary's rows quantized, whole rows: the whole head's scales
    int8, whole_int8 = two["int8-weight-only"], quantized_run(UNTIED, "int8-weight-only")
    assert [r["linears"]["lm_head"] for r in int8["ranks"]] == [["torch.int8", [256, 128], [256]]] * 2
    # random weights give near-flat logits (std 0.23, top-two margins 0.04 and 0.08 at the prompts' ends): the
    # split's own row-parallel scales moved them at most 0.008 (two bf16 steps), enough to part the greedy tokens
    # at a later near-tie (11 of 16 agreed); the first tokens and the logits are what this model can check
    apart = max(abs(a - b) for x, y in zip(whole_int8["logits"], int8["logits"]) for a, b in zip(x, y))
    assert apart <= 0.03 and [t[0] for t in int8["tokens"]] == [t[0] for t in whole_int8["tokens"]], apart


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--parallel", "tp"], "--parallel tp applies with --gpus N"),
        (["--gpus", "2"], "generate --gpus N needs --parallel tp"),
        (["--gpus", "3", "--parallel", "tp"], "invalid gpus 3: allowed a number of GPUs that divides"),
        (["--gpus", "4", "--parallel", "tp"], "key-value heads (2)"),
        (["--gpus", "2", "--parallel", "pp"], "invalid parallel 'pp'"),
        (["--gpus", "2", "--parallel", "tp=4"], "invalid gpus 2: allowed 4 ranks (tp=4)"),
        (["--gpus", "2", "--parallel", "dp=2"], "tp=N: generate splits one copy of the model"),
    ],
)
def test_a_bad_split_is_one_line_and_exit_2(args, needle, tmp_path):
    p = run_cli("generate", "-m", TINY, "--device", "cpu", *args, "--db", str(tmp_path / "g.db"))
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "g.db").exists()  # refused before the store is created


def test_more_gpus_than_the_host_has_is_one_line_and_exit_2(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    from accelbench.launchers.torchrun import device_kind
    from accelbench.launchers.torchrun.job import DistOptions

    with pytest.raises(ConfigError, match="invalid gpus 2: allowed 1..1 \\(GPUs visible\\)"):
        device_kind(DistOptions(gpus=2, device="auto"))
    p = run_cli("generate", "-m", TINY, "--device", "cuda", "--gpus", "2", "--parallel", "tp", "--db", str(tmp_path))
    assert p.returncode == 2 and "invalid gpus 2" in p.stderr, p.stderr


def test_seventy_billion_parameters_on_one_gpu_are_refused_before_building(monkeypatch, tmp_path):
    """Llama-3.1-70B in bf16 on one 80 GB GPU: refused from its config (exit 2), naming the split that fits. On an
    H200's 149.6 GB free it is refused too (141 GB of weights and the margin), naming both what fits one GPU (an
    8-bit weight-only precision, drawn a layer at a time) and the split."""
    from accelbench import api, scenarios
    from accelbench.scenarios.generate import preflight

    monkeypatch.setattr(preflight, "available_bytes", lambda device: 80 * 10**9)
    spec = api.spec("generate", {"models": "hf:llama-3.1-70b", "precisions": "bf16", "device": "cpu"})
    with pytest.raises(preflight.DoesNotFitError, match="--gpus 2 --parallel tp would fit"):
        preflight.check_memory(scenarios.get("generate"), spec)
    monkeypatch.setattr(preflight, "available_bytes", lambda device: 149.6e9)
    with pytest.raises(preflight.DoesNotFitError) as refused:
        preflight.check_memory(scenarios.get("generate"), spec)
    said = str(refused.value)
    assert (
        "--precisions int8-weight-only or fp8-weight-only" in said
        and "would fit (from about 83.3 GB); --gpus 2 --parallel tp would fit" in said
    )
    split = api.spec(
        "generate", {"models": "hf:llama-3.1-70b", "precisions": "bf16", "device": "cpu", "parallel": "tp=2"}
    )
    preflight.check_memory(scenarios.get("generate"), split)  # about 78 GB a GPU: fits
    fp = preflight.footprint("hf:llama-3.1-70b")
    one = preflight.case_estimate(fp, scenarios.get("generate").cases(spec, "cpu")[0], spec)
    two = preflight.case_estimate(fp, scenarios.get("generate").cases(split, "cpu")[0], split)
    table = 128256 * 8192 * 2  # the replicated embedding table, bf16
    assert two.weights_bytes == (one.weights_bytes - table) // 2 + table and two.load_bytes == two.weights_bytes


@pytest.mark.slow
def test_a_split_generation_stores_one_row_with_per_gpu_columns(tmp_path):
    """``generate --gpus 2 --parallel tp`` on two gloo ranks: one row a case (rank 0's), the whole job's rates and
    bytes beside the per-GPU ones, the same perplexity as the whole model; report and results read it (the int8
    weight-only split: ``split_untied`` and the worker's tiny-model run)."""
    db = tmp_path / "g.db"
    args = ["generate", "-m", TINY, "-b", "2", "--prompt-lens", "16", "--new-tokens", "8", "--modes", "static-cache"]
    split = ["--gpus", "2", "--parallel", "tp", "--db", str(db)]
    p = run_cli(*args, "--repeats", "3", "--idle-s", "0", "--device", "cpu", *split)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (row,) = Store(db).records()
    assert row["status"] == OK and row["tp_degree"] == 2 and row["world_size"] == 2 and row["mesh"] == "tp=2"
    assert row["kv_cache_bytes_per_gpu"] * 2 == row["kv_cache_bytes"] == 2 * 24 * (2 * 4 * 2 * 48 * 4)
    assert row["weight_bytes_per_gpu"] * 2 == row["weight_bytes"]
    assert row["decode_tokens_per_s_per_gpu"] == pytest.approx(row["decode_tokens_per_s"] / 2)
    # host time in the all-reduces of 8 profiled decode steps over their wall time
    assert 0 < row["allreduce_share"] < 1 and row.get("allreduce_share_note") is None, row.get("allreduce_share_note")
    assert "profiler_st" not in p.stdout + p.stderr  # the profiler's back end (Kineto) prints nothing of its own
    whole = run_cli(*args, "--repeats", "3", "--idle-s", "0", "--device", "cpu", "--db", str(db))
    assert whole.returncode == 0
    one = [r for r in Store(db).records() if r["tp_degree"] == 1]
    assert len(one) == 1 and one[0]["perplexity"] == pytest.approx(row["perplexity"], rel=1e-5)
    assert one[0]["allreduce_share"] is None  # nothing to share on one device
    assert one[0].get("decode_kernel_ms") is None and row.get("decode_kernel_ms") is None  # no kernels on a CPU
    shown = run_cli("results", "--db", str(db), "--run", "1")
    assert shown.returncode == 0 and "static-cache" in shown.stdout
    # the report sets the two runs' degrees of the case side by side: TP efficiency and TPOT speed-up against TP 1
    from accelbench.report.document import build, render_html, render_markdown
    from accelbench.report.generate import tp_rows
    from accelbench.report.views import view

    assert not [s for s in build(Store(db), run_ids=[1])["sections"] if s["id"].startswith("tensor-parallel")]
    doc = build(Store(db), run_ids=[1, 2])
    (section,) = [s for s in doc["sections"] if s["id"].startswith("tensor-parallel")]
    base, split = tp_rows(Store(db).records())
    assert (base["tp_degree"], base["tp_efficiency"], base["tpot_speedup"]) == (1, 1.0, 1.0)
    assert split["tp_efficiency"] == (row["decode_tokens_per_s"] / 2) / one[0]["decode_tokens_per_s"]
    assert split["tpot_speedup"] == one[0]["tpot_p50_ms"] / row["tpot_p50_ms"]
    shown_as = {key: fmt for _, key, fmt in view("tensor-parallel")}
    table = section["blocks"][0]
    assert table["title"] == "Tensor parallelism" and len(table["rows"]) == 2
    efficiency = table["rows"][1][table["headers"].index("TP efficiency")]
    assert efficiency == shown_as["tp_efficiency"](split["tp_efficiency"]) and efficiency in render_html(doc)
    assert "the case's smallest degree" in render_markdown(doc)  # text, not HTML entities, in markdown
    shares = [r[table["headers"].index("All-reduce share")] for r in table["rows"]]
    assert shares[1] == shown_as["allreduce_share"](row["allreduce_share"]) and shares[0] != shares[1]
    # the case's verdict line: priced (the CPU's price) and faster split, or not
    assert any(n.startswith(f"{TINY} fp32 static-cache, batch 2, prompt 16: ") for n in table["notes"]), table["notes"]
    assert section["blocks"][1]["type"] == "charts"


def test_compare_tells_a_split_generation_from_one_on_one_gpu():
    """A row of ``generate --gpus 2 --parallel tp`` matches only rows of the same split, and its label says so."""
    from accelbench.core.compare import case_label, match_key

    row = {"model": TINY, "batch_size": 1, "precision": "bf16", "mode": "static-cache", "prompt_len": 16}
    split = {**row, "world_size": 2, "tp_degree": 2, "workload": "generate"}
    one = {**row, "tp_degree": 1, "workload": "generate"}
    assert match_key(split) != match_key(one)
    assert case_label(match_key(split)).endswith("prompt=16 tp=2 generate")
    assert "tp=" not in case_label(match_key(one))


def test_the_tp_verdict_names_the_cheapest_degree_at_each_tpot_target_and_the_lowest_tpot():
    """A line a case: the cost/TPOT frontier cheapest first (each next degree is the cheapest under the TPOT of the
    one before; a degree dearer and slower than another is not named), then the lowest TPOT p50 where the frontier
    does not end at it; a case without costs names its TPOT only."""
    from accelbench.report.generate import tp_verdicts

    case = {"model": "hf:llama-3.1-70b", "precision": "bf16", "mode": "static-compile", "workload": "generate"}
    case |= {"batch_size": 1, "prompt_len": 128, "new_tokens": 64, "device_name": "NVIDIA H200"}
    two = {**case, "tp_degree": 2, "tpot_p50_ms": 23.3, "cost_per_1000_samples_usd": 0.1034}
    four = {**case, "tp_degree": 4, "tpot_p50_ms": 13.1, "cost_per_1000_samples_usd": 0.1162}
    eight = {**case, "tp_degree": 8, "tpot_p50_ms": 14.0, "cost_per_1000_samples_usd": 0.2}  # dearer and slower
    small = {**case, "model": "hf:llama-3.1-8b", "tp_degree": 1, "tpot_p50_ms": 4.7}
    mixed = {**case, "batch_size": 16, "tp_degree": 2, "tpot_p50_ms": 30.0, "cost_per_1000_samples_usd": 0.01}
    lines = tp_verdicts(
        [two, four, eight, small, {**small, "tp_degree": 2, "tpot_p50_ms": 3.1}, mixed]
        + [{**mixed, "tp_degree": 4, "tpot_p50_ms": 20.0, "cost_per_1000_samples_usd": None}]
    )
    assert lines == [
        "hf:llama-3.1-70b bf16 static-compile, batch 1, prompt 128: cheapest at TP 2 ($103.40 per million output "
        "tokens, TPOT 23.30 ms); under a TPOT of 23.30 ms, TP 4 ($116.20).",
        "hf:llama-3.1-8b bf16 static-compile, batch 1, prompt 128: lowest TPOT at TP 2 (3.10 ms).",
        "hf:llama-3.1-70b bf16 static-compile, batch 16, prompt 128: cheapest at TP 2 ($10.00 per million output "
        "tokens, TPOT 30.00 ms); lowest TPOT at TP 4 (20.00 ms).",
    ]


def test_the_tp_verdict_takes_a_configurations_latest_measurement_and_names_a_flagged_one():
    """A degree measured twice counts by the measurement that started last, not by the run imported last; a row
    whose measurement was flagged says so beside its figures."""
    from accelbench.report.generate import tp_verdicts

    case = {"model": "hf:llama-3.1-70b", "precision": "fp8-weight-only", "mode": "static-compile-fused"}
    case |= {"workload": "generate", "batch_size": 1, "prompt_len": 128, "new_tokens": 64}
    newer = {**case, "tp_degree": 1, "tpot_p50_ms": 20.07, "cost_per_1000_samples_usd": 0.04552}
    older = {**newer, "tpot_p50_ms": 20.48, "cost_per_1000_samples_usd": 0.04649, "validity": "throttled"}
    split = {**case, "tp_degree": 2, "tpot_p50_ms": 14.06, "cost_per_1000_samples_usd": 0.0638}
    newer |= {"run_id": 1, "started_at": 2000.0, "validity": "ok"}
    older |= {"run_id": 5, "started_at": 1000.0}  # measured first, imported last
    split |= {"run_id": 3, "started_at": 1500.0, "validity": "throttled,clock-variation"}
    (line,) = tp_verdicts([newer, older, split])
    assert line == (
        "hf:llama-3.1-70b fp8-weight-only static-compile-fused, batch 1, prompt 128: cheapest at TP 1 ($45.52 per "
        "million output tokens, TPOT 20.07 ms); under a TPOT of 20.07 ms, TP 2 ($63.80, flagged: "
        "throttled,clock-variation)."
    )


def test_a_deployment_in_several_precisions_names_the_cheapest_gpus_and_precision_at_each_tpot_target():
    """One H200 in fp8 weight-only against two and four in bf16 (the same model, batch, prompt and device): the rows
    of a deployment measured at more than one degree are the section's, TP efficiency only where a precision ran at
    two degrees; a line over every degree and precision names the frontier, then the named rows' perplexity or that
    it was not measured. A deployment at one degree only is not the section's."""
    from accelbench.report.generate import tp_rows, tp_verdicts

    case = {"model": "hf:llama-3.1-70b", "workload": "generate", "status": OK, "mode": "static-compile"}
    case |= {"batch_size": 1, "prompt_len": 128, "new_tokens": 64, "device_name": "NVIDIA H200"}
    fp8 = {**case, "precision": "fp8-weight-only", "tp_degree": 1, "tpot_p50_ms": 20.38, "decode_tokens_per_s": 49.1}
    fp8 |= {"cost_per_1000_samples_usd": 0.04743, "perplexity": None}
    bf16 = {**case, "precision": "bf16", "tp_degree": 2, "tpot_p50_ms": 23.3, "decode_tokens_per_s": 42.9}
    bf16 |= {"cost_per_1000_samples_usd": 0.1034, "perplexity": 5.214}
    four = {
        **bf16,
        "tp_degree": 4,
        "tpot_p50_ms": 13.1,
        "decode_tokens_per_s": 76.3,
        "cost_per_1000_samples_usd": 0.1162,
    }
    alone = {**fp8, "batch_size": 16}  # batch 16 measured at TP 1 only
    rows = tp_rows([fp8, bf16, four, alone])
    assert [(r["precision"], r["tp_degree"]) for r in rows] == [("bf16", 2), ("bf16", 4), ("fp8-weight-only", 1)]
    assert rows[2]["tp_efficiency"] is None and rows[1]["tp_efficiency"] == pytest.approx(76.3 / 4 / (42.9 / 2))
    assert tp_verdicts(rows) == [
        "hf:llama-3.1-70b bf16 static-compile, batch 1, prompt 128: cheapest at TP 2 ($103.40 per million output "
        "tokens, TPOT 23.30 ms); under a TPOT of 23.30 ms, TP 4 ($116.20).",
        "hf:llama-3.1-70b, batch 1, prompt 128, any precision and engine: cheapest at TP 1 fp8-weight-only "
        "static-compile ($47.43 per million output tokens, TPOT 20.38 ms); under a TPOT of 20.38 ms, TP 4 bf16 "
        "static-compile ($116.20). Perplexity: bf16 5.214. Perplexity not measured for fp8-weight-only.",
    ]
    # the same deployment measured again in a later run: its latest measurement is the one named, once
    again = {**fp8, "run_id": 7, "tpot_p50_ms": 20.48, "cost_per_1000_samples_usd": 0.04649}
    earlier = [{**r, "run_id": 3} for r in (fp8, bf16, four)]
    assert tp_verdicts(tp_rows([*earlier, again]))[1].startswith(
        "hf:llama-3.1-70b, batch 1, prompt 128, any precision and engine: cheapest at TP 1 fp8-weight-only "
        "static-compile ($46.49 per million output tokens, TPOT 20.48 ms); under a TPOT of 20.48 ms, TP 4 bf16 "
    )


def test_compare_of_one_gpu_in_8_bits_against_two_in_bf16_says_what_it_left_and_the_ratio_per_gpu(tmp_path):
    """The committed H200 exports: the 70B on one GPU in int8 and fp8 weight-only (one run) against the bf16 split
    over two (another). Ignoring precision, engine and world size matches them; the run with two cases under one key
    says which was compared and which was not; the pair's notes give decode tokens/s per GPU and both costs."""
    from accelbench.core.compare import compare_runs
    from accelbench.core.rundata import load_run
    from accelbench.report.compare_table import notes
    from accelbench.store.imports import import_run

    results = Path(__file__).resolve().parents[1] / "benchmarks/results/tensor-parallel"
    store = Store(tmp_path / "tp.db")
    split = import_run(store, results / "h200x2-70b-tp2-compiled.json.gz")
    one = import_run(store, results / "h200-70b-tp1-8bit-b1.json.gz")
    c = compare_runs(load_run(store, split), load_run(store, one), ignore=("precision", "mode", "world_size"))
    assert len(c.cases) == 1 and len(c.collided) == 1
    assert c.collided[0].startswith("B has 2 cases of hf:llama-3.1-70b bs=1 prompt=128 new=64 generate once")
    assert "compared the first (precision=int8-weight-only" in c.collided[0]
    assert "not compared: precision=fp8-weight-only" in c.collided[0]
    rows = {
        r["tp_degree"] or 1: r
        for r in (*store.records(split), *store.records(one))
        if r["precision"] != "fp8-weight-only"
    }
    per_gpu = (rows[1]["decode_tokens_per_s"] / 1) / (rows[2]["decode_tokens_per_s"] / 2)
    assert f"decode tokens/s per GPU: B/A {per_gpu:.3f}x (A on 2 GPUs, B on 1)" in c.cases[0].notes
    cost = f"cost per million output tokens: A ${1000 * rows[2]['cost_per_1000_samples_usd']:.2f}, B $"
    assert any(n.startswith(cost) for n in c.cases[0].notes)
    assert f"warning: {c.collided[0]}" in notes(c)
    assert compare_runs(load_run(store, split), load_run(store, split)).collided == []


@pytest.mark.multigpu
def test_a_split_compiled_with_cuda_graphs_ends_after_its_last_case(tmp_path):
    """Two NCCL ranks whose split decode step is compiled with CUDA graphs (the all-reduces captured in them): the
    ranks hand the graphs back before leaving the group, so the command ends with its row stored. Before, NCCL's
    communicator destroy waited on the live graphs, and the command ran on until a timeout stopped it
    (pytorch/pytorch#115388)."""
    db = tmp_path / "g.db"
    args = ["generate", "-m", TINY, "-b", "1", "--prompt-lens", "16", "--new-tokens", "8", "--modes", "static-compile"]
    split = ["--device", "cuda", "--gpus", "2", "--parallel", "tp", "--db", str(db)]
    p = run_cli(*args, "--repeats", "1", "--idle-s", "0", "--no-perplexity", *split, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    (row,) = Store(db).records()
    assert row["status"] == OK and row["tp_degree"] == 2 and row["tpot_p50_ms"] > 0
    said = p.stdout + p.stderr  # the ranks' output comes through the launcher's stdout
    assert "still closing" not in said and "still running" not in said  # each rank left its group, none was stopped
