"""JSON export of a profile run: spec, environment, ceilings, case records and their kernels."""

from __future__ import annotations

import json
from pathlib import Path


def run_document(store, run_id: int) -> dict:
    """The run as a JSON-ready dict; ``results[i]["kernels"]`` holds the case's kernel rows."""
    from accelbench.profile import storage

    run = store.run(run_id)
    df = store.cases(run_id)
    records = json.loads(df.to_json(orient="records", double_precision=15))  # no rounding: base units, raw
    storage._ensure(store)
    for rec in records:
        cur = store.conn.execute("SELECT * FROM profile_kernels WHERE case_id=? ORDER BY idx", (rec["case_id"],))
        cols = [d[0] for d in cur.description]
        rec["kernels"] = [dict(zip(cols, row)) for row in cur.fetchall()]
    name = run["env"].get("device_name")
    ceil = storage.cached_ceilings(store, name) if name else None
    return {"run_id": run_id, "kind": run["kind"], "status": run["status"], "created_at": run["created_at"],
            "spec": run["spec"], "env": run["env"], "ceilings": ceil.to_dict() if ceil else None, "results": records}


def write_json(path: str | Path, store, run_id: int) -> None:
    """Write :func:`run_document` to ``path``."""
    Path(path).write_text(json.dumps(run_document(store, run_id), indent=1, default=str))
