"""The ncu CSV parser, kernel families and aggregation, replayed on real ncu CSVs from an H200."""

import csv
import gzip
import io
from pathlib import Path

import pytest

from accelbench.ceilings.measure import Ceilings
from accelbench.core.kernels import FAMILIES, KernelMetrics, by_family, classify, total
from accelbench.scenarios.profile import ncu, results

DATA = Path(__file__).parent / "data" / "ncu"
BF16 = "cifar-resnet20-inference-amp-bf16-bs8-eager"
FP32 = "cifar-resnet20-inference-fp32-bs8-eager"
TRAIN = "cifar-resnet20-train-amp-bf16-bs8-eager"
R50_FP32 = "resnet50-inference-fp32-bs32-eager"
CEIL = Ceilings(device_name="test GPU", matmul_flops_per_s={"fp32": 50e12, "bf16": 800e12}, dram_bytes_per_s=4e12)


def text(name):
    return gzip.open(DATA / f"{name}.csv.gz", "rt").read()


def plain_rows(t):
    """An independent reading of the same CSV: rows by header name, the units row dropped."""
    lines = t.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    rows = list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))
    return [r for r in rows if r["ID"]]


def num(cell):
    return float(cell.replace(",", ""))


@pytest.mark.parametrize("name", [BF16, FP32, TRAIN])
def test_parse_matches_an_independent_reading(name):
    t = text(name)
    prof = ncu.parse(t)
    rows = plain_rows(t)
    assert len(prof.kernels) == len(rows) > 50 and prof.missing == ()
    assert [k.name for k in prof.kernels] == [r["Kernel Name"] for r in rows]
    tot = total(prof.kernels)
    # time: ns in the CSV (units row), seconds in accelbench
    assert tot.time_s == pytest.approx(sum(num(r["gpu__time_duration.sum"]) for r in rows) * 1e-9)
    assert tot.dram_read_bytes == pytest.approx(sum(num(r["dram__bytes_read.sum"]) for r in rows))
    assert tot.dram_write_bytes == pytest.approx(sum(num(r["dram__bytes_write.sum"]) for r in rows))
    sass = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    fp32 = sum(
        num(r[sass.format("fadd")]) + num(r[sass.format("fmul")]) + 2 * num(r[sass.format("ffma")]) for r in rows
    )
    assert tot.flops_fp32 == pytest.approx(fp32)
    tensor = sum(num(r["sm__ops_path_tensor_src_bf16_dst_fp32.sum"]) for r in rows)
    assert tot.flops_tensor == pytest.approx(tensor)  # .avg/.min/.max columns are never summed in
    assert (tensor > 0) == ("bf16" in name)


def test_columns_are_found_by_name_not_position():
    t = text(BF16)
    lines = t.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"ID"'))
    table = list(csv.reader(lines[start:]))
    order = [0] + list(range(len(table[0]) - 1, 0, -1))  # "ID" stays first, every other column reversed
    out = io.StringIO()
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows([[row[i] for i in order] for row in table])
    assert out.getvalue().splitlines()[0].split(",")[1] != lines[start].split(",")[1]
    got, want = ncu.parse(out.getvalue()).kernels, ncu.parse(t).kernels
    assert len(got) == len(want) > 0
    assert [(k.name, k.time_s, k.dram_bytes, k.flops) for k in got] == [
        (k.name, k.time_s, k.dram_bytes, k.flops) for k in want
    ]


@pytest.mark.parametrize(
    "unit, scale",
    [
        ("ns", 1e-9),
        ("nsecond", 1e-9),
        ("usecond", 1e-6),
        ("us", 1e-6),
        ("msecond", 1e-3),
        ("second", 1.0),
        ("byte", 1.0),
        ("Kbyte", 1e3),
        ("Mbyte", 1e6),
        ("inst", 1.0),
        ("", 1.0),
    ],
)
def test_unit_scale(unit, scale):
    assert ncu.unit_scale(unit) == scale


def test_missing_metric_and_na_count_as_zero_and_are_listed():
    csv_text = (
        '"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum"\n'
        '"","","usecond","byte"\n'
        '"0","void copy_kernel(float*)","1.5","n/a"\n'
    )
    prof = ncu.parse(csv_text, metrics=(ncu.TIME, ncu.DRAM_READ, ncu.DRAM_WRITE))
    (k,) = prof.kernels
    assert k.time_s == pytest.approx(1.5e-6) and k.dram_bytes == 0.0 and k.family == "copy_transpose"
    assert set(prof.missing) == {ncu.DRAM_READ, ncu.DRAM_WRITE}
    assert k.intensity_flop_per_byte is None  # no DRAM traffic: undefined, not a division by zero


