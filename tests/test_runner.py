import gc

import pytest

from accelbench import precisions
from accelbench.api import run as run_sweep
from accelbench.report.table import oom_boundary

PRECISIONS = precisions.names()  # the image workload's: the weight-only ones are generate's
from helpers import stop_after  # tests/helpers.py  # noqa: E402
from specs import build_spec  # noqa: E402

from accelbench.store import Store  # noqa: E402

# No idle-power wait (3 s a sweep by default; nothing here reads it). One torch thread: small CPU kernels on a shared
# 2-core machine run several times faster than two threads waiting on each other.
FAST = {"warmup_batches": 1, "min_timed_batches": 3, "min_time_s": 0.0, "device": "cpu", "idle_s": 0}

pytestmark = pytest.mark.usefixtures("one_thread")


def spec(**kw):
    return build_spec({**FAST, **kw}, cuda=False)


def test_every_precision_eager_on_cpu_or_unsupported(db):
    # one batch of 4 calibrates static int8 (512 images by default: most of the sweep's time); it still quantizes
    s = spec(
        model="cifar-resnet20",
        batch_sizes="4",
        precisions=",".join(PRECISIONS),
        modes="eager,cudagraphs",
        images=16,
        calibration_images=4,
    )
    out = run_sweep(s, Store(db))
    by = {(r["precision"], r["mode"]): r for r in out.records}
    assert len(by) == len(PRECISIONS) * 2
    for p in PRECISIONS:
        cg = by[(p, "cudagraphs")]
        assert cg["status"] == "unsupported" and "CUDA" in cg["error"]
    assert by[("tf32", "eager")]["status"] == "unsupported"
    for p in ("fp32", "amp-bf16", "bf16", "fp16", "amp-fp16"):
        r = by[(p, "eager")]
        assert r["status"] == "ok", r.get("error")
        assert r["throughput_samples_per_s"] > 0 and r["latency_p50_ms"] > 0
        assert r["samples_timed"] == r["batches_timed"] * 4 and r["batches_timed"] >= 3
        assert r["total_time_s"] == pytest.approx(16 / r["throughput_samples_per_s"])
        assert r["latency_p50_ms"] <= r["latency_p99_ms"] <= r["latency_max_ms"]
    # real weights on real labelled data: accuracy is reported (16 balanced test images)
    assert 0.5 <= by[("fp32", "eager")]["top1"] <= by[("fp32", "eager")]["top5"] <= 1.0
    # raw per-batch latencies are stored with the case
    st = Store(db)
    r = by[("fp32", "eager")]
    assert len(st.series(r["case_id"], "latency_ms")) == r["batches_timed"]


def test_the_harness_keeps_a_library_module_a_command_imported(tmp_path, monkeypatch):
    """The in-process harness forgets only the modules a command imported from a folder that was not on ``sys.path``
    (a test's factory module): a library module it imported stays, so a second import does not run its registration
    twice (torch's Dynamo backends and Inductor's cache artifacts: "duplicate name"), wherever the temporary folder
    is: here the library itself is under it."""
    import importlib
    import sys
    import uuid

    from conftest import run_cli

    uid = uuid.uuid4().hex[:8]
    lib, work = tmp_path / "lib", tmp_path / "work"
    lib.mkdir(), work.mkdir()
    (lib / f"registry_{uid}.py").write_text(
        "NAMES = set()\n\n\ndef register(name):\n    assert name not in NAMES, f'duplicate name: {name}'\n"
        "    NAMES.add(name)\n"
    )
    (lib / f"plugin_{uid}.py").write_text(f"import registry_{uid}\n\nregistry_{uid}.register('backend')\n")
    (work / "usermod.py").write_text(f"import plugin_{uid}  # noqa: F401\n\nraise RuntimeError('stop here')\n")
    monkeypatch.syspath_prepend(str(lib))
    try:
        importlib.import_module(f"registry_{uid}")  # imported before the command, as torch._dynamo's registry is
        for _ in range(2):
            p = run_cli("run", "--model", "usermod:make", "--device", "cpu", "--db", str(tmp_path / "u.db"), cwd=work)
            assert p.returncode == 2 and "RuntimeError: stop here" in p.stderr, p.stderr
            assert "duplicate name" not in p.stderr
            assert f"plugin_{uid}" in sys.modules and "usermod" not in sys.modules  # the test's own module forgotten
    finally:
        for name in (f"registry_{uid}", f"plugin_{uid}", "usermod"):
            sys.modules.pop(name, None)


@pytest.mark.slow
def test_compile_after_the_harness_compiled_with_torch_under_the_temporary_folder(db, tmp_path, monkeypatch):
    """A clone and virtualenv under the temporary folder (CI's clean clone): the harness compiled a model first (its
    command imported Inductor's and Dynamo's modules from site-packages, now under ``tempfile.gettempdir()``), and a
    compile in the test process after it still registers each backend once."""
    import tempfile
    from pathlib import Path

    import torch
    import torch._dynamo  # noqa: F401  (the backend registry, imported before the command as the suite has it)
    from conftest import TINY, run_cli

    monkeypatch.setattr(tempfile, "tempdir", str(Path(torch.__file__).resolve().parents[1]))
    run_cli("run", *TINY, "--modes", "compile", "--db", str(tmp_path / "cli.db"), check=True)
    monkeypatch.undo()
    out = run_sweep(
        spec(model="cifar-resnet20", batch_sizes="2", precisions="fp32", modes="compile", images=4), Store(db)
    )
    assert [r["status"] for r in out.records] == ["ok"], out.records[0].get("error")


