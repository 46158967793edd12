"""A profile run's roofline survives export and import: a real CPU profile run (its measured ceilings, kernel rows
replayed from a captured Nsight Compute CSV) exported as JSON and as Parquet and imported into a fresh store keeps
the ceilings its rows were measured against and its kernel table, so the imported run's report draws the roofline the
original's drew (same roofs, same points) and its per-case model and kernel charts are drawn from the imported store
alone."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from conftest import run_cli

from accelbench.ceilings.cache import run_ceilings, save_ceilings
from accelbench.ceilings.measure import Ceilings
from accelbench.scenarios.profile import storage
from accelbench.store import Store

NCU = Path(__file__).parent / "data" / "ncu" / "cifar-resnet20-inference-fp32-bs8-eager.csv.gz"


@pytest.fixture(scope="module")
def profiled(tmp_path_factory):
    """``accelbench profile`` of cifar-resnet20 on the CPU (ncu off), then its case's kernels replayed from a
    captured ncu CSV (the CPU has no ncu), as ``accelbench profile`` stores them."""
    from accelbench.scenarios.profile.reprocess import reprocess

    db = tmp_path_factory.mktemp("profile") / "src.db"
    run_cli(
        *("profile", "-m", "cifar-resnet20", "-b", "8", "--precisions", "fp32", "--device", "cpu"),
        *("--ncu", "off", "--idle-s", "0", "--db", str(db)),
        check=True,
    )
    st = Store(db)
    (rec,) = st.records(1)
    reprocess(st, rec["case_id"], gzip.open(NCU, "rt").read(), run_ceilings(st, st.run(1)))
    st.close()
    return db


def _scatter(store, run_id) -> tuple[list, list]:
    """The roofline the report draws for the run: its roof lines and its points (x, y), as matplotlib holds them."""
    from accelbench.report.roofline import figure, pyplot, summary_points

    fig = figure(run_ceilings(store, store.run(run_id)), summary_points(store.records(run_id)), "t")
    (ax,) = fig.axes
    lines = [line.get_xydata().tolist() for line in ax.get_lines()]
    points = [c.get_offsets().tolist() for c in ax.collections]
    pyplot().close(fig)
    return lines, points


def _kernels(store, run_id) -> list[dict]:
    (rec,) = store.records(run_id)
    return [{k: v for k, v in r.items() if k != "case_id"} for r in storage.kernel_rows(store, rec["case_id"])]


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_an_imported_profile_run_draws_the_original_roofline(profiled, tmp_path, fmt):
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    path, dst = tmp_path / f"run.{fmt}", tmp_path / "dst.db"
    run_cli("export", "--run", "1", "--format", fmt, "--output", str(path), "--db", str(profiled), check=True)
    run_cli("import", str(path), "--db", str(dst), check=True)
    orig, new = Store(profiled), Store(dst)
    ceilings = run_ceilings(orig, orig.run(1))
    assert ceilings is not None and ceilings.matmul_flops_per_s["fp32"] > 0
    assert run_ceilings(new, new.run(1)) == ceilings  # kept with the imported run
    assert not new.has_table("ceilings")  # not the importing machine's device cache
    kernels = _kernels(orig, 1)
    assert len(kernels) == 72 and _kernels(new, 1) == kernels

    lines, points = _scatter(orig, 1)
    assert points and points[0] and _scatter(new, 1) == (lines, points)

    html, md = tmp_path / "r.html", tmp_path / "r.md"
    run_cli("report", "--db", str(dst), "--html", str(html), "--markdown", str(md), check=True)
    text = html.read_text()
    section = text[text.index("Roofline") :]
    assert "data:image/png;base64," in section and "no ceilings stored" not in text

    from accelbench.report.roofline import case_charts

    (rec,) = new.records(1)
    out = case_charts(rec, storage.kernel_rows(new, rec["case_id"]), run_ceilings(new, new.run(1)), tmp_path / "c")
    assert sorted(Path(p).name for p in out["charts"]) == [
        "c-kernels.png",
        "c-kernels.svg",
        "c-model.png",
        "c-model.svg",
    ]
    assert all(Path(p).stat().st_size > 10_000 for p in out["charts"])


def test_the_export_carries_the_ceilings_as_of_the_run(profiled, tmp_path):
    """A later re-measurement of the device does not move an earlier run's roofs, in the store or in its export."""
    import shutil

    db = tmp_path / "copy.db"
    shutil.copy(profiled, db)
    st = Store(db)
    before = run_ceilings(st, st.run(1))
    later = Ceilings(
        device_name=before.device_name,
        matmul_flops_per_s={"fp32": 1.0},
        dram_bytes_per_s=1.0,
        measured_at=st.run(1)["finished_at"] + 60,
    )
    save_ceilings(st, later)
    assert storage.cached_ceilings(st, before.device_name) == later  # the device's newest, for the next run
    assert run_ceilings(st, st.run(1)) == before
    out = tmp_path / "run.json"
    run_cli("export", "--run", "1", "--format", "json", "--output", str(out), "--db", str(db), check=True)
    doc = json.loads(out.read_text())
    assert Ceilings.from_dict(doc["ceilings"]) == before and len(doc["results"][0]["kernels"]) == 72


def test_a_large_kernel_table_is_left_out_and_counted(profiled, tmp_path, monkeypatch):
    """Past :data:`storage.KERNELS_EXPORT_MAX` kernel rows a run's export carries none and says how many it left."""
    from accelbench import api

    monkeypatch.setattr(storage, "KERNELS_EXPORT_MAX", 71)
    out = tmp_path / "run.json"
    api.export_json(Store(profiled), 1, out)
    doc = json.loads(out.read_text())
    assert doc["kernels_left_out"] == 72 and "kernels" not in doc["results"][0] and doc["ceilings"]


def test_an_old_export_with_kernels_imports_them_not_as_a_column(profiled, tmp_path):
    """Exports written before this one kept ``kernels`` (with the old case id) in each row: the rows import
    without a ``kernels`` column, the kernels into the kernel table."""
    out = tmp_path / "run.json"
    run_cli("export", "--run", "1", "--format", "json", "--output", str(out), "--db", str(profiled), check=True)
    doc = json.loads(out.read_text())
    doc["results"][0]["kernels"] = [{**k, "case_id": 99} for k in doc["results"][0]["kernels"]]
    out.write_text(json.dumps(doc))
    dst = tmp_path / "dst.db"
    run_cli("import", str(out), "--db", str(dst), check=True)
    new = Store(dst)
    assert "kernels" not in new.records(1)[0] and len(_kernels(new, 1)) == 72
