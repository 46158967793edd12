"""Fault rows of a run's lifecycle: a refused command leaves nothing behind, typos get a suggestion, a
damaged archive is a data error, user factories cannot take accelbench over, duplicate entries run once, outputs
that cannot be written are refused before anything runs, out-of-range numbers are refused up front."""

from __future__ import annotations

import os
import sqlite3
import tarfile
from pathlib import Path

import conftest
import pytest
from conftest import run_cli
from fault_harness import Fault, cases, check, runs, statuses

TINY = [*conftest.TINY, "--db", "{db}"]
BUNDLED = Path(__file__).resolve().parents[1] / "src/accelbench/assets/cifar10/test.tar.gz"
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def no_file(db: Path, tmp: Path) -> None:
    """A refused command created nothing: no store file (nor its journal), no checkpoint folder."""
    left = sorted(p.name for p in tmp.iterdir())
    assert not db.exists() and not Path(f"{db}-journal").exists(), left
    assert not any(name.endswith("-checkpoints") for name in left), left


def _complete(expected: list[str]):
    def check_store(db: Path, tmp: Path) -> None:
        assert statuses(db) == expected, statuses(db)
        assert [r[2] for r in runs(db)] == ["complete"], runs(db)

    return check_store


def _truncated(tmp: Path) -> dict:
    (tmp / "t.tar.gz").write_bytes(BUNDLED.read_bytes()[:3000])  # `head -c 3000 good.tar.gz > t.tar.gz`
    return {"arc": str(tmp / "t.tar.gz")}


def _store_with_one_run(tmp: Path) -> dict:
    from accelbench.store import Store

    with Store(tmp / "one.db") as st:
        st.finish_run(st.begin_run("inference", {}, "h", {}), "complete")
    return {"path": str(tmp / "one.db")}


def _store_then_folder(tmp: Path) -> dict:
    (tmp / "out").mkdir()
    return _store_with_one_run(tmp)


def _gif_and_tif(tmp: Path) -> dict:
    from PIL import Image

    with tarfile.open(BUNDLED) as tar:
        members = [m for m in tar.getmembers() if m.isfile()][:4]
        for i, m in enumerate(members):
            img = Image.open(tar.extractfile(m)).convert("RGB")
            dest = tmp / "mixed" / Path(m.name).parent.name / f"{i}.{'gif' if i % 2 else 'tif'}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            img.save(dest)
    return {}


def _four_decoded(db: Path, tmp: Path) -> None:
    rows = cases(db)
    assert [r["status"] for r in rows] == ["ok"] and "4 of 4 real images" in rows[0]["data_description"], rows


def _one_row_per(expected: int):
    def check_store(db: Path, tmp: Path) -> None:
        rows = cases(db)
        assert len(rows) == expected == len({r["case_key"] for r in rows}), [r["case_key"] for r in rows]
        assert all(r["status"] == "ok" for r in rows) and [r[2] for r in runs(db)] == ["complete"]

    return check_store


def _error_row(text: str):
    def check_store(db: Path, tmp: Path) -> None:
        rows = cases(db)
        assert [r["status"] for r in rows] == ["error"] and text in rows[0]["error"], rows
        assert [r[2] for r in runs(db)] == ["complete"], runs(db)

    return check_store


def _declared_on_module(db: Path, tmp: Path) -> None:
    (row,) = cases(db)
    assert row["status"] == "ok" and row["image_size"] == 16 and row["top1"] is not None, row


def _stored_and_complete(db: Path, tmp: Path) -> None:
    assert [r[2] for r in runs(db)] == ["complete"] and statuses(db) == ["ok"]
    assert not list(tmp.glob("*.json*")), sorted(p.name for p in tmp.iterdir())


