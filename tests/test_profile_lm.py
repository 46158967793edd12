"""`accelbench profile` of a language model's prefill, decode and training steps: on the CPU end to end with the
bundled trained model (analytic placement, stored rows, generate's counts, train's FLOP count), the kernel families of transformer steps from real kernel
names, bad combinations as one line; on a GPU under Nsight Compute (the device machine)."""

import json

import pytest
from conftest import run_cli

pytest.importorskip("transformers")

from accelbench.core.kernels import TRANSFORMER_FAMILIES, classify_transformer  # noqa: E402
from accelbench.store import Store  # noqa: E402


def _shape():
    """The bundled model's shape as the generate scenario counts it (fp32, the CPU's precision)."""
    import torch

    from accelbench.models.lm_load import load_lm
    from accelbench.models.lm_shape import shape_of

    return shape_of(load_lm("hf:tiny-shakespeare", torch.device("cpu"), torch.float32).module, torch.float32)


def test_prefill_and_decode_on_the_cpu_end_to_end(tmp_path):
    from accelbench.core import lm_analytic as metrics

    db, js = tmp_path / "p.db", tmp_path / "p.json"
    p = run_cli(
        "profile",
        "-m",
        "hf:tiny-shakespeare",
        "--step",
        "prefill,decode",
        "--prompt-len",
        "32",
        "-b",
        "2",
        "--ncu",
        "off",
        "--device",
        "cpu",
        "--timed-steps",
        "2",
        "--db",
        str(db),
        "--json",
        str(js),
        check=True,
    )
    rows = {r["step"]: r for r in Store(db).records() if r.get("workload") == "profile"}
    assert sorted(rows) == ["decode", "prefill"]
    pre, dec = rows["prefill"], rows["decode"]
    assert pre["status"] == dec["status"] == "ok" and pre["mode"] == "static-cache" and pre["precision"] == "fp32"
    assert pre["prompt_len"] == dec["prompt_len"] == 32 and dec["ncu_status"] == "skipped"
    shape = _shape()
    # generate's analytic counts for the same shape: a prefill of 2 x 32 tokens, one decode step at context 33
    assert pre["analytic_flops"] == metrics.prefill_flops(shape, 2, 32)
    assert pre["analytic_min_bytes"] == shape.weight_bytes + metrics.kv_cache_bytes(shape, 2, 32)
    assert dec["analytic_flops"] == metrics.mean_decode_flops(shape, 2, 32, 2) == metrics.decode_flops(shape, 2, 33)
    assert dec["analytic_min_bytes"] == metrics.mean_decode_bytes(shape, 2, 32, 2)
    assert dec["analytic_intensity_flop_per_byte"] < pre["analytic_intensity_flop_per_byte"]
    for r in (pre, dec):
        assert r["step_time_s"] > 0 and r["steps_timed"] == 2
        assert r["achieved_bytes_per_s"] == pytest.approx(r["analytic_min_bytes"] / r["step_time_s"])
        bound = "memory" if r["analytic_intensity_flop_per_byte"] < r["ridge_point_flop_per_byte"] else "compute"
        assert r["analytic_bound"] == bound
        assert f"{r['step']} is {bound}-bound: arithmetic intensity" in p.stdout  # from the numbers, not the name
    assert p.stdout.count("(analytic: the FLOP and byte counts of generate, no kernel counters)") == 2
    doc = json.loads(js.read_text())
    assert [r["step"] for r in doc["results"]] == ["prefill", "decode"]
    # random token ids, no image set: neither the spec nor a row claims one
    assert doc["spec"]["data"] is None and doc["spec"]["images"] is None and Store(db).run(1)["spec"]["data"] is None
    assert all(r.get("data") is None and r.get("images") is None for r in doc["results"])


