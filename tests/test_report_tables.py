"""The compact tables fit an 80-column terminal with nothing cut; text in brackets prints as written."""

import pytest
from rich.console import Console

from accelbench.report.table import case_notes, natural_width, results_table
from accelbench.report.train import sweep_table
from accelbench.report.units import ms, number, quantity, si


def _render(table, width=80) -> list[str]:
    console = Console(width=width, record=True, markup=False, force_terminal=False)
    console.print(table)
    return console.export_text().splitlines()


def _row(**kw):
    base = {
        "model": "mobilenet_v3_large",
        "batch_size": 1024,
        "precision": "amp-bf16",
        "mode": "max-autotune",
        "throughput_samples_per_s": 149883.4,
        "latency_p50_ms": 123.45,
        "latency_p99_ms": 1234.56,
        "top1": 0.9173,
        "energy_per_sample_j": 0.0401,
        "status": "ok",
        "validity": "latency-spread,cpu-contention",
        "step_time_p50_ms": 1234.5,
        "compile_s": 153.2,
        "loader_samples_per_s": 10573.0,
    }
    return {**base, **kw}


def test_worst_case_inference_and_training_rows_fit_80_columns():
    rows = [
        _row(),
        _row(model="timm:vit_base_patch16_224", status="unsupported", error="x" * 300),
        _row(status="error", error="RuntimeError: [enforce fail at alloc_cpu.cpp:127] " + "y" * 200),
    ]
    for table in (results_table(rows, compact=True), sweep_table(rows, compact=True)):
        lines = _render(table)
        assert lines and all(len(line) <= 80 for line in lines), "\n".join(lines)
        text = "\n".join(lines)
        assert "…" not in text and "149,883" in text and "mobilenet_v3_large" in text.replace("\n", "")


def test_notes_name_the_model_and_case_and_keep_brackets():
    rows = [
        _row(status="error", error="RuntimeError: [enforce fail at alloc_cpu.cpp:127] data"),
        _row(validity="cpu-contention", validity_reason="other processes used 52% of the host's CPU time > 10%"),
    ]
    assert case_notes(rows) == [
        (
            "error:",
            "mobilenet_v3_large bs=1024 amp-bf16 max-autotune: RuntimeError: [enforce fail at alloc_cpu.cpp:127] data",
        ),
        (
            "flagged:",
            "other processes used > 10% of the host's CPU time: 1 case of mobilenet_v3_large: "
            "bs=1024 amp-bf16 max-autotune 52%",
        ),
    ]
    table = results_table(rows[:1], compact=False)
    wide = "\n".join(_render(table, natural_width(table, Console(width=80))))
    assert "error: RuntimeError: [enforce fail at alloc_cpu.cpp:127] data" in wide and "…" not in wide


def test_a_contended_sweep_gets_one_flagged_line_per_reason_with_the_count_and_the_cases():
    spread = "latency spread (IQR/median) {}% > 5%"
    cpu = "other processes used {}% of the host's CPU time > 10%"
    rows = [
        _row(batch_size=1, validity="cpu-contention", validity_reason=cpu.format(83)),
        _row(
            batch_size=2,
            validity="latency-spread,cpu-contention",
            validity_reason=f"{spread.format(7.2)}; {cpu.format(81)}",
        ),
        _row(
            batch_size=4,
            validity="latency-spread,cpu-contention",
            validity_reason=f"{spread.format(11.9)}; {cpu.format(90)}",
        ),
        _row(batch_size=8, validity="ok", validity_reason=None),
    ]
    notes = case_notes(rows)
    assert notes == [
        (
            "flagged:",
            "other processes used > 10% of the host's CPU time: 3 cases of mobilenet_v3_large: "
            "bs=1 amp-bf16 max-autotune 83%, bs=2 amp-bf16 max-autotune 81%, bs=4 amp-bf16 max-autotune 90%",
        ),
        (
            "flagged:",
            "latency spread (IQR/median) > 5%: 2 cases of mobilenet_v3_large: "
            "bs=2 amp-bf16 max-autotune 7.2%, bs=4 amp-bf16 max-autotune 11.9%",
        ),
    ]
    two_models = case_notes([rows[0], {**rows[1], "model": "resnet50"}])
    assert two_models[0] == (
        "flagged:",
        "other processes used > 10% of the host's CPU time: 2 cases: "
        "mobilenet_v3_large bs=1 amp-bf16 max-autotune 83%, "
        "resnet50 bs=2 amp-bf16 max-autotune 81%",
    )


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (1.0704, "s", "1.07 s"),
        (1070.4, "s", "1,070 s"),
        (0.00107, "s", "1.07 ms"),
        (2.5e-7, "s", "250 ns"),
        (9.39e-5, "USD", "$93.9µ"),
        (0.0939, "USD", "$0.0939"),
        (12.345, "USD", "$12.35"),
        (0, "USD", "$0"),
        (3.2e9, "B", "3.20 GB"),
        (999_960, "B", "1.00 MB"),
        (7.9e14, "FLOP/s", "790 TFLOP/s"),
        (0.0401, "J", "40.1 mJ"),
        (250.0, "W", "250 W"),
        (0, "J", "0 J"),
        (1234.5, "samples/s", "1,234 samples/s"),
        (12.34, "samples/s", "12.3 samples/s"),
        (None, "W", "-"),
        (float("nan"), "s", "-"),
    ],
)
def test_a_value_reaches_the_user_with_its_unit_and_never_in_exponent_form(value, unit, text):
    assert quantity(value, unit) == text and "e+" not in text and "e-" not in text


