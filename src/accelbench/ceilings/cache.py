"""The measured ceilings cached in the store: the ``ceilings`` extension table, one row a measurement, the newest
row of a device its cached ceilings (:meth:`accelbench.store.Store.ensure_table`; no SQL outside the store's API);
and the ceilings kept with one run (``run_ceilings``: an imported run's, read from its export), so a run's roofline is
drawn under the roofs its rows were measured against, in the store it was measured in or in any other.

Tables: ``ceilings(ceiling_id, device_name, measured_at, ceilings_json, env_json)``,
``run_ceilings(run_id, ceilings_json)``.
"""

from __future__ import annotations

import json
from dataclasses import fields

from accelbench.ceilings.measure import Ceilings

_DDL = """
CREATE TABLE IF NOT EXISTS ceilings (
    ceiling_id INTEGER PRIMARY KEY AUTOINCREMENT,
    device_name TEXT NOT NULL,
    measured_at REAL NOT NULL,
    ceilings_json TEXT NOT NULL,
    env_json TEXT
);
CREATE INDEX IF NOT EXISTS ceilings_device ON ceilings(device_name, measured_at);
"""

_RUN_DDL = """
CREATE TABLE IF NOT EXISTS run_ceilings (
    run_id INTEGER PRIMARY KEY REFERENCES runs(run_id),
    ceilings_json TEXT NOT NULL
);
"""


def cached_ceilings(store, device_name: str) -> Ceilings | None:
    """The newest stored ceilings of ``device_name`` (``torch.cuda.get_device_name`` or the CPU model), or None."""
    store.ensure_table(_DDL, "ceilings")
    rows = store.rows("ceilings", {"device_name": device_name}, order_by="measured_at DESC, ceiling_id DESC", limit=1)
    return Ceilings.from_dict(json.loads(rows[0]["ceilings_json"])) if rows else None


def save_ceilings(store, ceilings: Ceilings, env: dict | None = None) -> int:
    """Store a measurement; returns its ``ceiling_id``."""
    store.ensure_table(_DDL, "ceilings")
    return int(
        store.insert_rows(
            "ceilings",
            [
                {
                    "device_name": ceilings.device_name,
                    "measured_at": ceilings.measured_at,
                    "ceilings_json": json.dumps(ceilings.to_dict()),
                    "env_json": json.dumps(env or {}, default=str),
                }
            ],
        )
    )


def from_dict(d: dict) -> Ceilings:
    """Ceilings from their dict (:meth:`Ceilings.to_dict`), keys a later accelbench added left out.

    Raises:
        TypeError: a required field (device name, matmul peaks, DRAM bandwidth) is missing.
    """
    names = {f.name for f in fields(Ceilings)}
    return Ceilings.from_dict({k: v for k, v in d.items() if k in names})


def save_run_ceilings(store, run_id: int, ceilings: Ceilings) -> None:
    """Keep ``ceilings`` with run ``run_id`` (replacing any kept before): the roofs its rows were measured against."""
    store.ensure_table(_RUN_DDL, "run_ceilings")
    store.delete_rows("run_ceilings", {"run_id": run_id})
    store.insert_rows("run_ceilings", [{"run_id": run_id, "ceilings_json": json.dumps(ceilings.to_dict())}])


def run_ceilings(store, run: dict) -> Ceilings | None:
    """The ceilings ``run``'s rows were measured against, or None: those kept with the run (an imported run's),
    else the device's (``run["env"]["device_name"]``) newest measurement taken by the run's end (a later
    ``--remeasure-ceilings`` does not move an earlier run's roofs), else its newest. Reading creates no table.

    Args:
        run: the run as :meth:`accelbench.store.Store.run` gives it (``run_id``, ``env``, ``finished_at``).
    """
    if store.has_table("run_ceilings"):
        kept = store.rows("run_ceilings", {"run_id": run["run_id"]})
        if kept:
            return from_dict(json.loads(kept[0]["ceilings_json"]))
    name = (run.get("env") or {}).get("device_name")
    if not name or not store.has_table("ceilings"):
        return None
    rows = store.rows("ceilings", {"device_name": name}, order_by="measured_at DESC, ceiling_id DESC")
    end = run.get("finished_at")
    before = [r for r in rows if end is None or r["measured_at"] <= end]
    chosen = (before or rows)[:1]
    return from_dict(json.loads(chosen[0]["ceilings_json"])) if chosen else None


def get_ceilings(store, device, remeasure: bool = False) -> tuple[Ceilings, bool]:
    """``(ceilings, from_cache)``: the cached ceilings of ``device`` (a torch.device), measured
    (:func:`accelbench.ceilings.measure.measure`) and stored when missing or when ``remeasure``."""
    import torch

    from accelbench.ceilings.measure import measure
    from accelbench.core.device import cpu_model

    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_model()
    cached = None if remeasure else cached_ceilings(store, name)
    if cached is not None:
        return cached, True
    c = measure(device)
    save_ceilings(store, c)
    return c, False
