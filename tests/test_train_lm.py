"""A language model's training step (``accelbench train -m hf:...``): the bundled tiny model trains end to end on
the CPU (tokens counted, the loss finite and falling), torchtitan's FLOP count against a hand count from the config,
the memory estimate's out-of-memory row, fp8 training's ``unsupported`` row on a CPU, the refusals of options of the
other kind of model, ``scale`` over 1 and 2 processes (gloo) with DDP and FSDP2, and ``--resume`` of a sweep and of a
convergence run SIGKILLed mid-way."""

import json
import math
import signal
import subprocess
import sys

import pytest
from conftest import cli_env, run_cli
from signal_helpers import stored_rows, wait_for

from accelbench.core.errors import OK, OOM, UNSUPPORTED
from accelbench.models.hf import BUNDLED
from accelbench.report.views import throughput_unit
from accelbench.store import Store

TINY = "hf:tiny-shakespeare"
SMALL = ["--device", "cpu", "--min-timed-batches", "1", "--warmup-batches", "1", "--idle-s", "0"]
HUGE = 1_000_000  # sequences a step: terabytes of activations


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One in-process run: a step on packed text windows, an impossible batch size, and fp8 on a CPU."""
    db = tmp_path_factory.mktemp("lm") / "lm.db"
    args = ["train", "-m", TINY, "-b", f"2,{HUGE}", "--seq-len", "32", "--tokens", "text", "-p", "fp32,fp8"]
    p = run_cli(*args, "--db", str(db), *SMALL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    store = Store(db)
    return store.records(store.run()["run_id"]), p.stdout


def _row(records, batch, precision):
    (r,) = [r for r in records if r["batch_size"] == batch and r["precision"] == precision]
    return r


def test_the_tiny_model_trains_and_counts_its_tokens(run):
    records, _ = run
    r = _row(records, 2, "fp32")
    assert r["status"] == OK and r["workload"] == "train-lm" and r["token_source"] == "text"
    assert r["tokens_per_step"] == 2 * 32 and r["seq_len"] == 32
    assert r["samples_timed"] == r["tokens_timed"] == r["steps_timed"] * 64
    assert r["tokens_per_s"] == pytest.approx(r["tokens_timed"] / r["timed_wall_s"], rel=1e-12)
    assert r["throughput_samples_per_s"] == r["tokens_per_s"] == r["tokens_per_s_per_gpu"]
    assert r["loss_finite"] and math.isfinite(r["loss_first"])
    assert r["optimizer"] == "adamw" and r["parallel_strategy"] is None
    # the sample is a token: cost per billion tokens is the derived cost per 1000 samples x 1e6
    assert r["cost_per_billion_tokens_usd"] == pytest.approx(r["cost_per_1000_samples_usd"] * 1e6, rel=1e-12)
    assert r.get("param_bytes") is None and r.get("activation_bytes") is None  # no allocator statistics on a CPU


def test_an_impossible_batch_is_an_oom_row_before_building(run):
    records, out = run
    r = _row(records, HUGE, "fp32")
    assert r["status"] == OOM and "more than the" in r["error"] and "RAM available" in r["error"]
    assert r["case_wall_s"] < 30  # estimated, not allocated
    assert "OOM boundary" in out and "seq_len=32" in out


def test_fp8_training_is_unsupported_on_a_cpu(run):
    records, _ = run
    rows = [r for r in records if r["precision"] == "fp8"]
    assert rows
    for r in rows:
        assert r["status"] == UNSUPPORTED and r["error"].startswith("Float8 training")


def test_flops_per_token_is_torchtitans_count_of_the_config():
    from accelbench.models.lm_shape import meta_shape
    from accelbench.training.lm_maths import flops_per_token

    c = json.loads((BUNDLED / "tiny-shakespeare" / "config.json").read_text())
    h, q, kv, f = c["hidden_size"], c["head_dim"], c["num_key_value_heads"], c["intermediate_size"]
    heads, layers, vocab = c["num_attention_heads"], c["num_hidden_layers"], c["vocab_size"]
    per_layer = h * heads * q + 2 * h * kv * q + heads * q * h + 3 * h * f + 2 * h  # q, k, v, o, MLP, two norms
    n = layers * per_layer + h + vocab * h  # the final norm and the tied LM head (the embedding left out)
    shape = meta_shape(TINY)
    assert shape.tied_head and shape.params == n
    assert flops_per_token(shape, 64) == 6 * n + 12 * layers * heads * q * 64 == 11_511_936


def test_selective_checkpointing_recomputes_every_second_layer():
    from accelbench.training.lm_maths import checkpointed_layers

    assert checkpointed_layers(4, "selective") == [1, 3]
    assert checkpointed_layers(3, "full") == [0, 1, 2]
    assert checkpointed_layers(4, "none") == []


def test_the_loss_falls_over_steps_on_the_text_with_checkpointing():
    """The step on one packed text batch, selective checkpointing: after 8 AdamW steps the loss is below the first."""
    import torch

    from accelbench.models.lm_load import load_lm
    from accelbench.models.lm_shape import decoder_layers
    from accelbench.training import lm_step
    from accelbench.training.step import StepConfig, build_step

    torch.manual_seed(0)
    dev = torch.device("cpu")
    loaded = load_lm(TINY, dev, torch.float32)
    lm = loaded.module.train()
    lm_step.prepare_lm(lm, checkpointing="selective", compile_kwargs=None)
    assert [layer.gradient_checkpointing for layer in decoder_layers(lm)] == [False, True, False, True]
    step = build_step(lm_step.next_token(lm), StepConfig(optimizer="adamw", lr=1e-3, weight_decay=0.0), dev)
    ids = lm_step.text_ids(loaded.tokenizer)
    ((x, y),) = lm_step.token_batches("text", batch=2, seq_len=32, count=1, vocab=0, seed=0, rank=0, world=1, ids=ids)
    assert torch.equal(x[0, 1:], y[:31]) and torch.equal(x[0], ids[:32])  # labels: the inputs shifted by one
    losses = [step(x, y)[0].item() for _ in range(8)]
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0]


def test_options_of_the_other_kind_of_model_are_refused():
    p = run_cli("train", "-m", TINY, "--momentum", "0.5", "--device", "cpu")
    assert p.returncode == 2 and "momentum applies to an image classifier" in p.stderr
    p = run_cli("train", "-m", "cifar-resnet20", "--seq-len", "64", "--device", "cpu")
    assert p.returncode == 2 and "applies to a language model" in p.stderr
    p = run_cli("train", "-m", f"{TINY},cifar-resnet20", "--device", "cpu")
    assert p.returncode == 2 and "not both in one run" in p.stderr
    p = run_cli("train", "-m", TINY, "--parallel", "fsdp", "--device", "cpu")
    assert p.returncode == 2 and "--parallel applies with --gpus" in p.stderr
    p = run_cli("train", "-m", "hf:gpt2", "--tokens", "text", "--device", "cpu")
    assert p.returncode == 2 and "no tokenizer" in p.stderr
    p = run_cli("scale", "-m", "cifar-resnet20", "--workload", "train", "--seq-len", "64", "--device", "cpu")
    assert p.returncode == 2 and "applies to a language model" in p.stderr
    p = run_cli("scale", "-m", TINY, "--device", "cpu")  # the default workload, inference
    assert p.returncode == 2 and "train for a language model" in p.stderr


@pytest.mark.slow
def test_scale_trains_on_one_and_two_processes_under_ddp_and_fsdp2(tmp_path):
    """``accelbench scale --workload train`` of a language model: the 1- and 2-process points of each strategy in one
    run, the 2-process row's speed-up and efficiency against the same strategy's 1-process row, on the console line
    and in the table (its rates in tokens/s, the strategy and mesh shown)."""
    db = tmp_path / "d.db"
    args = ["scale", "--gpus", "1,2", "--workload", "train", "-m", TINY, "-b", "2", "--seq-len", "32"]
    p = run_cli(*args, "--parallel", "ddp,fsdp", "--db", str(db), *SMALL)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Throughput (tokens/s)" in p.stdout and "Per GPU (tokens/s)" in p.stdout and "dp_shard=2 " in p.stdout
    # the compact table of the same run (results, and train --gpus's outcome) fits 80 columns with its rates in tokens/s
    run_id = Store(db).run()["run_id"]
    compact = run_cli("results", "--run", str(run_id), "--db", str(db), env={"COLUMNS": "80"}).stdout
    table = compact[compact.index("Precision") :].splitlines()
    assert "tokens/s" in table[0] and "Efficiency" in table[0] and "Parallel" in table[0]
    assert all(len(line) <= 80 for line in table) and sum(" ddp " in line or " fsdp " in line for line in table) == 4
    lines = [line for line in p.stdout.splitlines() if " on 2 ranks: " in line]
    assert len(lines) == 2 and all("tokens/s" in line and "efficiency" in line for line in lines)
    assert any("ddp (dp=2)" in line for line in lines) and any("fsdp (dp_shard=2)" in line for line in lines)
    records = Store(db).records()
    assert {r["workload"] for r in records} == {"train-lm-ddp"}  # its own workload: its metric map counts tokens
    assert throughput_unit(records) == "tokens/s"  # the unit the scaling table and charts label its rates with
    aggs = {(r["parallel_strategy"], r["world_size"]): r for r in records if r["aggregate"]}
    assert set(aggs) == {("ddp", 1), ("ddp", 2), ("fsdp", 1), ("fsdp", 2)}
    assert aggs["ddp", 2]["mesh"] == "dp=2" and aggs["fsdp", 2]["mesh"] == "dp_shard=2"
    for strategy in ("ddp", "fsdp"):
        one, two = aggs[strategy, 1], aggs[strategy, 2]
        ranks = [
            r for r in records if not r["aggregate"] and r["parallel_strategy"] == strategy and r["world_size"] == 2
        ]
        assert one["status"] == OK and two["status"] == OK and len(ranks) == 2
        assert two["tokens_per_step"] == 2 * 2 * 32  # two ranks of batch 2 x 32 tokens
        assert two["throughput_per_gpu_samples_per_s"] == pytest.approx(two["throughput_samples_per_s"] / 2)
        assert all(r["tokens_per_s_per_gpu"] > 0 and r["loss_finite"] for r in ranks)
        # scaling per strategy: against the same strategy's 1-process point
        assert two["baseline_case_id"] == one["case_id"] and two["baseline_world_size"] == 1
        assert two["speedup"] == pytest.approx(two["throughput_samples_per_s"] / one["throughput_samples_per_s"])
        assert two["scaling_efficiency"] == pytest.approx(two["speedup"] / 2)
        # the exposed communication: DDP's step against the same step under no_sync(); FSDP2 has no such switch
        share = two["comm_exposed_share"]
        assert (
            (share is not None and share < 1 and two["step_time_nosync_mean_ms"] > 0)
            if strategy == "ddp"
            else (share is None)
        )


def test_epochs_train_to_a_held_out_perplexity_with_checkpoints(tmp_path):
    """``--epochs`` from random weights of the tiny model's configuration: an epoch row each with the held-out
    perplexity, a summary with the time to the target, a checkpoint an epoch."""
    db = tmp_path / "c.db"
    args = ["train", "-m", TINY, "--epochs", "2", "-b", "4", "--seq-len", "16", "--train-windows", "8"]
    args += ["--eval-windows", "8", "--init", "random", "--lr", "3e-3", "--warmup-steps", "1"]
    p = run_cli(*args, "--target-perplexity", "2000", "--device", "cpu", "--idle-s", "0", "--db", str(db))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    records = Store(db).records()
    epochs = sorted((r for r in records if r["row_type"] == "epoch"), key=lambda r: r["epoch"])
    (summary,) = [r for r in records if r["row_type"] == "summary"]
    assert [r["epoch"] for r in epochs] == [1, 2] and all(r["workload"] == "convergence-lm" for r in epochs)
    for r in epochs:
        assert r["steps"] == 8 // 4 and r["train_tokens"] == 2 * 4 * 16
        assert r["eval_perplexity"] == pytest.approx(math.exp(r["eval_loss"]), rel=1e-12)
    assert summary["status"] == OK and summary["epochs_done"] == 2
    assert summary["best_eval_perplexity"] == min(r["eval_perplexity"] for r in epochs)
    assert summary["final_eval_perplexity"] == epochs[-1]["eval_perplexity"]
    # random weights start near the vocabulary's size (1,024): the first epoch is under 2,000
    assert summary["epochs_to_target"] == 1 and summary["time_to_target_s"] == epochs[0]["elapsed_s"]
    assert len(list((tmp_path / "c-checkpoints").glob("*.pt"))) == 2


def _killed(args: list[str], reached, label: str) -> None:
    """``accelbench <args>`` as a real process, SIGKILLed (no handler runs) once ``reached()`` holds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args],
        env=cli_env({"OMP_NUM_THREADS": "1"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(reached, proc, label=label)  # a state of the store or the folder, not a time
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_a_killed_sweep_resumes_without_measuring_its_stored_case_again(tmp_path):
    """Two cases; SIGKILL once the first case's row is stored (each case times at least 1 s, so the kill lands in
    the second); ``--resume`` measures the one left in the same run and keeps the stored row as it was."""
    db = tmp_path / "k.db"
    args = ["train", "-m", TINY, "-b", "1,2", "--seq-len", "16", "--min-time-s", "1", "--db", str(db), *SMALL]
    _killed(args, lambda: stored_rows(db) >= 1, "the first case row")
    (first,) = Store(db).records()
    assert first["batch_size"] == 1 and first["status"] == OK
    p = run_cli(*args, "--resume")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "1 cases were already done" in p.stdout
    rows = Store(db).records()
    assert sorted(r["batch_size"] for r in rows) == [1, 2] and all(r["status"] == OK for r in rows)
    assert {r["run_id"] for r in rows} == {first["run_id"]}
    (kept,) = [r for r in rows if r["batch_size"] == 1]
    assert kept["case_id"] == first["case_id"] and kept["tokens_per_s"] == first["tokens_per_s"]


@pytest.mark.slow
def test_a_killed_convergence_run_resumes_from_its_checkpoint(tmp_path):
    """``--epochs 3`` SIGKILLed once the first epoch's checkpoint is written; ``--resume`` continues from the newest
    checkpoint: each epoch's row stored once, none lost, none repeated."""
    db = tmp_path / "c.db"
    args = ["train", "-m", TINY, "--epochs", "3", "-b", "4", "--seq-len", "16", "--train-windows", "40"]
    args += ["--eval-windows", "8", "--init", "random", "--warmup-steps", "1", "--device", "cpu", "--idle-s", "0"]
    args += ["--db", str(db)]
    folder = tmp_path / "c-checkpoints"
    _killed(args, lambda: any(folder.glob("*.pt")), "the first checkpoint")
    before = [r for r in Store(db).records() if r["row_type"] == "epoch"]
    assert len(before) < 3  # killed before the run ended
    p = run_cli(*args, "--resume")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "resumed after epoch" in p.stdout
    records = Store(db).records()
    assert sorted(r["epoch"] for r in records if r["row_type"] == "epoch") == [1, 2, 3]
    (summary,) = [r for r in records if r["row_type"] == "summary"]
    assert summary["status"] == OK and summary["epochs_done"] == 3


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["-m", "cifar-resnet20,resnet18"],
            "invalid model 'cifar-resnet20,resnet18': allowed one model for a training",
        ),
        (["-m", TINY, "-p", "fp32,bf16"], "invalid precision 'fp32,bf16': allowed one precision for a training run"),
    ],
)
def test_a_training_run_to_a_target_takes_one_configuration(args, line, tmp_path):
    """--epochs trains one model in one precision and mode, image classifier or language model alike: more is one
    line and exit 2 before anything runs (the store stays empty)."""
    db = tmp_path / "e.db"
    p = run_cli("train", *args, "--epochs", "1", "--device", "cpu", "--db", str(db))
    assert p.returncode == 2 and line in p.stderr
    assert not db.exists() or not Store(db).records()