def test_a_compiling_engines_prefill_is_profiled_compiled(tmp_path):
    """``--step prefill`` of ``static-compile`` profiles the compiled prefill generate times: its first call (the
    compile) is the row's ``compile_s``, and the repeated steps run the compiled graph (on the CPU, Inductor's C++)."""
    from accelbench.core import lm_analytic as metrics

    db = tmp_path / "c.db"
    args = ("-m", "hf:tiny-shakespeare", "--step", "prefill", "--prompt-len", "16", "-b", "1", "--ncu", "off")
    run_cli(
        "profile",
        *args,
        "--modes",
        "static-compile",
        "--device",
        "cpu",
        "--timed-steps",
        "2",
        "--db",
        str(db),
        check=True,
    )
    [row] = [r for r in Store(db).records() if r.get("workload") == "profile"]
    assert row["status"] == "ok" and row["mode"] == "static-compile" and row["step"] == "prefill"
    assert row["compile_s"] > 0 and row["steps_timed"] == 2 and row["step_time_s"] < row["compile_s"]
    assert row["analytic_flops"] == metrics.prefill_flops(_shape(), 1, 16)


def test_the_training_step_of_a_language_model_is_the_one_train_times(tmp_path):
    """``--step train -m hf:...``: the step ``accelbench train -m hf:...`` times (AdamW, next-token loss), its
    analytic FLOPs the MFU count train uses (torchtitan's ``6 N + 12 L H Q T`` a token) times the step's tokens."""
    from accelbench.models.lm_shape import meta_shape
    from accelbench.training import lm_maths

    db = tmp_path / "t.db"
    args = ["-m", "hf:tiny-shakespeare", "--step", "train", "--seq-len", "32", "-b", "2", "--ncu", "off"]
    run_cli(
        "profile", *args, "--device", "cpu", "--warmup-steps", "0", "--timed-steps", "1", "--db", str(db), check=True
    )
    (r,) = [r for r in Store(db).records() if r.get("workload") == "profile"]
    shape = meta_shape("hf:tiny-shakespeare")
    assert r["status"] == "ok" and r["step"] == "train" and r["mode"] == "eager" and r["precision"] == "fp32"
    assert r["seq_len"] == 32 and r["tokens_per_step"] == 2 * 32 and r["optimizer"] == "adamw"
    assert r["flops_per_token"] == lm_maths.flops_per_token(shape, 32) > 0
    assert r["analytic_flops"] == r["flops_per_token"] * 2 * 32
    assert r["analytic_forward_flops"] == pytest.approx(r["analytic_flops"] / 3)
    least = lm_maths.step_least_bytes(shape, batch_size=2, seq_len=32, param_bytes=4, activation_bytes=4)
    assert r["analytic_min_bytes"] == least and r["ncu_status"] == "skipped"
    assert r["steps_timed"] == 1 and r["achieved_flops_per_s"] == pytest.approx(r["analytic_flops"] / r["step_time_s"])
    assert r.get("data") is None and r["token_source"] == "random" and Store(db).run(1)["spec"]["data"] is None


@pytest.mark.parametrize("step", ["prefill", "decode", "train"])
def test_a_language_models_spec_records_no_image_data(step):
    """``profile -m hf:... --step decode`` ran on random token ids: its spec says no data and no image count (an
    image model's profile keeps its image set), and an image data set asked for is one line, not recorded."""
    from accelbench import api
    from accelbench.core.errors import ConfigError

    spec = api.spec("profile", {"models": "hf:tiny-shakespeare", "steps": step, "device": "cpu"})
    assert spec.data is None and spec.images is None and spec.to_dict()["data"] is None
    image = api.spec("profile", {"models": "cifar-resnet20", "batch_sizes": "8", "device": "cpu"})
    assert image.data == "cifar10-test" and image.images == 8
    for key, value in (("data", "cifar10-test"), ("images", 8)):
        with pytest.raises(ConfigError, match="none for a language model's steps"):
            api.spec("profile", {"models": "hf:tiny-shakespeare", "steps": step, "device": "cpu", key: value})