def test_numbers_keep_three_significant_digits_without_an_exponent():
    assert [number(v) for v in (1070.4, 8.417, 0.01234, 9.996, 149_883.4, 0.000123, 0)] == [
        "1,070",
        "8.42",
        "0.0123",
        "10.0",
        "149,883",
        "0.000123",
        "0",
    ]
    assert ms(1070.4) == "1.07 s" and ms(8.417) == "8.42 ms" and si(9.39e-5) == "93.9µ"


def test_cheapest_line_prices_in_si_not_exponent_form():
    from accelbench.report.table import cheapest_lines

    rows = [
        _row(
            model="m",
            precision=p,
            mode="eager",
            batch_size=8,
            validity="ok",
            top1=t,
            top1_fp32_ref=0.9,
            top1_delta_pts=100 * (t - 0.9),
            accuracy_target_met=t >= 0.891,
            cost_per_1000_samples_usd=c,
        )
        for p, t, c in (("fp32", 0.9, 9.39e-4), ("bf16", 0.899, 9.39e-5))
    ]
    (line,) = cheapest_lines(rows)
    assert "bf16" in line and "$93.9µ/1k img" in line and "e-0" not in line, line


def test_the_oom_boundary_says_when_no_batch_size_ran():
    from accelbench.report.table import oom_boundary

    rows = [_row(status="oom", batch_size=b, error="out of memory") for b in (64, 128)]
    assert list(oom_boundary(rows).values()) == [{"largest_ok": None, "smallest_oom": 64}]


def test_provenance_values_reach_the_reader_formatted():
    """`Idle power 74.94297529945904` and raw byte counts reached the report."""
    from accelbench.report.sections import provenance

    run = {
        "run_id": 3,
        "kind": "inference",
        "status": "complete",
        "created_at": 0.0,
        "env": {
            "idle_power_w": 74.94297529945904,
            "power_limit_w": 700.0,
            "sm_clock_max_mhz": 1980,
            "device_name": "NVIDIA H200",
            "cpu_count": 16,
            "cudnn": 91900,  # torch.backends.cudnn.version() of cuDNN 9.19.0, not "91,900"
        },
    }
    got = dict(provenance(run))
    assert got["cuDNN"] == "9.19.0"
    assert got["Idle power (W)"] == "74.94" and got["Power limit (W)"] == "700.0"
    assert got["SM clock max (MHz)"] == "1980" and got["Device"] == "NVIDIA H200" and got["CPU count"] == "16"


