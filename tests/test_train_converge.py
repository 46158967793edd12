"""Real training runs on the CPU: loss falls, checkpoints resume to the same state, failures are rows."""

import signal
import subprocess
import sys

import pytest
import torch
from conftest import cli_env, run_cli
from signal_helpers import wait_for
from specs import build_converge_spec, run_convergence

from accelbench.scenarios.train import checkpoint as ckpt
from accelbench.store import Store

# 256 real training images, 200 real test images, 2 epochs: seconds on one CPU core
SMALL = {
    "device": "cpu",
    "train_images": 256,
    "eval_images": 200,
    "epochs": 2,
    "batch_sizes": "32",
    "warmup_epochs": 0,
    "base_lr": 0.2,
    "placement": "resident",
}


pytestmark = pytest.mark.usefixtures("one_thread")


def spec(tmp_path, **kw):
    return build_converge_spec({**SMALL, "checkpoint_dir": str(tmp_path / "ck"), **kw}, cuda=False)


def _final_state(s, run_id, bs=32):
    (epoch, path), *_ = ckpt.checkpoints(s.settings.checkpoint_dir, s.spec_hash(), run_id, bs)
    return ckpt.load(path, s.spec_hash(), epoch)


def test_training_loss_falls_and_resume_reaches_the_same_state(tmp_path):
    s = spec(tmp_path, target_top1=0.05)
    full = run_convergence(s, Store(tmp_path / "a.db"))
    e1, e2 = full.epochs
    assert (e1["epoch"], e2["epoch"]) == (1, 2) and e2["train_loss"] < e1["train_loss"]
    assert e1["eval_images"] == 200 and 0 <= e2["eval_top1"] <= e2["eval_top5"] <= 1
    assert e2["elapsed_s"] == pytest.approx(e1["elapsed_s"] + e2["epoch_wall_s"] + e2["eval_wall_s"])
    assert e1["steps"] == 8 and e1["train_samples"] == 256 and e1["cudnn_deterministic"] is False
    summary = full.summaries[0]
    assert summary["status"] == "ok" and summary["epochs_done"] == 2 and summary["lr_peak"] == pytest.approx(0.05)
    assert summary["epochs_to_target"] == 1 and summary["time_to_target_s"] == e1["elapsed_s"]

    # the same run killed after epoch 1 (Ctrl-C), then resumed from its checkpoint
    db = tmp_path / "b.db"
    s2 = spec(tmp_path, target_top1=0.05, checkpoint_dir=str(tmp_path / "ck2"))  # its own files: compared below

    def stop(bs, row):
        raise KeyboardInterrupt

    killed = run_convergence(s2, Store(db), on_epoch=stop)
    assert killed.interrupted and len(killed.epochs) == 1 and Store(db).run(killed.run_id)["status"] == "interrupted"
    resumed = run_convergence(s2, Store(db), resume=True)
    assert resumed.run_id == killed.run_id and resumed.resumed == {32: 1}
    assert [r["epoch"] for r in resumed.epochs] == [2]
    assert resumed.epochs[0]["train_loss"] == e2["train_loss"] and resumed.epochs[0]["eval_top1"] == e2["eval_top1"]
    a, b = _final_state(s, full.run_id), _final_state(s2, resumed.run_id)
    assert a["step"]["model"] and a["step"]["model"].keys() == b["step"]["model"].keys()
    for k, v in a["step"]["model"].items():
        assert torch.equal(v, b["step"]["model"][k]), k
    rows = Store(db).cases(resumed.run_id)
    assert sorted(rows[rows.row_type == "epoch"].epoch.tolist()) == [1, 2] and len(rows) == 3


def test_loader_and_resident_paths_train_identically(tmp_path):
    # the DataLoader decodes the PNGs and augments per sample; the resident set augments whole batches:
    # the same (seed, epoch) plan gives bit-identical batches, so the training losses agree exactly
    kw = {"epochs": 1, "train_images": 128, "eval_images": 100}
    a = run_convergence(spec(tmp_path, **kw), Store(tmp_path / "a.db")).epochs[0]
    b = run_convergence(spec(tmp_path, placement="loader", workers=0, **kw), Store(tmp_path / "b.db")).epochs[0]
    assert a["train_loss"] == b["train_loss"] and a["eval_top1"] == b["eval_top1"]
    assert b["placement"] == "loader" and b["data_wait_s"] >= 0 and isinstance(b["input_bound"], bool)


def test_batch_size_failure_is_a_row_and_the_next_one_runs(tmp_path):
    # helpers:oom_model raises a real torch.OutOfMemoryError for batches above 4
    s = spec(
        tmp_path,
        model="helpers:oom_model",
        batch_sizes="8,4",
        epochs=1,
        train_images=32,
        eval_images=20,
        eval_batch_size=4,
    )
    out = run_convergence(s, Store(tmp_path / "a.db"))
    by = {r["batch_size"]: r for r in out.summaries}
    assert by[8]["status"] == "oom" and "out of memory" in by[8]["error"].lower()
    assert by[4]["status"] == "ok" and by[4]["epochs_done"] == 1


@pytest.mark.slow
def test_killed_cli_run_resumes_from_its_checkpoint(tmp_path):
    args = [
        "train",
        "--device",
        "cpu",
        "--epochs",
        "3",
        "-b",
        "32",
        "-n",
        "256",
        "--eval-images",
        "100",
        "--placement",
        "resident",
        "--db",
        str(tmp_path / "k.db"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "accelbench", *args],
        env=cli_env({"OMP_NUM_THREADS": "1"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    ck_dir = tmp_path / "k-checkpoints"
    wait_for(lambda: any(ck_dir.glob("*.pt")), proc, label="the first checkpoint")  # a state, not a time
    proc.send_signal(signal.SIGKILL)  # a hard kill: no handler runs
    proc.wait()
    out = run_cli(*args, "--resume", env={"OMP_NUM_THREADS": "1"}, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "resumed after epoch" in out.stdout
    rows = Store(tmp_path / "k.db").cases()
    epochs = rows[rows.row_type == "epoch"].epoch.astype(int).tolist()
    assert sorted(epochs) == [1, 2, 3]  # each epoch stored once, none lost, none repeated