def test_a_training_steps_least_bytes_by_hand():
    """10 P + the int64 inputs and labels + twice the activations (Korthikanti's, the scores left on chip) and logits,
    by hand."""
    from accelbench.core.lm_analytic import Shape
    from accelbench.training.lm_maths import step_least_bytes

    shape = Shape(
        params=1000,
        embedding_params=100,
        tied_head=False,
        layers=2,
        heads=2,
        kv_heads=2,
        head_dim=4,
        hidden=8,
        vocab=50,
        matmul_params=0,
        lm_head_params=0,
        weight_bytes=0,
    )
    # 10 x 1000 x 4; 2 x 8 x 1 x 4; a layer 4 x 1 x 8 x 34 = 1,088 bytes in 16-bit, two layers (twice in fp32);
    # logits 1 x 4 x 50 x (2 + 4 + 4) = 2,000 (x (4 + 4 + 4) = 2,400 in fp32)
    assert step_least_bytes(shape, batch_size=1, seq_len=4, param_bytes=4, activation_bytes=2) == (
        40_000 + 64 + 2 * (2 * 1088 + 2000)
    )
    assert step_least_bytes(shape, batch_size=1, seq_len=4, param_bytes=4, activation_bytes=4) == (
        40_000 + 64 + 2 * (2 * 2176 + 2400)
    )


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["-m", "helpers:tiny_conv_net", "--step", "decode"],
            "invalid step 'decode': allowed inference, train for helpers:tiny_conv_net",
        ),
        (
            ["-m", "hf:tiny-shakespeare", "--step", "inference"],
            "invalid step 'inference': allowed prefill, decode or train for hf:tiny-shakespeare",
        ),
        (["-m", "hf:tiny-shakespeare", "--step", "prefill,train"], "not two kinds in one run"),
        (["-m", "hf:tiny-shakespeare", "--step", "train", "--seq-len", "100000"], "context"),
        (["-m", "hf:tiny-shakespeare", "--step", "train", "--mode", "static-cache"], "invalid mode 'static-cache'"),
        (["-m", "helpers:tiny_conv_net", "--step", "train", "--seq-len", "64"], "--seq-len applies to a language"),
        (["-m", "hf:tiny-shakespeare", "--step", "train", "--prompt-len", "64"], "--prompt-len applies to a language"),
        (["-m", "hf:tiny-shakespeare", "--step", "decode", "--mode", "hf-generate"], "invalid mode 'hf-generate'"),
        (["-m", "hf:tiny-shakespeare", "--step", "decode", "--prompt-len", "100000"], "context"),
    ],
)
def test_a_step_of_the_other_kind_of_model_is_one_line(tmp_path, args, needle):
    """An image model has no prefill or decode; a language model's forward pass without its cache is neither phase
    of a generation (what ``generate`` times), so ``inference`` of an hf: model is refused, not guessed; its training
    step takes train's backends and a sequence its context holds; a length flag of another step is refused."""
    p = run_cli("profile", *args, "--device", "cpu", "--ncu", "off", "--db", str(tmp_path / "x.db"))
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert p.returncode == 2 and len(lines) == 1 and needle in lines[0], p.stderr