def test_no_table_is_a_one_line_error():
    with pytest.raises(ncu.NcuError, match="no ncu CSV table"):
        ncu.parse("==PROF== Disconnected from process 1\n")


@pytest.mark.parametrize(
    "output, rc, needle",
    [
        (
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters",
            1,
            "no permission to read the GPU performance counters (ERR_NVGPUCTRPERM)",
        ),
        ("==WARNING== No kernels were profiled.", 0, "ncu profiled no kernels"),
        (
            "accelbench target failed: UnknownModelError: unknown model 'x'\n==ERROR== The application returned an error code (3).",
            1,
            "the profiled step failed: UnknownModelError: unknown model 'x'",
        ),
        (
            "==ERROR== Failed to find metric sm__foo",
            1,
            "ncu exited with status 1: ==ERROR== Failed to find metric sm__foo",
        ),
        ("==PROF== Disconnected", 0, None),
    ],
)
def test_diagnose(output, rc, needle):
    got = ncu.diagnose(output, rc)
    assert got == needle if needle is None else (needle in got and "\n" not in got)


def test_tensor_family_is_one_family_on_gh100():
    # names as `ncu --query-metrics` listed them on the H200 (GH100)
    gh100 = {
        f"sm__ops_path_tensor_src_{s}"
        for s in (
            "bf16_dst_fp32",
            "fp16",
            "fp64",
            "fp8",
            "fp8_sparsity_off",
            "fp8_sparsity_on",
            "int1",
            "int8",
            "tf32_dst_fp32",
        )
    }
    gh100 |= {"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32", "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32"}
    assert ncu.tensor_family(frozenset(gh100)) == tuple(
        sorted(
            f"sm__ops_path_tensor_src_{s}" for s in ("bf16_dst_fp32", "fp16", "fp64", "fp8", "int8", "tf32_dst_fp32")
        )
    )
    # where per-destination splits exist, the per-source aggregate is left out
    split = {
        "sm__ops_path_tensor_src_fp16",
        "sm__ops_path_tensor_src_fp16_dst_fp16",
        "sm__ops_path_tensor_src_fp16_dst_fp32",
    }
    assert ncu.tensor_family(frozenset(split)) == (
        "sm__ops_path_tensor_src_fp16_dst_fp16",
        "sm__ops_path_tensor_src_fp16_dst_fp32",
    )
    assert ncu.tensor_source("sm__ops_path_tensor_src_bf16_dst_fp32.sum") == "bf16"


def test_command_limits_to_one_nvtx_range_at_native_clocks():
    cmd = ncu.command("ncu", ncu.metric_list(None), "/tmp/x.csv", "{}", "accelbench_step")
    s = " ".join(cmd)
    assert "--nvtx --nvtx-include accelbench_step/" in s and "--clock-control none" in s
    assert "--csv --page raw" in s and "-m accelbench.scenarios.profile.target {}" in s
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert metrics[:3] == [ncu.TIME, ncu.DRAM_READ, ncu.DRAM_WRITE] and len(metrics) == len(set(metrics))


@pytest.mark.parametrize(
    "name, family",
    [
        (
            "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(T1::Params)",
            "gemm_conv",
        ),
        ("nvjet_sm90_tst_64x384_64x3_1x2_h_bz_coopB_TNT", "gemm_conv"),
        (
            "void fft2d_r2c_32x32<float, 0, 1, 0>(float2 *, const T1 *, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
            "gemm_conv",
        ),
        ("void flip_filter<float, float>(T2 *, const T1 *, int, int, int, int)", "gemm_conv"),
        (
            "void at::batch_norm_transform_input_channels_last_kernel<c10::BFloat16, float, float, 4>(int)",
            "normalization",
        ),
        ("void cudnn::bn_fw_inf_1C11_kernel_NCHW<float, float, bool=1, int=1>(float, float)", "normalization"),
        ("void at::<unnamed>::max_pool_forward_nchw<float, int>(T2, const T1 *, long)", "reduction_pooling"),
        (
            "void at::reduce_kernel<512, 1, at::ReduceOp<float, at::MeanOps<float, float, float, float>, unsigned int>>(T3)",
            "reduction_pooling",
        ),
        (
            "void at::vectorized_elementwise_kernel<8, at::bfloat16_copy_kernel_cuda(at::TensorIteratorBase &)>(int, T2, T3)",
            "copy_transpose",
        ),
        (
            "void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true>(cudnn::ops::nchw2nhwc_params_t<float>)",
            "copy_transpose",
        ),
        (
            "void at::vectorized_elementwise_kernel<8, at::<unnamed>::launch_clamp_scalar(at::TensorIteratorBase &)>(int)",
            "elementwise",
        ),
        ("void at::native::multi_tensor_apply_kernel<at::native::TensorListMetadata<3>>(T1, T2)", "elementwise"),
        (
            "void nhwcAddPaddingKernel<__nv_bfloat16, __nv_bfloat16, float, 1, 0>(int, int, const T1 *, T2 *, cudnn::reduced_divisor)",
            "copy_transpose",
        ),
        ("some_new_kernel", "other"),
    ],
)
def test_classify(name, family):
    assert classify(name) == family