def test_latency_histogram_bins_are_numpys_and_the_cli_prints_them(tmp_path):
    """the stored per-batch latencies are never plotted; `results --hist CASE` shows their distribution."""
    import numpy as np
    from conftest import run_cli
    from test_compare import add_run

    from accelbench.report.histogram import bins, lines
    from accelbench.store import Store

    rng = np.random.default_rng(1)
    values = list(rng.lognormal(0.0, 0.3, 500))
    edges, counts = bins(values)
    auto = np.histogram_bin_edges(values, bins="auto")
    want_counts, want_edges = np.histogram(values, bins=auto if len(auto) <= 21 else 20)  # at most 20 bins
    assert counts == list(want_counts) and edges == list(want_edges) and sum(counts) == 500 and len(counts) <= 20
    text = lines(values)
    assert len(text) == len(counts) + 1 and text[-1].startswith("500 samples, p50 ")
    assert max(text[:-1], key=lambda x: x.count("#")).endswith(f" {max(counts)}")
    db = tmp_path / "h.db"
    run = add_run(Store(db))
    case_id = Store(db).records(run)[0]["case_id"]
    p = run_cli("results", "--run", str(run), "--db", str(db), "--hist", str(case_id), check=True)
    assert "latency_ms" in p.stdout and "100 samples, p50 " in p.stdout and " ms |#" in p.stdout
    p = run_cli("results", "--run", str(run), "--db", str(db), "--hist", "999")
    assert p.returncode == 2 and "no such case" in p.stderr


def test_the_runs_list_names_model_and_device(tmp_path):
    """`results --runs` listed no model or device."""
    from conftest import run_cli

    from accelbench.store import Store

    db = tmp_path / "r.db"
    s = Store(db)
    rid = s.begin_run(
        "inference", {"scenario": "inference", "models": ["resnet50", "vit_b_16"]}, "h", {"device_name": "NVIDIA H200"}
    )
    s.finish_run(rid, "complete")
    (run,) = s.runs()
    assert run["models"] == "resnet50,vit_b_16" and run["device"] == "NVIDIA H200"
    out = run_cli("results", "--runs", "--db", str(db), env={"COLUMNS": "200"}, check=True).stdout
    assert "resnet50,vit_b_16" in out and "NVIDIA H200" in out


def test_a_reason_shared_by_many_cases_is_one_line():
    """per-case notes repeated the same sentence dozens of times."""
    from accelbench.report.notes import case_notes

    rows = [
        {
            "status": "unsupported",
            "error": "cudagraphs needs a CUDA GPU",
            "model": "resnet50",
            "batch_size": b,
            "precision": "fp32",
            "mode": "cudagraphs",
        }
        for b in (1, 8, 32)
    ]
    rows.append(
        {"status": "error", "error": "boom", "model": "resnet50", "batch_size": 4, "precision": "fp32", "mode": "eager"}
    )
    notes = case_notes(rows)
    assert len(notes) == 2
    assert notes[0] == (
        "unsupported:",
        "cudagraphs needs a CUDA GPU: 3 cases: resnet50 bs=1 fp32 cudagraphs, "
        "resnet50 bs=8 fp32 cudagraphs, resnet50 bs=32 fp32 cudagraphs",
    )
    assert notes[1] == ("error:", "resnet50 bs=4 fp32 eager: boom")


@pytest.mark.parametrize("kind", ["profile", "train-lm-ddp"])
def test_results_of_a_profile_or_multi_gpu_run_is_compact_by_default(kind):
    """``results`` (no --wide) asks each run kind's table for its compact form: a profile run's and a multi-GPU run's
    fit 80 columns; --wide keeps every column."""
    from accelbench.report.runs import table_for

    row = {
        "workload": kind,
        "model": "hf:llama-3.2-1b",
        "step": "train",
        "batch_size": 4,
        "precision": "fp8-tensor",
        "mode": "compile",
        "step_time_s": 0.0641,
        "measured_vs_theoretical": 5.27,
        "achieved_flops_per_s": 6.09e13,
        "ncu_bound": "memory",
        "ncu_roof_fraction": 0.09,
        "parallel_strategy": "fsdp",
        "mesh": "dp_shard=2",
        "world_size": 2,
        "rank_batch_size": 4,
        "seq_len": 2048,
        "throughput_samples_per_s": 77692.5,
        "throughput_per_gpu_samples_per_s": 38846.2,
        "speedup": 1.63,
        "scaling_efficiency": 0.816,
        "straggler_gap_share": 0.001,
        "aggregate": 1,
        "status": "ok",
        "validity": "flagged",
    }
    console = Console(width=80)
    compact, wide = table_for(kind)([row], compact=True), table_for(kind)([row], compact=False)
    assert natural_width(compact, console) <= 80 < natural_width(wide, console)
