"""fp8 precisions, simulated (fake-quant) accuracy rows, and the cheapest precision meeting the accuracy target
(GPU side, tested on the CPU: the real fp8 path needs a GPU of compute capability >= 8.9)."""

from __future__ import annotations

import pytest
import torch

from accelbench import api, precisions
from accelbench.quant import fp8, simulate
from accelbench.quant.accuracy import cheapest_meeting_target
from accelbench.store import Store

CPU = torch.device("cpu")


# what runs where --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,gran", [("fp8", "row"), ("fp8-tensor", "tensor")])
def test_fp8_needs_cc89_is_simulated_on_the_cpu_and_does_not_train(name, gran):
    assert precisions.granularity(name) == gran and precisions.is_float8(name)
    assert "compute capability 8.9" in precisions.unsupported_reason(name, CPU)
    assert "compute capability 8.9" in precisions.simulated_reason(name, CPU)
    assert "inference only" in precisions.unsupported_reason(name, CPU, training=True)
    assert precisions.get(name).ceiling == "fp8" and not precisions.is_reference(name)


def test_int8_is_simulated_on_cuda_and_real_on_the_cpu():
    assert "no INT8 convolution kernel path" in precisions.simulated_reason("int8", torch.device("cuda", 0))
    assert precisions.simulated_reason("int8", CPU) is None
    assert precisions.simulated_reason("fp32", CPU) is None and precisions.is_reference("fp32")


def test_commands_that_do_not_quantize_make_quantized_precisions_unsupported():
    from accelbench import scenarios

    lg = scenarios.get("loadgen")
    assert "accelbench run only" in lg.unsupported_reason(_Case("fp8"), CPU)
    assert lg.unsupported_reason(_Case("fp32"), CPU) is None
    assert scenarios.get("inference").unsupported_reason(_Case("fp8"), CPU) is None  # measure() simulates


class _Case:
    def __init__(self, precision):
        self.precision, self.mode = precision, "eager"


# fake quantization ------------------------------------------------------------------------------------------
def test_fake_fp8_round_trip_follows_e4m3():
    s = torch.tensor(1.0)
    x = torch.tensor([0.0, 1.0, 1.125, 448.0, 1000.0, -3.0])
    assert torch.equal(simulate.fake_fp8(x, s), torch.tensor([0.0, 1.0, 1.125, 448.0, 448.0, -3.0]))
    assert simulate.fake_fp8(torch.tensor([1.0625]), s).item() in (1.0, 1.125)  # 3 mantissa bits: steps of 1/8
    y = torch.randn(10_000) * 3
    q = simulate.fake_fp8(y, y.abs().amax() / simulate.E4M3_MAX)
    big = y.abs() > y.abs().amax() / 64  # normal range of e4m3 at this scale: relative error <= 2^-4
    assert ((q[big] - y[big]).abs() / y[big].abs()).max() <= 2**-4 + 1e-6


def test_fake_quantize_wraps_every_conv_and_linear_and_changes_the_logits():
    from accelbench.models import create_model

    m = create_model("cifar-resnet20").module.eval()
    q, cols = simulate.fake_quantize_fp8(m, "row")
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        a, b = m(x), q(x)
    assert cols["fp8_simulated_layers"] == 20  # 19 convolutions + the classifier
    assert not torch.equal(a, b) and torch.allclose(a, b, atol=0.5 * a.abs().max().item())
    assert isinstance(m.linear, torch.nn.Linear)  # the original is untouched


def test_layer_flops_and_fp8_eligibility():
    from accelbench.models import create_model

    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 32), torch.nn.Linear(32, 10))
    rows = fp8.layer_flops(mlp, torch.randn(2, 3, 4, 4))
    assert [(r[1], r[2], r[3]) for r in rows] == [("linear", 2 * 48 * 32, True), ("linear", 2 * 32 * 10, False)]
    assert fp8.conv_dominated(rows) is None
    conv = fp8.conv_dominated(fp8.layer_flops(create_model("cifar-resnet20").module.eval(), torch.randn(1, 3, 32, 32)))
    assert conv is not None and conv > 0.99


# the simulated rows through the inference scenario -----------------------------------------------------------
def test_fp8_on_the_cpu_gives_simulated_accuracy_rows(tmp_path, one_thread):
    spec = api.spec(
        "inference",
        {
            "model": "cifar-resnet20",
            "batch_sizes": "64",
            "images": 128,  # two batches; on these images fake fp8 keeps fp32's 113 right, fp8-tensor gets 114
            "device": "cpu",
            "precisions": "fp32,fp8,fp8-tensor",
            "modes": "eager",
            "idle_s": 0,
            "min_time_s": 0,
            "min_timed_batches": 1,
            "warmup_batches": 0,
        },
        cuda=False,
    )
    out = api.run(spec, Store(tmp_path / "f.db"))
    by = {r["precision"]: r for r in out.records}
    for name in ("fp8", "fp8-tensor"):
        r = by[name]
        assert r["status"] == "unsupported" and r["simulated"] is True and "compute capability 8.9" in r["error"]
        assert r.get("throughput_samples_per_s") is None and r.get("latency_p50_ms") is None
        assert r["top1_fp32_ref"] == pytest.approx(by["fp32"]["top1"])
        assert r["top1_delta_pts"] > -5 and r["accuracy_target_met"] in (True, False)
        assert r["top1_delta_pts"] == pytest.approx(100 * (r["top1"] - r["top1_fp32_ref"]))
    assert "per row" in by["fp8"]["quant_config"] and "per tensor" in by["fp8-tensor"]["quant_config"]
    best = cheapest_meeting_target(out.records)
    assert [(c["model"], c["precision"]) for c in best] == [("cifar-resnet20", "fp32")]  # simulated: no speed


