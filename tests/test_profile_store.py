"""Profile tables in the store: ceilings cache, kernel rows, schema migration, re-deriving from a CSV."""

import gzip
import json
from pathlib import Path

import pytest

from accelbench.ceilings.measure import DATASHEETS, Ceilings, datasheet
from accelbench.scenarios.profile import storage
from accelbench.scenarios.profile.reprocess import reprocess
from accelbench.store import Store

DATA = Path(__file__).parent / "data" / "ncu"


def _ceil(bw, t):
    return Ceilings(
        device_name="NVIDIA H200", matmul_flops_per_s={"fp32": 5e13, "bf16": 8e14}, dram_bytes_per_s=bw, measured_at=t
    )


def test_ceilings_cache_newest_wins(db):
    s = Store(db)
    assert storage.cached_ceilings(s, "NVIDIA H200") is None
    storage.save_ceilings(s, _ceil(4.0e12, 1.0))
    storage.save_ceilings(s, _ceil(4.2e12, 2.0))
    assert storage.cached_ceilings(s, "NVIDIA H200") == _ceil(4.2e12, 2.0)
    assert storage.cached_ceilings(s, "NVIDIA H100 80GB HBM3") is None


def test_datasheet_lookup():
    assert datasheet("NVIDIA H200")["dram_bytes_per_s"] == 4.8e12
    assert datasheet("NVIDIA H100 80GB HBM3")["flops_per_s"]["bf16"] == 989.5e12
    assert datasheet("Intel(R) Xeon(R) Processor") is None
    devices = json.loads(DATASHEETS.read_text())["devices"]
    assert {"NVIDIA H100 80GB HBM3", "NVIDIA H200"} <= set(devices), sorted(devices)  # looked up above
    for entry in devices.values():
        assert entry["source"] and entry["dram_bytes_per_s"] > 0 and entry["flops_per_s"]["fp32"] > 0


def test_old_kernel_table_gets_new_columns(db):
    s = Store(db)
    s.conn.execute(
        "CREATE TABLE profile_kernels (case_id INTEGER, idx INTEGER, name TEXT, family TEXT, time_s REAL, "
        "dram_read_bytes REAL, dram_write_bytes REAL, flops_fp32 REAL, flops_fp16 REAL, flops_fp64 REAL, "
        "flops_tensor REAL, tensor_source TEXT)"
    )
    storage.save_kernels(
        s, 1, [{"idx": 0, "name": "k", "family": "other", "time_s": 1.0, "layer": 3, "analytic_flops": 2.0}]
    )
    row = s.conn.execute("SELECT idx, layer, analytic_flops FROM profile_kernels").fetchone()
    assert tuple(row) == (0, 3, 2.0)


def test_reprocess_a_stored_case_from_its_csv(db):
    import torch

    from accelbench.core.analytic import count_flops
    from accelbench.models import create_model

    m = create_model("cifar-resnet20", pretrained=False).module.to("meta").eval()
    x = torch.empty(8, 3, 32, 32, device="meta")
    with torch.no_grad():
        flops, _, _, calls = count_flops(lambda: m(x))
    s = Store(db)
    run = s.begin_run("profile", {}, "h", {"device_name": "NVIDIA H200"})
    cid = s.add_case(
        run,
        {
            "case_key": "k",
            "workload": "profile",
            "status": "ok",
            "precision": "fp32",
            "step": "inference",
            "analytic_flops": flops,
            "analytic_flop_calls": [list(c) for c in calls],
        },
    )
    csv_text = gzip.open(DATA / "cifar-resnet20-inference-fp32-bs8-eager.csv.gz", "rt").read()
    fields = reprocess(s, cid, csv_text, _ceil(4.2e12, 1.0))
    rec = s.case(cid)
    assert rec["ncu_status"] == "ok" and rec["ncu_kernels"] == fields["ncu_kernels"] == 72
    assert rec["layers_paired"] == 20 == len(calls)  # 19 convolutions + the classifier
    assert rec["flops_agreement"] == pytest.approx(rec["ncu_gemm_conv_flops"] / flops - 1)
    kernels = storage.load_kernels(s, cid)
    assert len(kernels) == 72 and sum(k.time_s for k in kernels) == pytest.approx(rec["ncu_time_s"])
    n_layer = s.conn.execute(
        "SELECT COUNT(*) FROM profile_kernels WHERE case_id=? AND analytic_flops IS NOT NULL", (cid,)
    ).fetchone()[0]
    assert n_layer == 20
    reprocess(s, cid, csv_text, _ceil(4.2e12, 1.0))  # again: rows replaced, not doubled
    assert len(storage.load_kernels(s, cid)) == 72
