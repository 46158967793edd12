"""The fault suite for checkpoints and the input pipeline: a bad checkpoint on ``--resume`` is named on one line,
never runs code, never ends the run, and never duplicates or loses a finished row; ``input-pipeline`` leaves
the host's page cache alone unless asked. Rows as in ``test_faults.py`` (see ``fault_harness.Fault``), plus
plain tests where a row cannot say it."""

from __future__ import annotations

import json
import pickle
import pickletools
import zipfile
from pathlib import Path

import pytest
import torch
from fault_harness import Fault, cases, check, no_run, runs
from specs import build_converge_spec, run_convergence

from accelbench.scenarios.train import checkpoint as ckpt
from accelbench.scenarios.train.converge import default_checkpoint_dir
from accelbench.store import Store

pytestmark = pytest.mark.usefixtures("one_thread")

# 64 real training images (2 steps of 32), 32 test images, 3 epochs: a few seconds on one CPU core. The
# library settings below and the flags of TRAIN give the same spec, so `--resume` finds the killed run.
SETTINGS = {
    "model": "cifar-resnet20",
    "device": "cpu",
    "epochs": 3,
    "batch_sizes": "32",
    "train_images": 64,
    "eval_images": 32,
    "placement": "resident",
}
TRAIN = [
    "train",
    "--model",
    "cifar-resnet20",
    "--device",
    "cpu",
    "--epochs",
    "3",
    "--batch-sizes",
    "32",
    "--images",
    "64",
    "--eval-images",
    "32",
    "--placement",
    "resident",
    "--db",
    "{db}",
    "--resume",
]
PIPELINE = [
    "input-pipeline",
    "--images",
    "64",
    "--workers",
    "0",
    "--batch-size",
    "32",
    "--min-batches",
    "1",
    "--no-resident",
    "--device",
    "cpu",
    "--db",
    "{db}",
]
ONE_THREAD = {"OMP_NUM_THREADS": "1"}
MARKER = "code-ran"  # the file a crafted checkpoint creates if it is ever unpickled with code execution


class _CreatesMarker:
    """Unpickling this (pickle, or torch.load with weights_only=False) calls ``open(path, "w")``: a file appears."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _crafted(path: Path, marker: Path) -> None:
    """A checkpoint-shaped file whose model state runs code when unpickled without ``weights_only``."""
    torch.save(
        {
            "format": ckpt.FORMAT,
            "spec_hash": "x",
            "epoch": 2,
            "history": [{}, {}],
            "step": {"model": _CreatesMarker(marker)},
        },
        path,
    )


def _truncated(path: Path, marker: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _killed_after_epoch_2(*spoil):
    """Setup: run the 3-epoch training in the library, stopped (Ctrl-C) after epoch 2, then ``spoil[i](file, marker)``
    the i-th newest checkpoint. ``before.json`` keeps the checkpoint paths (newest first) and the epoch rows' ids."""

    def setup(tmp: Path) -> dict:
        db = tmp / "faults.db"
        spec = build_converge_spec(SETTINGS, cuda=False)

        def stop(bs: int, row: dict) -> None:
            if row["epoch"] == 2:
                raise KeyboardInterrupt

        with Store(db) as store:
            out = run_convergence(spec, store, on_epoch=stop)
        assert out.interrupted and [r["epoch"] for r in out.epochs] == [1, 2]
        files = [p for _, p in ckpt.checkpoints(default_checkpoint_dir(db), spec.spec_hash(), out.run_id, 32)]
        assert len(files) == ckpt.KEEP
        for fn, path in zip(spoil, files):
            fn(path, tmp / MARKER)
        rows = {r["epoch"]: r["case_id"] for r in cases(db) if r["row_type"] == "epoch"}
        (tmp / "before.json").write_text(json.dumps({"files": [str(p) for p in files], "rows": rows}))
        return {}

    return setup


def _before(tmp: Path) -> dict:
    return json.loads((tmp / "before.json").read_text())