@pytest.mark.parametrize(
    "name, family",
    [
        ("nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "gemm"),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
            "gemm",
        ),
        (
            "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, float, 128, 16, 4, 4, false, false, "
            "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const __nv_bfloat16>, "
            "cublasGemvTensorStridedBatched<const __nv_bfloat16>, cublasGemvTensorStridedBatched<__nv_bfloat16>, float>>(T13, T6, T6)",
            "gemm",
        ),
        (
            "void internal::gemvx::kernel<int, int, float, float, float, float, false, true, true, false, 7, false>(T13)",
            "gemm",
        ),
        (
            "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, true>(T5)",
            "gemm",
        ),
        ("triton_tem_fused_mm_7", "gemm"),
        (
            "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, "
            "Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t>>, false, true, false, false, true, true, false, false>"
            "(pytorch_flash::Flash_fwd_params)",
            "attention",
        ),
        (
            "void pytorch_flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<64, 64, 256, 4, false, false, "
            "cutlass::bfloat16_t>, true, false, false, false, true, true, false>(pytorch_flash::Flash_fwd_params)",
            "attention",
        ),
        (
            "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
            "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
            "attention",
        ),
        ("triton_red_fused__to_copy_add_embedding_mean_mul_pow_rsqrt_0", "norm"),
        ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_3", "norm"),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, "
            "float>, unsigned int, float, 4, 4>>(T3)",
            "norm",
        ),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::rsqrt_kernel_cuda(at::TensorIteratorBase &)::"
            "{lambda()#2}::operator ()() const::{lambda(float)#1}, std::array<char *, 2>>(int, T2, T3)",
            "norm",
        ),
        ("triton_poi_fused_add_cat_mul_neg_slice_2", "rotary"),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2>, "
            "unsigned int, 4, 64, 64>(T1 *, T2, int, T2)",
            "rotary",
        ),
        ("triton_poi_fused_mul_silu_5", "activation"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel(at::TensorIteratorBase &)::"
            "{lambda()#1}::operator ()() const::{lambda(c10::BFloat16)#1}, std::array<char *, 2>>(int, T2, T3)",
            "activation",
        ),
        ("triton_poi_fused_index_copy_4", "copy"),
        ("triton_poi_fused__to_copy_0", "copy"),
        (
            "void at::native::index_copy_kernel_impl<at::native::OpaqueType<2>>(at::TensorIterator &, long, long, long)",
            "copy",
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::"
            "{lambda()#3}::operator ()() const::{lambda(float)#1}, std::array<char *, 2>, 4>(int, T1, T2)",
            "copy",
        ),
        ("triton_poi_fused__to_copy_add_1", "elementwise"),
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
            "std::array<char *, 3>>(int, T2, T3)",
            "elementwise",
        ),
        ("triton_red_fused_argmax_12", "sampling"),
        (
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, "
            "long, 4, 4>>(T3)",
            "sampling",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(T3 *, const T2 *, int)",
            "sampling",
        ),
        (
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>"
            "(T1 *, const T1 *, const T3 *)",
            "other",
        ),
        ("triton_red_fused_sum_2", "other"),
        # seen in a compiled llama-3.2-1b decode step on an H200 (torch 2.11, ncu 2025.3.1)
        ("triton_red_fused__to_copy__unsafe_view_add_embedding_mean_mul_pow_rsqrt_10", "norm"),
        (
            "triton_poi_fused__to_copy__unsafe_view_add_arange_bmm_cat_cos_index_copy_mul_neg_sin_slice_transpose_2",
            "rotary",
        ),
        (
            "triton_poi_fused__scaled_dot_product_cudnn_attention__to_copy__unsafe_view_add_arange_bmm_cat_clone_mul_neg_4",
            "rotary",
        ),
        ("triton_poi_fused__unsafe_view_add_arange_index_copy_transpose_view_3", "copy"),
        ("triton_poi_fused__unsafe_view_mul_silu_8", "activation"),
        ("triton_red_fused__unsafe_view_argmax_select_16", "sampling"),
        (
            "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0",
            "attention",
        ),
        ("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_splitK_TNT", "gemm"),
        ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x32_8x5_tn_align1>(T1::Params)", "gemm"),
    ],
)
def test_transformer_kernel_families_from_real_names(name, family):
    assert family in TRANSFORMER_FAMILIES and classify_transformer(name) == family


def test_the_phase_line_follows_the_measured_intensity_not_the_phase_name():
    from accelbench.report.profile_table import phase_line

    row = {
        "step": "decode",
        "status": "ok",
        "ncu_status": "ok",
        "ncu_intensity_flop_per_byte": 400.0,
        "ridge_point_flop_per_byte": 295.0,
        "ceiling_dram_bytes_per_s": 3e12,
        "ceiling_flops_per_s": 8e14,
        "ceiling_name": "bf16",
        "ncu_kernels": 120,
        "family_gemm_time_share": 0.8,
        "family_gemm_achieved_flops_per_s": 4e14,
        "family_attention_time_share": 0.1,
    }
    assert phase_line(row).startswith(
        "decode is compute-bound: arithmetic intensity 400 FLOP/B at or above the ridge "
        "point 295 FLOP/B; 80 % of the step time in GEMM/GEMV at 50 % of the bf16 ceiling "
        "(120 kernels a step)"
    )
    low = {**row, "ncu_intensity_flop_per_byte": 1.5, "family_gemm_achieved_bytes_per_s": 2.4e12}
    assert "decode is memory-bound" in phase_line(low) and "at 80 % of the measured copy bandwidth" in phase_line(low)
    assert phase_line({**row, "step": "inference"}) is None