@pytest.mark.slow
def test_compile_modes_on_cpu(db):
    s = spec(model="cifar-resnet20", batch_sizes="2", precisions="fp32", modes="compile,max-autotune", images=4)
    out = run_sweep(s, Store(db))
    assert sorted(r["mode"] for r in out.records) == ["compile", "max-autotune"]
    for r in out.records:
        assert r["status"] == "ok", r.get("error")
        assert r["compile_s"] > 0 and r["throughput_samples_per_s"] > 0 and r["top1"] is not None


def test_oom_row_boundary_and_sweep_goes_on(db):
    s = spec(model="helpers:oom_model,cifar-resnet20", batch_sizes="2,4,8,16", images=16, data="synthetic")
    out = run_sweep(s, Store(db))
    rows = {(r["model"], r["batch_size"]): r for r in out.records}
    assert [rows[("helpers:oom_model", b)]["status"] for b in (2, 4, 8, 16)] == ["ok", "ok", "oom", "skipped"]
    assert "out of memory" in rows[("helpers:oom_model", 8)]["error"].lower()
    assert "\n" not in rows[("helpers:oom_model", 8)]["error"]
    # the failure does not poison later cases
    assert all(rows[("cifar-resnet20", b)]["status"] == "ok" for b in (2, 4, 8, 16))
    b = oom_boundary(out.records)[("helpers:oom_model", "fp32", "eager")]
    assert b == {"largest_ok": 4, "smallest_oom": 8}
    assert len(Store(db).cases(out.run_id)) == 8


def test_error_row_is_one_line_and_sweep_goes_on(db):
    s = spec(model="helpers:broken_model,cifar-resnet20", batch_sizes="2", images=4)
    out = run_sweep(s, Store(db))
    st = [r["status"] for r in out.records]
    assert st == ["error", "ok"]
    assert out.records[0]["error"] == "RuntimeError: shape mismatch in layer 3"


def test_unknown_model_is_refused_before_a_run_is_created(db):
    from accelbench.core.errors import UnknownModelError

    with pytest.raises(UnknownModelError, match="unknown model 'resnet9000'"):
        run_sweep(spec(model="cifar-resnet20,resnet9000", batch_sizes="2", images=4), Store(db))
    assert Store(db).runs() == []


def test_interrupt_keeps_finished_and_resume_runs_only_missing(db):
    s = spec(model="cifar-resnet20", batch_sizes="1,2,4,8", images=8)
    first = run_sweep(s, Store(db), on_case=stop_after(2, []))
    assert first.interrupted and [r["batch_size"] for r in first.records] == [1, 2]
    st = Store(db)
    assert st.run(first.run_id)["status"] == "interrupted" and len(st.cases(first.run_id)) == 2
    second = run_sweep(s, Store(db), resume=True)
    assert second.run_id == first.run_id and second.skipped_done == 2
    assert [r["batch_size"] for r in second.records] == [4, 8]
    df = Store(db).cases(first.run_id)
    assert sorted(df["batch_size"]) == [1, 2, 4, 8] and Store(db).run(first.run_id)["status"] == "complete"
    # a complete run is not run again: --resume reports it and measures nothing
    third = run_sweep(s, Store(db), resume=True)
    assert third.already_complete and third.run_id == first.run_id and third.records == []
    assert [r["run_id"] for r in Store(db).runs()] == [first.run_id]


def test_include_transfer_and_channels_last_flags(db):
    s = spec(model="cifar-resnet20", batch_sizes="4", images=8, include_transfer=True, channels_last=True)
    r = run_sweep(s, Store(db)).records[0]
    assert r["status"] == "ok" and r["channels_last"] == 1 and r["include_transfer"] is True


def test_window_is_the_steps_asked_for_cycling_and_no_accuracy_pass_without_labels(db):
    from helpers import CountingNet

    CountingNet.calls.clear()
    frozen = []
    s = spec(
        model="helpers:counting_net",
        batch_sizes="1,2",
        images=8,
        data="synthetic",
        warmup_batches=2,
        min_timed_batches=5,
        telemetry_period_ms=0,
        idle_s=0,
    )
    r1, r2 = run_sweep(s, Store(db), on_case=lambda *a: frozen.append(gc.get_freeze_count())).records
    # what lived before the first case is kept out of the per-case collections, until the sweep ends
    assert min(frozen) > 0 and gc.get_freeze_count() == 0
    assert r1["status"] == r2["status"] == "ok" and r1["top1"] is None and r1["accuracy_note"]
    # batch 1: 5 timed steps, not the whole pass of 8; batch 2: 5 steps wrap round a pass of 4
    assert (r1["pass_batches"], r1["batches_timed"], r1["samples_timed"]) == (8, 5, 5)
    assert (r2["pass_batches"], r2["batches_timed"], r2["samples_timed"]) == (4, 5, 10)
    assert len(Store(db).series(r2["case_id"], "latency_ms")) == 5
    # per case: one first call, 2 warm-up steps, the timed steps; no untimed pass over the 8 (4) batches
    v = CountingNet.calls
    assert len(v) == 2 * (1 + 2 + 5)
    b = v[11:15]  # the second case's 4 batches, in order
    assert len(set(b)) == 4 and v[8:16] == [b[0], b[0], b[1], *b, b[0]]
