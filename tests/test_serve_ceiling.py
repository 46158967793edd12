"""The serve ceiling split over several GPUs (``--ceiling-gpus N``): the bundled tiny model's ceiling taken by a real
``accelbench generate --gpus 2 --parallel tp`` on two gloo ranks, a split the model's heads refuse (a note, nothing
started), the option's checks, and the one-device note that points to the split."""

from __future__ import annotations

import pytest
import torch
from conftest import run_cli

from accelbench.core.errors import ConfigError
from accelbench.scenarios.serve import ceiling, ceiling_split
from accelbench.scenarios.serve.roof import shape_for

TINY = "hf:tiny-shakespeare"  # 4 heads, 2 key-value heads
CPU = torch.device("cpu")


def test_a_split_ceiling_on_two_gloo_ranks_has_figures_at_each_batch():
    shape = shape_for(TINY, "fp32")
    found = ceiling_split.measure_split(
        TINY, [2, 1, 2], 16, 8, mode="static-cache", gpus=2, shape=shape, device=CPU, seed=0
    )
    assert len(found) == 2 and sorted(found) == [1, 2]
    for b, c in found.items():
        assert c.note is None, c.note
        assert c.batch == b and c.tp_degree == 2
        assert c.tpot_p50_ms > 0 and c.output_tokens_per_s > 0
    cols = ceiling.columns("static-cache", found[2], served_tokens_per_s=found[2].output_tokens_per_s / 2)
    assert cols["ceiling_tp_degree"] == 2 and cols["engine_share_of_ceiling"] == pytest.approx(0.5)


@pytest.mark.parametrize("gpus", [3, 4])
def test_a_split_the_heads_refuse_is_a_note_before_anything_starts(gpus, monkeypatch):
    def started(*args, **kwargs):
        raise AssertionError(f"a generate command started: {args}")

    monkeypatch.setattr(ceiling_split.subprocess, "run", started)  # refused from the shape, before any command
    found = ceiling_split.measure_split(
        TINY, [1, 4], 16, 8, mode="static-cache", gpus=gpus, shape=shape_for(TINY, "fp32"), device=CPU, seed=0
    )
    assert sorted(found) == [1, 4]
    for c in found.values():
        assert c.tpot_p50_ms is None and c.tp_degree == gpus
        assert c.note.startswith(f"no ceiling over {gpus} GPUs (tp={gpus}): ") and "\n" not in c.note
        assert "divide the attention heads (4) and key-value heads (2)" in c.note


def test_more_gpus_than_visible_is_a_note(monkeypatch):
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    cuda = torch.device("cuda", 0)
    assert ceiling_split.refusal(None, 4, cuda) == "--ceiling-gpus 4: 2 GPUs visible"
    assert ceiling_split.refusal(None, 2, cuda) is None


def test_the_generate_command_asks_for_the_ceilings_case():
    argv = ceiling_split.command(
        TINY,
        [16, 1, 4, 4],
        128,
        64,
        mode="static-compile",
        gpus=8,
        precision="bf16",
        device_type="cuda",
        seed=3,
        db="x",
    )
    assert argv[1:4] == ["-m", "accelbench", "generate"]
    assert " ".join(argv[4:]) == (
        f"-m {TINY} -b 1,4,16 --precisions bf16 --modes static-compile --prompt-lens 128 --new-tokens 64 "
        f"--repeats {ceiling.REPEATS} --idle-s 0 --no-perplexity --seed 3 --device cuda --gpus 8 --parallel tp --db x"
    )


def test_a_failed_commands_error_is_one_line():
    wrapped = "note: loading\nerror: hf:llama-3.1-70b bf16 needs about 78 GB a GPU,\n  40 GB free on cuda:0\n"
    assert ceiling_split.failure(2, wrapped) == "hf:llama-3.1-70b bf16 needs about 78 GB a GPU, 40 GB free on cuda:0"
    assert ceiling_split.failure(1, "Traceback\nRuntimeError: boom\n") == "RuntimeError: boom"
    assert ceiling_split.failure(-9, "") == "accelbench generate exited with status -9"


def test_a_batch_too_big_for_one_of_several_gpus_points_to_the_split(monkeypatch):
    from accelbench.core import memory

    shape = shape_for(TINY, "fp32")
    monkeypatch.setattr(memory, "available_bytes", lambda device: 1000)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 8)
    why = ceiling._fits(shape, 4, 16, 8, torch.device("cuda", 0))
    assert why.endswith("no ceiling (--ceiling-gpus N splits it over N of the 8 GPUs)") and "\n" not in why
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert ceiling._fits(shape, 4, 16, 8, torch.device("cuda", 0)).endswith("free: no ceiling")
    assert ceiling.columns("static-cache", ceiling.Ceiling(batch=4, note=why), None)["ceiling_tp_degree"] is None


