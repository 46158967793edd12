"""Profile tables in the accelbench SQLite store (beside ``runs``/``cases``/``samples``).

Tables (created on first use):
    ceilings(ceiling_id, device_name, measured_at, ceilings_json, env_json): one row per measurement;
        the newest row of a device is its cached ceilings.
    profile_kernels(case_id, idx, name, family, time_s, dram_read_bytes, dram_write_bytes, flops_fp32,
        flops_fp16, flops_fp64, flops_tensor, tensor_source, intensity_flop_per_byte, achieved_flops_per_s,
        achieved_bytes_per_s, ceiling_name, bound, layer, analytic_flops): one row per profiled kernel (see
        :func:`accelbench.profile.results.kernel_row`), linked to the profile case in ``cases``.
"""

from __future__ import annotations

import json

from accelbench.profile.ceilings import Ceilings
from accelbench.profile.kernels import KernelMetrics

_DDL = """
CREATE TABLE IF NOT EXISTS ceilings (
    ceiling_id INTEGER PRIMARY KEY AUTOINCREMENT,
    device_name TEXT NOT NULL,
    measured_at REAL NOT NULL,
    ceilings_json TEXT NOT NULL,
    env_json TEXT
);
CREATE INDEX IF NOT EXISTS ceilings_device ON ceilings(device_name, measured_at);
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
    "tensor_source": "TEXT", "intensity_flop_per_byte": "REAL", "achieved_flops_per_s": "REAL",
    "achieved_bytes_per_s": "REAL", "ceiling_name": "TEXT", "bound": "TEXT", "layer": "INTEGER", "analytic_flops": "REAL",
}


def _ensure(store) -> None:
    """Create the tables; add columns that a store written by an older accelbench lacks."""
    store.conn.executescript(_DDL)
    have = {r[1] for r in store.conn.execute("PRAGMA table_info(profile_kernels)")}
    for col, typ in _KERNEL_COLUMNS.items():
        if col not in have:
            store.conn.execute(f"ALTER TABLE profile_kernels ADD COLUMN {col} {typ}")
    store.conn.commit()


def cached_ceilings(store, device_name: str) -> Ceilings | None:
    """The newest stored ceilings of ``device_name``, or None."""
    _ensure(store)
    row = store.conn.execute(
        "SELECT ceilings_json FROM ceilings WHERE device_name=? ORDER BY measured_at DESC, ceiling_id DESC LIMIT 1",
        (device_name,),
    ).fetchone()
    return Ceilings.from_dict(json.loads(row[0])) if row else None


def save_ceilings(store, ceilings: Ceilings, env: dict | None = None) -> int:
    """Store a measurement; returns its ``ceiling_id``."""
    _ensure(store)
    with store.conn:
        cur = store.conn.execute(
            "INSERT INTO ceilings (device_name, measured_at, ceilings_json, env_json) VALUES (?,?,?,?)",
            (ceilings.device_name, ceilings.measured_at, json.dumps(ceilings.to_dict()), json.dumps(env or {}, default=str)),
        )
    return int(cur.lastrowid)


def save_kernels(store, case_id: int, rows: list[dict]) -> None:
    """Store the per-kernel rows (:func:`accelbench.profile.results.kernel_row`) of one profiled case."""
    _ensure(store)
    if not rows:
        return
    cols = ["case_id", *rows[0]]
    with store.conn:
        store.conn.executemany(
            f"INSERT INTO profile_kernels ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [(case_id, *r.values()) for r in rows],
        )


def replace_kernels(store, case_id: int, rows: list[dict]) -> None:
    """Delete the case's kernel rows and store ``rows`` instead (after re-parsing a CSV)."""
    _ensure(store)
    with store.conn:
        store.conn.execute("DELETE FROM profile_kernels WHERE case_id=?", (case_id,))
    save_kernels(store, case_id, rows)


def update_case(store, case_id: int, fields: dict) -> None:
    """Set ``fields`` on a stored case (columns are added as ``Store.add_case`` adds them)."""
    from accelbench.store import _cell

    vals = {k: _cell(v) for k, v in fields.items()}
    with store.conn:
        store._ensure_columns("cases", vals)
        sets = ", ".join(f'"{k}"=?' for k in vals)
        store.conn.execute(f"UPDATE cases SET {sets} WHERE case_id=?", [*vals.values(), case_id])


def load_kernels(store, case_id: int) -> list[KernelMetrics]:
    """The kernels stored for ``case_id``, in launch order (``tensor_ops_by_source`` keeps the main source only)."""
    _ensure(store)
    rows = store.conn.execute(
        "SELECT idx, name, family, time_s, dram_read_bytes, dram_write_bytes, flops_fp32, flops_fp16, flops_fp64, "
        "flops_tensor, tensor_source FROM profile_kernels WHERE case_id=? ORDER BY idx", (case_id,),
    ).fetchall()
    return [
        KernelMetrics(index=r[0], name=r[1], family=r[2], time_s=r[3], dram_read_bytes=r[4], dram_write_bytes=r[5],
                      flops_fp32=r[6], flops_fp16=r[7], flops_fp64=r[8], flops_tensor=r[9],
                      tensor_ops_by_source={r[10]: r[9]} if r[10] else {})
        for r in rows
    ]
