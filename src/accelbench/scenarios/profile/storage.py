"""Profile tables in the accelbench SQLite store (beside ``runs``/``cases``/``samples``).

Tables (created on first use; the device's ``ceilings`` table is :mod:`accelbench.ceilings.cache`'s):
    profile_kernels(case_id, idx, name, family, time_s, dram_read_bytes, dram_write_bytes, flops_fp32,
        flops_fp16, flops_fp64, flops_tensor, tensor_source, intensity_flop_per_byte, achieved_flops_per_s,
        achieved_bytes_per_s, ceiling_name, bound, layer, analytic_flops): one row per profiled kernel (see
        :func:`accelbench.scenarios.profile.results.kernel_row`), linked to the profile case in ``cases``.
"""

from __future__ import annotations

from accelbench.ceilings.cache import cached_ceilings, save_ceilings  # noqa: F401  (the report reads them here)
from accelbench.core.kernels import KernelMetrics

_DDL = """
CREATE TABLE IF NOT EXISTS profile_kernels (
    case_id INTEGER NOT NULL REFERENCES cases(case_id),
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    family TEXT NOT NULL,
    time_s REAL, dram_read_bytes REAL, dram_write_bytes REAL,
    flops_fp32 REAL, flops_fp16 REAL, flops_fp64 REAL, flops_tensor REAL,
    tensor_source TEXT, intensity_flop_per_byte REAL, achieved_flops_per_s REAL, achieved_bytes_per_s REAL,
    ceiling_name TEXT, bound TEXT, layer INTEGER, analytic_flops REAL
);
CREATE INDEX IF NOT EXISTS profile_kernels_case ON profile_kernels(case_id);
"""


_KERNEL_COLUMNS = {
    "tensor_source": "TEXT",
    "intensity_flop_per_byte": "REAL",
    "achieved_flops_per_s": "REAL",
    "achieved_bytes_per_s": "REAL",
    "ceiling_name": "TEXT",
    "bound": "TEXT",
    "layer": "INTEGER",
    "analytic_flops": "REAL",
}


def _ensure(store) -> None:
    """Create the tables; add columns that a store written by an older accelbench lacks."""
    store.ensure_table(_DDL, "profile_kernels", _KERNEL_COLUMNS)


def save_kernels(store, case_id: int, rows: list[dict]) -> None:
    """Store the per-kernel rows (:func:`accelbench.scenarios.profile.results.kernel_row`) of one profiled case."""
    _ensure(store)
    store.insert_rows("profile_kernels", [{"case_id": case_id, **r} for r in rows])


def replace_kernels(store, case_id: int, rows: list[dict]) -> None:
    """Delete the case's kernel rows and store ``rows`` instead (after re-parsing a CSV)."""
    _ensure(store)
    store.delete_rows("profile_kernels", {"case_id": case_id})
    save_kernels(store, case_id, rows)


def kernel_rows(store, case_id: int) -> list[dict]:
    """The stored kernel rows of ``case_id`` as dicts, in launch order."""
    _ensure(store)
    return store.rows("profile_kernels", {"case_id": case_id}, order_by="idx")


def load_kernels(store, case_id: int) -> list[KernelMetrics]:
    """The kernels stored for ``case_id``, in launch order (``tensor_ops_by_source`` keeps the main source only)."""
    return [
        KernelMetrics(
            index=r["idx"],
            name=r["name"],
            family=r["family"],
            time_s=r["time_s"],
            dram_read_bytes=r["dram_read_bytes"],
            dram_write_bytes=r["dram_write_bytes"],
            flops_fp32=r["flops_fp32"],
            flops_fp16=r["flops_fp16"],
            flops_fp64=r["flops_fp64"],
            flops_tensor=r["flops_tensor"],
            tensor_ops_by_source={r["tensor_source"]: r["flops_tensor"]} if r["tensor_source"] else {},
        )
        for r in kernel_rows(store, case_id)
    ]


KERNELS_EXPORT_MAX = 10_000  # kernel rows a run's export carries (about 0.6 kB of JSON each, 6 MB at most)


def export_extra(store, run_id: int, doc: dict) -> None:
    """Add the kernels of each case (``results[i]["kernels"]``) to a run document, when the run has at most
    :data:`KERNELS_EXPORT_MAX` of them (a Nsight Compute profile of one step: a few hundred to a few thousand); a
    larger table stays in the store and ``doc["kernels_left_out"]`` counts it. The ceilings are the document's own
    (:func:`accelbench.store.export.run_meta`)."""
    tables = {rec["case_key"]: kernel_rows(store, rec["case_id"]) for rec in doc["results"]}
    total = sum(map(len, tables.values()))
    if total > KERNELS_EXPORT_MAX:
        doc["kernels_left_out"] = total
        return
    for rec in doc["results"]:
        rec["kernels"] = [{k: v for k, v in r.items() if k != "case_id"} for r in tables[rec["case_key"]]]


def import_extra(store, doc: dict, case_ids: dict[str, int]) -> None:
    """Store the kernels an export carried (``results[i]["kernels"]``) under the imported cases' ids."""
    for rec in doc["results"]:
        rows = rec.get("kernels")
        if isinstance(rows, list) and rows and rec["case_key"] in case_ids:
            save_kernels(
                store, case_ids[rec["case_key"]], [{k: v for k, v in r.items() if k != "case_id"} for r in rows]
            )