FAULTS = [
    # item 3: a typo leaves no store file, prints no header (one line only) and suggests the name meant
    Fault(
        "typo-model-leaves-nothing",
        ["run", *TINY[2:], "--model", "cifar-resnet2O"],
        2,
        "unknown model 'cifar-resnet2O' (did you mean 'cifar-resnet20'?)",
        no_file,
        one_line=True,
    ),
    Fault(
        "typo-precision", ["run", *TINY, "--precisions", "fp23"], 2, "(did you mean 'fp32'?)", no_file, one_line=True
    ),
    Fault(
        "typo-backend",
        ["run", *TINY, "--modes", "eager,compil"],
        2,
        "(did you mean 'compile'?)",
        no_file,
        one_line=True,
    ),
    Fault(
        "typo-loadgen-scenario",
        ["loadgen", *TINY[:2], "--device", "cpu", "--scenarios", "Sever", "--db", "{db}"],
        2,
        "(did you mean 'Server'?)",
        no_file,
        one_line=True,
    ),
    Fault(
        "typo-config-key",
        ["run", *TINY, "--config", "{tmp}/typo.toml"],
        2,
        "(did you mean 'precisions'?)",
        no_file,
        lambda tmp: (tmp / "typo.toml").write_text('precsions = "fp32"\n') and None,
        one_line=True,
    ),
    Fault(
        "missing-data-leaves-nothing", ["train", *TINY, "--data", "{tmp}/none"], 2, "not found", no_file, one_line=True
    ),
    Fault(
        "typo-model-of-a-training-run",
        ["train", "--epochs", "1", "--model", "cifar-resnet2O", "--device", "cpu", "--db", "{db}"],
        2,
        "(did you mean 'cifar-resnet20'?)",
        no_file,
        one_line=True,
    ),
    # item 11: a truncated .tar.gz is a data error naming the archive (was "interrupted", exit 130), every command
    *[
        Fault(
            f"truncated-archive-{cmd}",
            [cmd, "--data", "{arc}", "--device", "cpu", "--db", "{db}"],
            2,
            "cannot read archive",
            no_file,
            _truncated,
            one_line=True,
        )
        for cmd in ("run", "train", "profile", "loadgen", "input-pipeline")
    ],
    # item 14: a duplicate entry runs once, with one note line (was a UNIQUE constraint crash mid-run)
    Fault(
        "duplicate-batch-size",
        ["run", *TINY, "--batch-sizes", "2,2"],
        0,
        "note: batch size 2 given more than once",
        _one_row_per(1),
        env=ONE_THREAD,
    ),
    Fault(
        "duplicate-model",
        ["run", *TINY, "--model", "cifar-resnet20,cifar-resnet20"],
        0,
        "note: model cifar-resnet20 given more than once",
        _one_row_per(1),
        env=ONE_THREAD,
    ),
    Fault(
        "duplicate-precision-and-mode",
        ["run", *TINY, "-p", "fp32,fp32", "--modes", "eager,eager"],
        0,
        "note: precision fp32 given more than once",
        _one_row_per(1),
        env=ONE_THREAD,
    ),
    # item 20: numbers out of range are refused up front (was an internal OverflowError and a `running` run)
    Fault(
        "huge-batch-size",
        ["run", *TINY, "-b", "99999999999999999999"],
        2,
        "invalid batch_sizes 99999999999999999999",
        no_file,
        one_line=True,
    ),
    Fault(
        "huge-images", ["run", *TINY, "--images", "99999999999999999999"], 2, "invalid images", no_file, one_line=True
    ),
    Fault(
        "cost-nan-price",
        ["cost", "--price-per-hour", "nan", "--db", "{path}"],
        2,
        "invalid price_per_hour nan",
        setup=_store_with_one_run,
        one_line=True,
    ),
    Fault(
        "report-names-the-missing-store",
        ["report", "--run", "{tmp}/nonexist.db:1", "--html", "{tmp}/r.html", "--db", "{tmp}/default.db"],
        2,
        "no results store at {tmp}/nonexist.db",
        one_line=True,
    ),
    Fault(
        "gif-and-tif-decoded",
        ["run", *TINY, "--data", "{tmp}/mixed", "--images", "4"],
        0,
        store=_four_decoded,
        setup=_gif_and_tif,
        env=ONE_THREAD,
    ),
    # item 13: user code cannot take accelbench over
    Fault(
        "factory-exits",
        ["run", *TINY, "--model", "lifecycle_factories:exits"],
        1,
        "called sys.exit(0)",
        _error_row("model factory 'lifecycle_factories:exits' called sys.exit(0)"),
    ),
    Fault(
        "factory-argparse-required",
        ["run", *TINY, "--model", "lifecycle_factories:parses_required"],
        1,
        "the following arguments are required: --width",
        _error_row("called sys.exit(2)"),
    ),
    Fault(
        "factory-argparse-optional",
        ["run", *TINY, "--model", "lifecycle_factories:parses_optional"],
        0,
        store=_one_row_per(1),
        env=ONE_THREAD,
    ),
    # item 19: what the README says a factory's module may declare is read from the module
    Fault(
        "factory-module-declarations",
        ["run", *TINY, "--model", "lifecycle_factories:plain"],
        0,
        store=_declared_on_module,
        env=ONE_THREAD,
    ),
    # item 15: outputs that cannot be written are refused before anything runs (exit 2), or after the sweep one line
    # and exit 1 with the run stored; never "internal error ... a bug"
    Fault("json-is-a-directory", ["run", *TINY, "--json", "{tmp}"], 2, "is a directory", no_file, one_line=True),
    Fault(
        "json-under-a-file",
        ["run", *TINY, "--json", "{tmp}/f.txt/out.json"],
        2,
        "is a file, not a folder",
        no_file,
        lambda tmp: (tmp / "f.txt").write_text("x") and None,
        one_line=True,
    ),
    Fault(
        "json-read-only-place",
        ["run", *TINY, "--json", "/proc/out.json"],
        2,
        "cannot write /proc/out.json",
        no_file,
        one_line=True,
    ),
    Fault(
        "json-disk-full",
        ["run", *TINY, "--json", "/dev/full"],
        1,
        "cannot write /dev/full: No space left on device",
        _stored_and_complete,
        env=ONE_THREAD,
    ),
    Fault(
        "json-missing-parent-created",
        ["run", *TINY, "--json", "{tmp}/new/dir/out.json"],
        0,
        store=lambda db, tmp: json_ok(tmp / "new/dir/out.json"),
        env=ONE_THREAD,
    ),
    Fault(
        "export-to-a-directory",
        ["export", "-o", "{tmp}/out", "--db", "{path}"],
        2,
        "is a directory",
        setup=_store_then_folder,
        one_line=True,
    ),
    Fault(
        "export-json-to-a-directory",
        ["export", "-f", "json", "-o", "{tmp}/out", "--db", "{path}"],
        2,
        "is a directory",
        setup=_store_then_folder,
        one_line=True,
    ),
    Fault(
        "export-disk-full",
        ["export", "-o", "/dev/full", "--db", "{path}"],
        1,
        "cannot write /dev/full: No space left on device",
        setup=_store_with_one_run,
        one_line=True,
    ),
    Fault(
        "export-missing-parent-created",
        ["export", "-o", "{tmp}/a/b/runs.csv", "--db", "{path}"],
        0,
        store=lambda db, tmp: csv_ok(tmp / "a/b/runs.csv"),
        setup=_store_with_one_run,
    ),
    Fault(
        "report-html-to-a-directory",
        ["report", "--html", "{tmp}/out", "--db", "{path}"],
        2,
        "is a directory",
        setup=_store_then_folder,
        one_line=True,
    ),
    Fault(
        "compare-json-to-a-directory",
        ["compare", "1", "1", "--json", "{tmp}/out", "--db", "{path}"],
        2,
        "is a directory",
        setup=_store_then_folder,
        one_line=True,
    ),
]


