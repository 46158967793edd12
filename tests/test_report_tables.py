"""The compact tables fit an 80-column terminal with nothing cut; text in brackets prints as written."""

from rich.console import Console

from accelbench.report.table import case_notes, natural_width, results_table
from accelbench.report.train import sweep_table


def _render(table, width=80) -> list[str]:
    console = Console(width=width, record=True, markup=False, force_terminal=False)
    console.print(table)
    return console.export_text().splitlines()


def _row(**kw):
    base = {"model": "mobilenet_v3_large", "batch_size": 1024, "precision": "amp-bf16", "mode": "max-autotune",
            "throughput_samples_per_s": 149883.4, "latency_p50_ms": 123.45, "latency_p99_ms": 1234.56, "top1": 0.9173,
            "energy_per_sample_j": 0.0401, "status": "ok", "validity": "latency-spread,cpu-contention",
            "step_time_p50_ms": 1234.5, "compile_s": 153.2, "loader_samples_per_s": 10573.0}
    return {**base, **kw}


def test_worst_case_inference_and_training_rows_fit_80_columns():
    rows = [_row(), _row(model="timm:vit_base_patch16_224", status="unsupported", error="x" * 300),
            _row(status="error", error="RuntimeError: [enforce fail at alloc_cpu.cpp:127] " + "y" * 200)]
    for table in (results_table(rows, compact=True), sweep_table(rows, compact=True)):
        lines = _render(table)
        assert all(len(line) <= 80 for line in lines), "\n".join(lines)
        text = "\n".join(lines)
        assert "…" not in text and "149,883" in text and "mobilenet_v3_large" in text.replace("\n", "")


def test_notes_name_the_model_and_case_and_keep_brackets():
    rows = [_row(status="error", error="RuntimeError: [enforce fail at alloc_cpu.cpp:127] data"),
            _row(validity_reason="other processes used 52% of the host's CPU time > 10%")]
    assert case_notes(rows) == [
        ("error:", "mobilenet_v3_large bs=1024 amp-bf16 max-autotune: RuntimeError: [enforce fail at alloc_cpu.cpp:127] data"),
        ("flagged:", "mobilenet_v3_large bs=1024 amp-bf16 max-autotune: other processes used 52% of the host's CPU time > 10%"),
    ]
    table = results_table(rows[:1], compact=False)
    wide = "\n".join(_render(table, natural_width(table, Console(width=80))))
    assert "error: RuntimeError: [enforce fail at alloc_cpu.cpp:127] data" in wide and "…" not in wide