def _resumed(kept_epochs: list[int], rejected: int):
    """Store check: one run, complete; epochs 1-3 each stored once, epoch rows in ``kept_epochs`` the very rows
    stored before the resume; a summary row ok after 3 epochs; no code ran; the ``rejected`` newest checkpoints
    set aside as ``*.bad``."""

    def check_store(db: Path, tmp: Path) -> None:
        assert [(r[1], r[2]) for r in runs(db)] == [("convergence", "complete")], runs(db)
        rows = cases(db)
        epochs = [r for r in rows if r["row_type"] == "epoch"]
        assert sorted(r["epoch"] for r in epochs) == [1, 2, 3], [r["case_key"] for r in rows]
        before = _before(tmp)
        ids = {r["epoch"]: r["case_id"] for r in epochs}
        assert {e: ids[e] for e in kept_epochs} == {e: before["rows"][str(e)] for e in kept_epochs}
        (summary,) = [r for r in rows if r["row_type"] == "summary"]
        assert summary["status"] == "ok" and summary["epochs_done"] == 3
        assert not (tmp / MARKER).exists(), "the crafted checkpoint ran code"
        assert all(Path(f + ".bad").exists() for f in before["files"][:rejected]), list(tmp.rglob("*"))

    return check_store


def _pipeline_cold(method: str):
    def check_store(db: Path, tmp: Path) -> None:
        assert [r[2] for r in runs(db)] == ["complete"]
        rows = {r["case_key"]: r for r in cases(db)}
        assert all(r["status"] == "ok" for r in rows.values()), rows
        assert rows["storage|cold"]["cold_method"] == method and rows["storage|warm"]["cold_method"] is None

    return check_store


FAULTS = [
    # a crafted .pt in place of the newest checkpoint: refused unread, the run resumes from the one before
    Fault(
        "crafted-checkpoint-refused",
        TRAIN,
        0,
        "refused (not a tensors-only file: Unsupported global",
        _resumed([1], rejected=1),
        _killed_after_epoch_2(_crafted),
        one_line=True,
        env=ONE_THREAD,
        stdout="resumed after epoch 1",
    ),
    # a truncated newest checkpoint (a crash mid-write on a filesystem without ordered writes): the same
    Fault(
        "truncated-checkpoint",
        TRAIN,
        0,
        "unreadable (truncated or corrupt:",
        _resumed([1], rejected=1),
        _killed_after_epoch_2(_truncated),
        one_line=True,
        env=ONE_THREAD,
        stdout="resumed after epoch 1",
    ),
    # no good checkpoint left: the batch size restarts from epoch 0, every epoch stored exactly once
    Fault(
        "no-good-checkpoint-left",
        TRAIN,
        0,
        "no good checkpoint left: bs=32 restarts from epoch 0",
        _resumed([], rejected=2),
        _killed_after_epoch_2(_truncated, _crafted),
        one_line=True,
        env=ONE_THREAD,
    ),
    # input-pipeline evicts only the files it reads unless asked (the page cache is every job's on a shared host)
    Fault(
        "input-pipeline-default-fadvise",
        PIPELINE,
        0,
        store=_pipeline_cold("fadvise"),
        env=ONE_THREAD,
        stdout="Next: accelbench results",
    ),
    Fault(
        "input-pipeline-evict-auto-deprecated",
        [*PIPELINE, "--evict", "auto"],
        0,
        "--evict auto is deprecated",
        _pipeline_cold("fadvise"),
        one_line=True,
        env=ONE_THREAD,
    ),
    Fault(
        "input-pipeline-bad-evict",
        [*PIPELINE, "--evict", "everything"],
        2,
        "invalid evict 'everything'",
        no_run,
        one_line=True,
    ),
]

# The one line of each resume row, in parts that must appear in this order ({newest}, {previous}: checkpoint paths).
LINES = {
    "crafted-checkpoint-refused": (
        "warning: checkpoint {newest} refused (not a tensors-only file: Unsupported global",
        "; resuming bs=32 from {previous} (epoch 1)",
    ),
    "truncated-checkpoint": (
        "warning: checkpoint {newest} unreadable (truncated or corrupt: ",
        "; resuming bs=32 from {previous} (epoch 1)",
    ),
    "no-good-checkpoint-left": (
        "warning: checkpoint {newest} unreadable (truncated or corrupt: ",
        "; checkpoint {previous} refused (not a tensors-only file: ",
        "; no good checkpoint left: bs=32 restarts from epoch 0",
    ),
}


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    p = check(fault, tmp_path)
    if fault.id in LINES:
        newest, previous = _before(tmp_path)["files"]
        (line,) = p.stderr.strip().splitlines()
        at = 0
        for part in LINES[fault.id]:
            found = line.find(part.format(newest=newest, previous=previous), at)
            assert found >= 0, f"{part!r} not in order in {line!r}"
            at = found