def test_every_real_kernel_gets_a_family_and_shares_add_up():
    for name in (BF16, FP32, TRAIN, R50_FP32):
        kernels = ncu.parse(text(name)).kernels
        fams = by_family(kernels)
        assert {f.name for f in fams} <= set(FAMILIES)
        assert sum(f.time_share for f in fams) == pytest.approx(1.0)
        assert sum(f.flops for f in fams) == pytest.approx(total(kernels).flops)
        assert sum(f.kernels for f in fams) == len(kernels)
        # tensor-core work only in GEMM/conv kernels (a capture may have none)
        assert all(k.family == "gemm_conv" for k in kernels if k.flops_tensor > 0)


def test_ncu_fields_exact_against_ceilings():
    kernels = ncu.parse(text(BF16)).kernels
    tot = total(kernels)
    f = results.ncu_fields(kernels, CEIL, "amp-bf16", analytic_flops=648_816_640.0)
    assert f["ncu_time_s"] == tot.time_s and f["ncu_flops"] == tot.flops and f["ncu_dram_bytes"] == tot.dram_bytes
    assert f["ncu_intensity_flop_per_byte"] == tot.flops / tot.dram_bytes
    assert f["ncu_ceiling_name"] == "bf16" and f["ncu_tensor_source"] == "bf16"
    ridge = 800e12 / 4e12
    assert f["ncu_bound"] == ("memory" if tot.flops / tot.dram_bytes < ridge else "compute")
    attainable = min(800e12, tot.flops / tot.dram_bytes * 4e12)
    assert f["ncu_roof_fraction"] == pytest.approx(tot.flops / tot.time_s / attainable)
    assert f["family_gemm_conv_ceiling_name"] == "bf16" and f["family_normalization_ceiling_name"] == "fp32"
    assert f["flops_agreement"] == pytest.approx(f["ncu_gemm_conv_flops"] / 648_816_640.0 - 1)
    assert f["ncu_zero_dram_kernels"] == sum(1 for k in kernels if k.dram_bytes == 0)


def test_kernel_without_dram_traffic():
    k = KernelMetrics(index=0, name="void gemm_kernel()", family="gemm_conv", time_s=1e-6, flops_fp32=1e6)
    row = results.kernel_row(k, CEIL)
    assert row["intensity_flop_per_byte"] is None and row["bound"] == "compute"
    assert row["achieved_bytes_per_s"] == 0.0 and row["achieved_flops_per_s"] == pytest.approx(1e12)
    idle = KernelMetrics(index=1, name="void memset()", family="copy_transpose", time_s=0.0)
    assert (
        results.kernel_row(idle, CEIL)["bound"] is None
        and results.kernel_row(idle, CEIL)["achieved_flops_per_s"] is None
    )


def _r50_calls():
    import torch
    import torchvision

    from accelbench.core.analytic import count_flops

    m = torchvision.models.resnet50().to("meta").eval()
    x = torch.empty(32, 3, 224, 224, device="meta")
    with torch.no_grad():
        return count_flops(lambda: m(x))[3]


def test_pairing_layers_with_kernels_including_fft_convolutions():
    kernels = ncu.parse(text(R50_FP32)).kernels
    calls = _r50_calls()
    assert len(calls) == 54 and sum(f for _, f in calls) == pytest.approx(2 * 4_089_184_256 * 32, rel=1e-9)
    paired = results.pair_layers(kernels, calls)
    assert paired is not None and len(paired) == 54
    fft = [ks for ks, _ in paired if len(ks) > 1]
    assert len(fft) == 3 and all(any("fft2d" in k.name for k in ks) for ks in fft)
    f = results.layer_fields(paired)
    assert f["layers_paired"] == 54 and 0.98 < f["layer_flops_ratio_median"] < 1.02
    layers = results.kernel_layers(paired)
    first = [i for i, (layer, fl) in layers.items() if fl is not None]
    assert len(first) == 54  # the layer's analytic FLOPs sit on its first kernel only
    assert results.pair_layers(kernels, calls[:-1]) is None  # counts that do not match: no pairing
