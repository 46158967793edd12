"""Exports of a stored run: JSON (spec, environment, results) and CSV (one row per case).

Numbers keep 15 significant digits (base units, as stored); nothing is rounded here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

def run_document(store, run_id: int, extra: Callable | None = None) -> dict:
    """The run as a JSON-ready dict: ``run_id``, ``kind``, ``status``, ``created_at``, ``spec``, ``env``,
    ``results`` (one dict per case).

    Args:
        extra: ``extra(store, run_id, document)`` adds what the run's scenario keeps in extension tables
            (a profile's ceilings and kernels: ``Scenario.export_extra``).
    """
    run = store.run(run_id)
    df = store.cases(run_id)
    doc = {"run_id": run_id, "kind": run["kind"], "status": run["status"], "created_at": run["created_at"],
           "spec": run["spec"], "env": run["env"],
           "results": json.loads(df.to_json(orient="records", double_precision=15))}
    if extra is not None:
        extra(store, run_id, doc)
    return doc


def write_json(path: str | Path, store, run_id: int, extra: Callable | None = None) -> None:
    """Write :func:`run_document` to ``path``, atomically (:func:`accelbench.core.outputs.write_text`).

    Raises:
        OutputError: the file cannot be written (exit 1: the run stays in the store).
    """
    from accelbench.core.outputs import write_text

    write_text(path, json.dumps(run_document(store, run_id, extra), indent=1, default=str))


def csv_text(store, run_id: int) -> str:
    """The run's cases as CSV, one row per case, every column."""
    return store.cases(run_id).to_csv(index=False)
