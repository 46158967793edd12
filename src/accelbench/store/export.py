"""Exports of a stored run: JSON (spec, environment, results) and CSV (one row per case).

Each row is the store's typed read as exports write it (:func:`accelbench.core.columns.exported`: booleans 0/1, JSON
columns as text), described by the JSON Schema ``accelbench schema`` prints. Numbers are exact (base units, as
stored: the shortest text that reads back as the same float); nothing is rounded here; missing is null (JSON) or an
empty cell (CSV).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Callable


def results(store, run_id: int) -> list[dict[str, Any]]:
    """The run's rows as the exports write them (columns no row has left out)."""
    from accelbench.core.columns import exported

    return [exported(r) for r in store.records(run_id)]


def run_document(store, run_id: int, extra: Callable | None = None) -> dict:
    """The run as a JSON-ready dict: ``run_id``, ``name`` (None: unnamed), ``tags`` (a dict), ``kind``, ``status``,
    ``created_at``, ``finished_at``, ``spec``, ``env``, ``results`` (one dict per case).

    Args:
        extra: ``extra(store, run_id, document)`` adds what the run's scenario keeps in extension tables
            (a profile's ceilings and kernels: ``Scenario.export_extra``).
    """
    run = store.run(run_id)
    doc = {"run_id": run_id, "name": run.get("name"), "tags": run.get("tags") or {}, "kind": run["kind"],
           "status": run["status"], "created_at": run["created_at"], "finished_at": run.get("finished_at"),
           "spec": run["spec"], "env": run["env"], "results": results(store, run_id)}
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
    """The run's cases as CSV, one row per case, every column (an empty cell: missing)."""
    rows = results(store, run_id)
    if not rows:
        return "\n"
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