def test_the_crafted_file_runs_code_when_loaded_unsafely_and_not_here(tmp_path: Path) -> None:
    """The payload is live (a plain unpickle creates the marker), and ckpt.load refuses it without running it,
    in torch's zip format and as a bare pickle."""
    zipped, bare, marker = tmp_path / "a.pt", tmp_path / "b.pt", tmp_path / MARKER
    _crafted(zipped, marker)
    bare.write_bytes(pickle.dumps({"step": _CreatesMarker(marker)}, protocol=2))
    torch.load(zipped, weights_only=False)  # what the old loader did
    assert marker.exists()
    marker.unlink()
    for path in (zipped, bare):
        with pytest.raises(ckpt.CheckpointError, match=r"refused \(not a tensors-only file: Unsupported global"):
            ckpt.load(path, "x")
        assert not marker.exists()


def _tiny_step(optimizer: str):
    from helpers import TinyConvNet

    from accelbench.training.step import StepConfig, build_step

    torch.manual_seed(0)
    return build_step(
        TinyConvNet(), StepConfig(precision="fp32", mode="eager", optimizer=optimizer, lr=0.1), torch.device("cpu")
    )


# What a checkpoint may reference, a subset of the weights_only allowlist of torch 2.4 (and every later one):
# the state-dict container, the tensor rebuild function and storage types; no set/bytes opcodes (newer).
OLD_ALLOWLIST = {"collections OrderedDict", "torch._utils _rebuild_tensor_v2"}
OLD_OPCODES = {
    "PROTO",
    "STOP",
    "GLOBAL",
    "REDUCE",
    "BUILD",
    "NEWOBJ",
    "APPEND",
    "APPENDS",
    "SETITEM",
    "SETITEMS",
    "MARK",
    "TUPLE",
    "TUPLE1",
    "TUPLE2",
    "TUPLE3",
    "EMPTY_TUPLE",
    "EMPTY_LIST",
    "EMPTY_DICT",
    "BINPERSID",
    "BINUNICODE",
    "BININT",
    "BININT1",
    "BININT2",
    "LONG1",
    "BINFLOAT",
    "NEWTRUE",
    "NEWFALSE",
    "NONE",
    "BINGET",
    "LONG_BINGET",
    "BINPUT",
    "LONG_BINPUT",
}


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_a_real_checkpoint_round_trips_through_the_safe_loader(optimizer: str, tmp_path: Path) -> None:
    import numpy as np

    step = _tiny_step(optimizer)
    step(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))
    history = [
        {
            "epoch": 1,
            "case_key": "m|bs=4|epoch=1",
            "loss": np.float64(1.5),
            "steps": np.int64(3),
            "top1": torch.tensor(0.25),
            "input_bound": np.bool_(False),
            "clocks": (1, 2),
            "error": None,
        }
    ]
    path = ckpt.save(tmp_path, step=step, epoch=1, history=history, spec_hash="h", run_id=7, batch_size=4)
    assert path.name == "h-run7-bs4-epoch0001.pt" and not list(tmp_path.glob("*.tmp"))
    state = ckpt.load(path, "h", 1)
    assert state["history"] == [
        {
            "epoch": 1,
            "case_key": "m|bs=4|epoch=1",
            "loss": 1.5,
            "steps": 3,
            "top1": 0.25,
            "input_bound": False,
            "clocks": [1, 2],
            "error": None,
        }
    ]
    assert [type(v) for v in state["history"][0].values()] == [int, str, float, int, float, bool, list, type(None)]
    fresh = _tiny_step(optimizer)
    ckpt.restore(state, fresh, path)
    saved = step.state_dict()["model"]
    assert saved and saved.keys() == fresh.state_dict()["model"].keys()
    for k, v in saved.items():
        assert torch.equal(v, fresh.state_dict()["model"][k]), k
    saved_opt, loaded_opt = step.optimizer.state_dict()["state"], fresh.optimizer.state_dict()["state"]
    assert (
        saved_opt
        and saved_opt.keys() == loaded_opt.keys()
        and all(torch.equal(saved_opt[i][k], loaded_opt[i][k]) for i in saved_opt for k in saved_opt[i])
    )
    with zipfile.ZipFile(path) as z:
        data = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    ops = list(pickletools.genops(data))
    assert {op.name for op, _, _ in ops} <= OLD_OPCODES
    referenced = {arg for op, arg, _ in ops if op.name == "GLOBAL"}
    storages = {g for g in referenced if g.startswith("torch ") and g.endswith("Storage")}  # torch.FloatStorage, ...
    assert referenced - storages <= OLD_ALLOWLIST, referenced