def json_ok(path: Path) -> None:
    import json

    assert json.loads(path.read_text())["status"] == "complete"


def csv_ok(path: Path) -> None:
    assert path.is_file() and not list(path.parent.glob(".*.tmp")), list(path.parent.iterdir())


@pytest.mark.parametrize("fault", FAULTS, ids=[f.id for f in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    fault = Fault(**{**fault.__dict__, "message": fault.message.format(tmp=tmp_path) if fault.message else None})
    p = check(fault, tmp_path)
    if fault.one_line and fault.code == 2:  # refused: the header is printed after the checks, so never here
        assert "accelbench run:" not in p.stdout and "accelbench train:" not in p.stdout, p.stdout


def test_a_refused_command_keeps_an_existing_store(tmp_path: Path) -> None:
    """Only a store the refused command created is removed: an existing (even empty) store stays."""

    from accelbench.store import Store

    db = tmp_path / "kept.db"
    Store(db).close()
    p = run_cli("run", *[a.format(db=db) for a in TINY], "--model", "nosuchmodel")
    assert p.returncode == 2 and db.exists(), p.stderr


def test_only_created_stores_that_hold_nothing_are_discarded(tmp_path: Path) -> None:
    """What ``accelbench.cli.main`` does as a command ends (also after Ctrl-C before a run existed): the store files
    this process created and left empty are deleted; one holding a run, or one that existed before, stays."""
    from accelbench.store import Store, discard_created, schema

    before = tmp_path / "before.db"
    Store(before).close()
    schema._CREATED.clear()  # as if another process had created it
    Store(before).close()
    Store(tmp_path / "empty.db").close()
    with Store(tmp_path / "used.db") as st:
        st.begin_run("inference", {}, "h", {})
    assert discard_created() == [str(tmp_path / "empty.db")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["before.db", "used.db"]


@pytest.mark.parametrize(
    "body, why",
    [
        ("def broken(:\n", "SyntaxError"),
        ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
        ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
        ("import argparse\nargparse.ArgumentParser().parse_args()\n", "unrecognized arguments"),
    ],
)
def test_a_factory_module_failing_at_import_is_one_line(body: str, why: str, tmp_path: Path) -> None:
    """Item 13: whatever a factory's module raises at import (not only ImportError) is "cannot import model
    factory", exit 2, one line, no store (was "internal error ... a bug", exit 1, or accelbench's exit)."""

    (tmp_path / "usermod.py").write_text(body)
    db = tmp_path / "u.db"
    args = ["run", *[a.format(db=db) for a in TINY], "--model", "usermod:make"]
    if "argparse" in body:  # accelbench's own flags would reach it without the isolation
        args = ["run", "--model", "usermod:make", "--device", "cpu", "--db", str(db)]
    p = run_cli(*args, cwd=tmp_path)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    if "argparse" in body:  # it parses an empty command line: it imports, and `make` is missing
        assert p.returncode == 2 and "has no attribute 'make'" in p.stderr, p.stderr
    else:
        assert p.returncode == 2 and len(lines) == 1, p.stderr
        assert "cannot import model factory 'usermod:make'" in lines[0] and why in lines[0], lines
    assert "Traceback" not in p.stderr and not db.exists()


def test_a_factory_in_the_current_folder_imports_with_the_script_too(tmp_path: Path) -> None:
    """Item 19: ``accelbench`` (a console script: sys.path[0] is its bin folder, not the current one) imports a
    factory module from the current folder, as ``python -m accelbench`` does.

    End to end: a real process started through the console script pip writes."""
    import subprocess
    import sys

    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    (work / "mymodels.py").write_text((Path(__file__).parent / "lifecycle_factories.py").read_text())
    script = bin_dir / "accelbench"
    script.write_text("import sys\nfrom accelbench.cli import main\nsys.exit(main())\n")  # what pip writes
    db = work / "s.db"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    p = subprocess.run(
        [sys.executable, str(script), "run", *[a.format(db=db) for a in TINY], "--model", "mymodels:plain"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stderr
    assert statuses(db) == ["ok"]


def test_gpus_2_factory_exit_is_an_error_row(tmp_path: Path) -> None:
    """Item 13 under ``--gpus 2`` (two CPU processes): a factory's sys.exit is the case's error row, exit 1
    (was "no cases ran", run complete, exit 0)."""

    db = tmp_path / "g.db"
    p = run_cli(
        "run", *[a.format(db=db) for a in TINY], "--model", "lifecycle_factories:exits", "--gpus", "2", env=ONE_THREAD
    )
    assert p.returncode == 1, p.stdout + p.stderr
    rows = [r for r in cases(db) if r.get("aggregate") == 1]
    assert [r["status"] for r in rows] == ["error"] and "sys.exit(0)" in rows[0]["error"], rows
    assert [r[2] for r in runs(db)] == ["complete"]


def test_a_stale_running_run_reads_interrupted(tmp_path: Path) -> None:
    """Item 20: a run whose process died while it ran shows ``interrupted (stale)``, not ``running`` forever."""

    from accelbench.store import Store

    db = tmp_path / "stale.db"
    with Store(db) as st:
        rid = st.begin_run("inference", {}, "h", {})
    with sqlite3.connect(db) as con:  # its process is gone (a pid that cannot exist) and its heartbeat old
        con.execute(
            "UPDATE runs SET status='running', lease_pid=?, lease_token='gone', lease_heartbeat=0", (2**22 + 7,)
        )
    p = run_cli("results", "--runs", "--db", str(db))
    assert p.returncode == 0 and "interrupted (stale)" in p.stdout, p.stdout
    assert Store(db).run(rid)["status"] == "interrupted (stale)"


def test_known_torch_noise_is_filtered_and_notes_are_one_line() -> None:
    """Item 20: torch's known noise (a CPU-only machine's "No CUDA runtime", torchao's deprecated enum
    registration, Inductor's tensor-copy warning) no longer reaches stderr during a run, while any other record
    or warning from the same places still does, and accelbench's own notes are one ``note:`` line."""
    import subprocess
    import sys

    code = """
import logging, warnings
from accelbench.core import quiet
from accelbench.core.errors import SettingsNote
quiet.install(lambda text: print("NOTE", text))
logging.basicConfig(format="LOG %(name)s %(message)s")
logging.getLogger("torch.utils.cpp_extension").warning("No CUDA runtime is found, using CUDA_HOME='/usr/local'")
logging.getLogger("torch.utils.cpp_extension").warning("a real problem")
logging.getLogger("torch.utils._pytree").warning("<enum 'K'> is an Enum subclass and is now natively supported")
warnings.warn_explicit("To copy construct from a tensor, it is recommended", UserWarning, "mkldnn_lowerings.py", 1,
                       module="torch._inductor.mkldnn_lowerings")
warnings.warn_explicit("To copy construct from a tensor, it is recommended", UserWarning, "mine.py", 1, module="mine")
warnings.warn(SettingsNote("batch size 2 given more than once: each runs once"))
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "No CUDA runtime" not in out and "Enum subclass" not in out, out
    assert "LOG torch.utils.cpp_extension a real problem" in out and "mine.py:1: UserWarning: To copy" in out, out
    assert "NOTE batch size 2 given more than once: each runs once" in p.stdout and "SettingsNote" not in out, out


def test_a_file_size_limit_never_leaves_a_truncated_export(tmp_path: Path) -> None:
    """Item 15: under a file-size limit (``ulimit -f``) ``export -o`` fails in one line (exit 1) and the file it
    would have replaced is left as it was (written to a temporary file and renamed, never in place).

    End to end: a real process (the limit is set in it before it starts)."""
    import resource

    from accelbench.store import Store

    db, out = tmp_path / "big.db", tmp_path / "runs.csv"
    with Store(db) as st:
        rid = st.begin_run("inference", {}, "h", {})
        for i in range(20):
            st.add_case(rid, {"case_key": f"k{i}", "workload": "inference", "status": "ok", "note": "x" * 500})
        st.finish_run(rid, "complete")
    out.write_text("the previous export\n")

    def limit() -> None:  # the CSV (> 10 kB) cannot be written under 4 kB
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    p = run_cli("export", "-o", str(out), "--db", str(db), timeout=300, preexec_fn=limit)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode == 1 and len(lines) == 1 and f"cannot write {out}: File too large" in lines[0], p.stderr
    assert out.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.db", "runs.csv"]  # no temporary file left


def test_an_eof_error_is_never_reported_as_ctrl_c(tmp_path: Path, monkeypatch, capsys) -> None:
    """Item 11's root: click turns an EOFError escaping a command into Abort, as it does Ctrl-C; main() tells them
    apart, so an unexpected EOFError is an internal error (exit 1), never "interrupted" (exit 130)."""
    from accelbench.cli import main
    from accelbench.store import Store

    db = tmp_path / "e.db"
    Store(db).close()

    def runs(self):
        raise EOFError("Compressed file ended before the end-of-stream marker was reached")

    monkeypatch.setattr(Store, "runs", runs)
    with pytest.raises(SystemExit) as exit_info:
        main(["results", "--runs", "--db", str(db)])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "internal error: EOFError: Compressed file ended" in err, err
    assert "interrupted" not in err
