"""The measured ceilings cached in the store: the ``ceilings`` extension table, one row a measurement, the newest
row of a device its cached ceilings (:meth:`accelbench.store.Store.ensure_table`; no SQL outside the store's API).

Table: ``ceilings(ceiling_id, device_name, measured_at, ceilings_json, env_json)``.
"""

from __future__ import annotations

import json

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