def test_the_last_two_checkpoints_are_kept(tmp_path: Path) -> None:
    step = _tiny_step("sgd")
    for epoch in (1, 2, 3):
        ckpt.save(
            tmp_path,
            step=step,
            epoch=epoch,
            history=[{"epoch": e} for e in range(1, epoch + 1)],
            spec_hash="h",
            run_id=1,
            batch_size=4,
        )
    assert [e for e, _ in ckpt.checkpoints(tmp_path, "h", 1, 4)] == [3, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h-run1-bs4-epoch0002.pt", "h-run1-bs4-epoch0003.pt"]


def test_a_checkpoint_of_another_spec_or_epoch_is_not_used(tmp_path: Path) -> None:
    step = _tiny_step("sgd")
    path = ckpt.save(tmp_path, step=step, epoch=1, history=[{"epoch": 1}], spec_hash="h", run_id=1, batch_size=4)
    with pytest.raises(ckpt.CheckpointError, match="belongs to another spec"):
        ckpt.load(path, "other")
    with pytest.raises(ckpt.CheckpointError, match="holds epoch 1, not the epoch 2 of its name"):
        ckpt.load(path, "h", 2)


def test_input_pipeline_default_never_opens_drop_caches(monkeypatch, tmp_path: Path) -> None:
    """The default eviction touches only the files read: /proc/sys/vm/drop_caches is never opened, nothing synced."""
    from accelbench.scenarios.train import pipeline

    opened, synced = [], []
    real_open = open
    monkeypatch.setattr(
        pipeline, "open", lambda f, *a, **k: opened.append(str(f)) or real_open(f, *a, **k), raising=False
    )
    monkeypatch.setattr(pipeline.os, "sync", lambda: synced.append(True))
    files = pipeline.dataset_files("cifar10-train-5k")
    assert pipeline.drop_cache(files) == "fadvise" and pipeline.drop_cache(files, "auto") == "fadvise"
    cold = pipeline.storage_cold(files, repeats=1)
    assert cold["cold_method"] == "fadvise"
    assert "/proc/sys/vm/drop_caches" not in opened and not synced


def _small(tmp: Path, **kw):
    return build_converge_spec(
        {**SETTINGS, "train_images": 64, "eval_images": 50, "checkpoint_dir": str(tmp / "ck"), **kw}, cuda=False
    )


def test_stored_epochs_without_checkpoints_restart_with_a_note(tmp_path: Path) -> None:
    s, db = _small(tmp_path, epochs=2), tmp_path / "a.db"

    def stop(bs: int, row: dict) -> None:
        raise KeyboardInterrupt

    with Store(db) as st:
        assert run_convergence(s, st, on_epoch=stop).interrupted
    for _, p in ckpt.checkpoints(tmp_path / "ck", s.spec_hash(), 1, 32):
        p.unlink()
    notes = []
    with Store(db) as st:
        out = run_convergence(s, st, resume=True, on_note=notes.append)
        epochs = sorted(r["epoch"] for r in cases(db) if r["row_type"] == "epoch")
    assert (
        out.notes
        == notes
        == [f"no checkpoint of bs=32 in {tmp_path / 'ck'} for its stored epochs 1-1: bs=32 restarts from epoch 0"]
    )
    assert out.resumed == {} and [r["epoch"] for r in out.epochs] == [1, 2] and epochs == [1, 2]


def test_a_new_run_never_resumes_from_files_of_an_earlier_store(tmp_path: Path) -> None:
    # two stores sharing a checkpoint folder both have a run 1 of the same spec
    s = _small(tmp_path, epochs=1)
    with Store(tmp_path / "a.db") as st:
        run_convergence(s, st)
    assert [e for e, _ in ckpt.checkpoints(tmp_path / "ck", s.spec_hash(), 1, 32)] == [1]
    with Store(tmp_path / "b.db") as st:
        out = run_convergence(s, st, resume=True)  # nothing to resume in b.db: a new run 1
    assert out.run_id == 1 and out.resumed == {} and out.notes == [] and [r["epoch"] for r in out.epochs] == [1]
