"""Input pipeline on the real bundled PNGs, storage reads, and the train / input-pipeline commands."""

import json

import pytest
import torch
from typer.testing import CliRunner

from accelbench import api
from accelbench.cli import app
from accelbench.core.errors import DataError
from accelbench.scenarios.train import pipeline
from accelbench.scenarios.train.datasets import DecodeDataset, load_encoded
from accelbench.store import Store

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("one_thread")


def test_decoded_pngs_equal_the_shared_loader():
    from accelbench.data import load_images

    enc = load_encoded("cifar10-train-5k", 40)
    ref = load_images("cifar10-train-5k", 40)
    ds = DecodeDataset(enc, None)  # no plan: decode only
    assert torch.equal(torch.stack([ds[i][0] for i in range(40)]), ref.images)
    assert torch.equal(enc.labels, ref.labels) and enc.label_space == "cifar10"
    assert ds[0][0].dtype == torch.uint8 and DecodeDataset(enc, 48)[0][0].shape == (3, 48, 48)


def test_loader_throughput_with_workers_on_real_pngs():
    enc = load_encoded("cifar10-train-5k", 200)
    for workers in (0, 2):
        r = pipeline.loader_throughput(enc, None, 32, workers, pin=True, min_batches=4)
        assert r["loader_samples_per_s"] > 0 and r["loader_startup_s"] > 0
        assert r["loader_workers"] == workers and r["loader_batches_timed"] == max(4, 3 * workers)
        assert r["loader_pin_memory"] is torch.cuda.is_available()


def test_storage_read_cold_then_warm():
    files = pipeline.dataset_files("cifar10-train-5k")
    size = files[0].stat().st_size
    cold, warm = (
        pipeline.storage_cold(files, repeats=2, method="fadvise"),
        pipeline.storage_warm(files, min_warm_s=0.05),
    )
    assert cold["cache_state"] == "cold" and cold["cold_method"] == "fadvise" and cold["passes"] == 2
    assert cold["read_bytes"] == warm["read_bytes"] == size
    assert cold["read_mb_per_s"] == pytest.approx(size / 1e6 / cold["read_s"])
    if cold["page_cache_resident_fraction"] is not None:  # mincore available: the eviction really happened
        assert cold["page_cache_resident_fraction"] < 0.5 and warm["page_cache_resident_fraction"] == 1.0


def test_input_pipeline_run_is_stored(db):
    out = api.input_pipeline(
        api.spec(
            "input_pipeline",
            {"images": 128, "workers": (0,), "batch_size": 32, "min_batches": 2, "evict": "fadvise", "device": "cpu"},
        ),
        Store(db),
    )
    rid, recs = out.run_id, out.records
    by = {r["case_key"]: r for r in recs}
    assert set(by) == {"loader|workers=0", "resident", "storage|cold", "storage|warm"}
    assert len(recs) == 4 and all(r["status"] == "ok" for r in recs)
    assert by["resident"]["loader_samples_per_s"] > 0
    st = Store(db)
    assert st.run(rid)["kind"] == "input-pipeline" and len(st.cases(rid)) == 4
    assert len(st.series(by["storage|warm"]["case_id"], "read_mb_per_s")) == by["storage|warm"]["passes"]
    # missing data is an input error found before a run is created (exit 2 in the CLI), not error rows
    with pytest.raises(DataError, match="data '/nonexistent' not found"):
        api.input_pipeline(
            api.spec("input_pipeline", {"data": "/nonexistent", "workers": "0", "device": "cpu"}), Store(db)
        )
    assert [r["run_id"] for r in Store(db).runs()] == [rid]


def test_cli_train_sweep_and_json(tmp_path):
    db, js = tmp_path / "r.db", tmp_path / "r.json"
    res = runner.invoke(
        app,
        [
            "train",
            "--device",
            "cpu",
            "-b",
            "4",
            "-n",
            "8",
            "--warmup-batches",
            "1",
            "--min-timed-batches",
            "2",
            "--db",
            str(db),
            "--json",
            str(js),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "img/s" in res.output and "run 1 stored in" in res.output
    doc = json.loads(js.read_text())
    assert doc["kind"] == "training" and doc["results"][0]["status"] == "ok"
    assert doc["results"][0]["model"] == "cifar-resnet20"
    # training rows carry the same derived columns as inference rows, and `results` shows training columns
    assert (
        set(doc["results"][0]["validity"].split(",")) <= {"ok", "latency-spread", "cpu-contention"}
        and "cost_usd" in doc["results"][0]
    )
    shown = runner.invoke(app, ["results", "--db", str(db), "--wide"])
    assert shown.exit_code == 0 and "Step p50 (ms)" in shown.output, shown.output


def test_cli_train_epochs_table_and_plot(tmp_path):
    png = tmp_path / "acc.png"
    res = runner.invoke(
        app,
        [
            "train",
            "--device",
            "cpu",
            "--epochs",
            "1",
            "-b",
            "32,64",
            "-n",
            "128",
            "--eval-images",
            "50",
            "--placement",
            "resident",
            "--target-top1",
            "5",
            "--db",
            str(tmp_path / "c.db"),
            "--plot",
            str(png),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "bs=32 Top-1" in res.output and "bs=64 Top-1" in res.output and "cuDNN determinism off" in res.output
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    df = Store(tmp_path / "c.db").cases()
    assert sorted(df[df.row_type == "summary"].batch_size.tolist()) == [32, 64]


@pytest.mark.parametrize(
    "args, msg",
    [
        (["train", "--epochs", "1", "--loader-workers", "2"], "loader-workers applies to a step-throughput sweep"),
        (["train", "--eval-data", "cifar10-test"], "eval-data applies to a convergence run"),
        (["train", "--epochs", "1", "-p", "fp16"], "invalid precision 'fp16'"),
        (["train", "--epochs", "1", "-m", "a,b"], "invalid model"),
        (["train", "--device", "cuda:7"], "invalid device"),
        (["input-pipeline", "--workers", "x"], "invalid workers 'x'"),
    ],
)
def test_cli_bad_input_is_one_line(args, msg, tmp_path):
    res = runner.invoke(app, args + ["--db", str(tmp_path / "x.db")])
    assert res.exit_code == 2 and msg in res.output and len(res.output.strip().splitlines()) == 1


def test_cli_input_pipeline(tmp_path):
    res = runner.invoke(
        app,
        [
            "input-pipeline",
            "-n",
            "64",
            "-w",
            "0",
            "-b",
            "32",
            "--min-batches",
            "1",
            "--evict",
            "fadvise",
            "--device",
            "cpu",
            "--db",
            str(tmp_path / "p.db"),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "loader" in res.output and "resident" in res.output and "cold" in res.output and "warm" in res.output