@pytest.mark.parametrize(
    "args, words",
    [
        (("--ceiling-gpus", "0"), "invalid ceiling_gpus 0: allowed an integer >= 1"),
        (("--ceiling", "none", "--ceiling-gpus", "2"), "invalid ceiling_gpus 2: allowed 1 with --ceiling none"),
        (("--ceiling-gpus", "2"), "invalid ceiling_gpus 2: allowed 1 with --ceiling none"),  # a CPU's default: none
    ],
)
def test_a_ceiling_gpus_mistake_is_one_line_before_anything_runs(tmp_path, args, words):
    db = tmp_path / "s.db"
    p = run_cli("serve", "--url", "http://x", *args, "--device", "cpu", "--db", str(db))
    assert p.returncode == 2 and words in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not db.exists()


def test_the_split_ceiling_setting_is_taken_with_an_engine():
    from accelbench import api

    spec = api.spec("serve", {"url": "http://x", "device": "cpu", "ceiling": "static-cache", "ceiling_gpus": 2})
    assert spec.settings.ceiling_gpus == 2
    assert api.spec("serve", {"url": "http://x", "device": "cpu"}).settings.ceiling_gpus == 1
    with pytest.raises(ConfigError, match="invalid ceiling_gpus -1"):
        api.spec("serve", {"url": "http://x", "device": "cpu", "ceiling": "static-cache", "ceiling_gpus": -1})


def test_the_reading_says_a_split_ceiling_was_decoded_over_its_gpus():
    from accelbench.report.serve import _device_line

    best = {"concurrency": 8, "output_tokens_per_s": 600.0, "tpot_p50_ms": 40.0, "engine_share_of_ceiling": 0.5}
    best |= {"ceiling_output_tokens_per_s": 1200.0, "ceiling_batch": 8, "ceiling_mode": "static-compile"}
    best |= {"ceiling_tpot_p50_ms": 20.0}
    assert "output tok/s this device decodes in process at batch 8" in _device_line(best)
    assert "output tok/s 4 GPUs decode split (tensor parallel) at batch 8" in _device_line(
        {**best, "ceiling_tp_degree": 4}
    )


def test_serve_takes_the_split_ceiling_of_each_levels_batch(tmp_path, monkeypatch):
    """``--ceiling-gpus 2`` against a stub server: the split ceiling is asked once, for the levels' batches, and
    each level row gets its figures and ``ceiling_tp_degree`` (the generate command itself: the test above)."""
    from serve_server import stub_server

    from accelbench.store import Store

    asked = []

    def split(model, batches, prompt_len, new_tokens, *, mode, gpus, shape, device, seed):
        asked.append((model, sorted(batches), mode, gpus, device.type, shape.heads))
        return {
            b: ceiling.Ceiling(batch=b, tpot_p50_ms=2.0, output_tokens_per_s=100.0 * b, tp_degree=gpus) for b in batches
        }

    monkeypatch.setattr(ceiling_split, "measure_split", split)
    db = tmp_path / "s.db"
    levels = ["--concurrency", "1,2", "--requests", "2", "--output-len", "4", "--served-model-name", "stub"]
    fast = ["--device", "cpu", "--idle-s", "0", "--warmup-requests", "0", "--telemetry-period-ms", "50"]
    with stub_server(tmp_path) as (url, _):
        p = run_cli(
            "serve",
            "--url",
            url,
            "-m",
            TINY,
            *levels,
            "--ceiling",
            "static-cache",
            "--ceiling-gpus",
            "2",
            "--db",
            str(db),
            *fast,
        )
    assert p.returncode == 0, p.stderr
    assert asked == [(TINY, [1, 2], "static-cache", 2, "cpu", 4)]
    rows = sorted(Store(db).records(), key=lambda r: r["concurrency"])
    assert [(r["ceiling_batch"], r["ceiling_tp_degree"]) for r in rows] == [(1, 2), (2, 2)]
    for r in rows:
        assert r["ceiling_tpot_p50_ms"] == 2.0 and r["ceiling_output_tokens_per_s"] == 100.0 * r["concurrency"]
        assert r["engine_share_of_ceiling"] == pytest.approx(r["output_tokens_per_s"] / (100.0 * r["concurrency"]))


def test_the_generate_rows_read_back_as_ceilings_and_notes(tmp_path):
    from accelbench.core import kinds
    from accelbench.store import Store

    db = tmp_path / "g.db"
    with Store(db) as store:
        run = store.begin_run(kinds.GENERATE, {}, "h", {})
        row = {"workload": kinds.GENERATE, "model": TINY, "tp_degree": 2}
        store.add_case(
            run,
            {
                **row,
                "case_key": "b1",
                "batch_size": 1,
                "status": "ok",
                "tpot_p50_ms": 3.5,
                "output_tokens_per_s": 250.0,
            },
        )
        store.add_case(
            run,
            {
                **row,
                "case_key": "b8",
                "batch_size": 8,
                "status": "oom",
                "error": "CUDA out of memory.\nTried to allocate 2 GiB",
            },
        )
    found = ceiling_split.read(str(db), 2)
    assert found[1] == ceiling.Ceiling(batch=1, tpot_p50_ms=3.5, output_tokens_per_s=250.0, tp_degree=2)
    assert found[8].tpot_p50_ms is None and found[8].tp_degree == 2
    assert found[8].note == "no ceiling over 2 GPUs (tp=2): oom: CUDA out of memory. Tried to allocate 2 GiB"