@pytest.mark.gpu
@pytest.mark.ncu
@pytest.mark.parametrize("mode", ["static-cache", "static-compile"])
def test_decode_of_llama_under_ncu_is_mostly_gemv(tmp_path, mode):
    """Decode of hf:llama-3.2-1b (random weights, bf16, batch 1, 512 cached positions) under Nsight Compute: the
    kernels fall in the transformer families, the GEMM/GEMV family holds the largest share of the step's time, and the
    step is placed memory-bound from its measured intensity (the compiled step's CUDA graph profiled node by node)."""
    js = tmp_path / "p.json"
    p = run_cli(
        "profile",
        "-m",
        "hf:llama-3.2-1b",
        "--step",
        "decode",
        "--prompt-len",
        "512",
        "-b",
        "1",
        "--precision",
        "bf16",
        "--mode",
        mode,
        "--ncu",
        "on",
        "--db",
        str(tmp_path / "p.db"),
        "--json",
        str(js),
        check=True,
    )
    rec = json.loads(js.read_text())["results"][0]
    assert rec["status"] == "ok" and rec["ncu_status"] == "ok", rec.get("ncu_error")
    families = {k["family"] for k in rec["kernels"]}
    assert families <= set(TRANSFORMER_FAMILIES) and {"gemm", "attention", "norm"} <= families
    shares = {f: rec[f"family_{f}_time_share"] for f in families}
    # on an H200 the eager step's ~830 kernels gave GEMM/GEMV 35 % (elementwise 25 %, copies 18 %), the compiled
    # step's ~330 gave 68 %: GEMV is the largest family in both, most of the step once the small kernels are fused
    assert max(shares, key=shares.get) == "gemm" and shares["gemm"] > (0.5 if mode == "static-compile" else 0.25)
    assert rec["ncu_intensity_flop_per_byte"] < rec["ridge_point_flop_per_byte"]
    assert "decode is memory-bound" in p.stdout and "of the step time in GEMM/GEMV" in p.stdout


def test_ncu_profiles_a_cuda_graph_node_by_node():
    """A compiled decode step is one CUDA graph: ncu must show its kernels one by one to group them in families."""
    from accelbench.scenarios.profile import ncu

    cmd = ncu.command("ncu", ncu.metric_list(None), "/tmp/x.csv", "{}", ncu.NVTX_RANGE)
    assert cmd[cmd.index("--graph-profiling") + 1] == "node"
    assert cmd[cmd.index("--target-processes") + 1] == "application-only"


def test_the_replay_note_says_when_ncus_kernel_sum_is_not_the_step():
    """The int8 decode step measured on an H200 (compiled-prefill study): 5.42 ms of kernels under ncu, 3.30 ms
    timed without; within 20 % there is no note; a sum well below the step is time outside the kernels."""
    from accelbench.report.profile_table import replay_note

    row = {"model": "hf:llama-3.1-8b", "step": "decode", "step_time_s": 0.0033018, "ncu_time_over_step": 1.6428}
    assert replay_note(row) == (
        "hf:llama-3.1-8b decode: ncu's kernels sum to 5.42 ms, 1.64x the step's 3.30 ms timed without ncu: ncu "
        "replays each kernel alone (caches flushed), so its times, the short kernels' most, are longer than in the "
        "step and their achieved rates read low"
    )
    assert replay_note({**row, "ncu_time_over_step": 1.09}) is None  # bf16's decode: 5.15 against 4.74 ms
    assert replay_note({**row, "ncu_time_over_step": 0.5}).endswith(
        "50 % of the step is outside its kernels (launch gaps, host work)"
    )
    assert replay_note({"step": "decode", "step_time_s": 0.003}) is None  # no ncu: nothing to compare


def test_the_report_of_the_h200_int8_decode_profile_says_ncus_replays_are_slower_than_the_step(tmp_path):
    """The committed export of the int8 decode step profiled on an H200 (stored before ``ncu_time_over_step``): its
    report section carries the replay note, the ratio taken from the row's two times."""
    from pathlib import Path

    from accelbench.report.sections import run_section
    from accelbench.store import Store

    export = Path(__file__).parents[1] / "benchmarks/results/compiled-prefill/h200-8b-ncu-decode-int8.json.gz"
    p = run_cli("import", str(export), "--db", str(tmp_path / "x.db"))
    assert p.returncode == 0, p.stderr
    with Store(tmp_path / "x.db") as st:
        blocks = run_section(st, st.run()["run_id"])["blocks"]
    notes = [b for b in blocks if b.get("title") == "ncu's kernel times against the step"]
    assert len(notes) == 1 and notes[0]["lines"][0].startswith(
        "hf:llama-3.1-8b decode: ncu's kernels sum to 5.42 ms, 1.64x the step's 3.30 ms timed without ncu"
    )