def test_int8_simulation_runs_the_pt2e_graph_on_any_device():
    pytest.importorskip("torchao")
    from accelbench.models import create_model

    m = create_model("cifar-resnet20").module.eval()
    x = torch.randn(16, 3, 32, 32)
    q, cols = simulate.simulated(m, "static", None, [x[:8]], x[:8])
    with torch.no_grad():
        agree = (q(x).argmax(1) == m(x).argmax(1)).float().mean().item()
    assert cols["simulated"] is True and cols["quant_kernels"].startswith("simulated") and agree >= 0.75


# the cheapest precision meeting the target ------------------------------------------------------------------
def _row(prec, top1, tput, cost=None, status="ok", **kw):
    return {
        "model": "m",
        "precision": prec,
        "mode": "compile",
        "batch_size": 32,
        "top1": top1,
        "status": status,
        "throughput_samples_per_s": tput,
        "cost_per_1000_samples_usd": cost,
        "accuracy_samples": 100,
        **kw,
    }


def test_cheapest_meeting_target_by_cost_then_throughput():
    nan = float("nan")  # what a store read gives for a column a row lacks
    rows = [
        _row("fp32", 0.90, 100, 1.0, simulated=nan, accuracy_target_met=nan),
        _row("amp-bf16", 0.895, 300, 0.4),
        _row("int8", 0.85, 900, 0.1, accuracy_target_met=False, top1_fp32_ref=0.9),
        _row("fp8", 0.90, None, None, status="unsupported", simulated=True, accuracy_target_met=True),
    ]
    (c,) = cheapest_meeting_target(rows)
    assert (c["precision"], c["by"], c["value"], c["missed"]) == (
        "amp-bf16",
        "cost_per_1000_samples_usd",
        0.4,
        ["int8"],
    )
    assert c["top1_delta_pts"] == pytest.approx(-0.5)
    no_cost = [{**r, "cost_per_1000_samples_usd": None} for r in rows]
    assert cheapest_meeting_target(no_cost)[0]["precision"] == "amp-bf16"  # by throughput: 300 > 100
    assert cheapest_meeting_target([_row("amp-bf16", 0.9, 10)]) == []  # no fp32 reference: no claim


def test_cheapest_line_is_printed(tmp_path):
    from accelbench.report.table import cheapest_lines

    (line,) = cheapest_lines([_row("fp32", 0.90, 100, 1.0), _row("bf16", 0.80, 500, 0.2)])
    assert "m: cheapest precision meeting the target" in line and "fp32 (compile, batch 32)" in line
    assert "below target: bf16" in line


# the real fp8 path's bookkeeping, with torchao's quantize_ stood in for (it needs compute capability 8.9) ------
class _Marked(torch.Tensor):
    pass


def test_fp8_quantize_counts_converted_and_skipped_layers_and_casts_to_bf16(monkeypatch):
    seen = {}

    def fake_quantize_(model, config, filter_fn):
        seen["config"] = config
        for name, m in model.named_modules():
            if filter_fn(m, name) and m.in_features % 16 == 0 and m.out_features % 16 == 0:  # torchao's rule
                m.weight = torch.nn.Parameter(m.weight.detach().as_subclass(_Marked), requires_grad=False)

    class Config:
        def __init__(self, granularity, set_inductor_config=True):
            self.granularity, self.set_inductor_config = granularity, set_inductor_config

    monkeypatch.setattr(fp8, "_api", lambda: (fake_quantize_, Config, lambda: "row", lambda: "tensor"))
    mlp = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
    fwd, cols = fp8.quantize(mlp, "tensor", torch.randn(4, 3, 4, 4))
    assert seen["config"].granularity == "tensor" and seen["config"].set_inductor_config is False
    assert (cols["fp8_linear_layers"], cols["fp8_linear_layers_skipped"]) == (1, 1)
    assert cols["fp8_flops_share"] == pytest.approx(48 * 32 / (48 * 32 + 32 * 10))
    assert cols["compute_dtype"] == "bfloat16" and "per-tensor" in cols["quant_config"]
    assert fwd(torch.randn(2, 3, 4, 4)).dtype == torch.bfloat16  # float32 input cast inside the forward


def test_without_torchao_the_fp8_row_says_what_to_install(monkeypatch):
    from accelbench.core.errors import MissingDependencyError

    monkeypatch.setattr(fp8, "_api", lambda: None)
    assert "pip install 'accelbench[quant]'" in fp8.missing_reason()
    with pytest.raises(MissingDependencyError):
        fp8.quantize(torch.nn.Linear(16, 16), "row", torch.randn(2, 16))
