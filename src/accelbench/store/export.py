"""Exports of a stored run: JSON (spec, environment, results, raw series), CSV (one row per case) and Parquet (one row
per case; the run's metadata and raw series in the file's key-value metadata: ``pip install 'accelbench[parquet]'``).
JSON and Parquet load back into a store (:mod:`accelbench.store.imports`); CSV carries no run metadata.

Each row is the store's typed read as exports write it (:func:`accelbench.core.columns.exported`: booleans 0/1, JSON
columns as text), described by the JSON Schema ``accelbench schema`` prints. Numbers are exact (base units, as
stored: the shortest text that reads back as the same float); nothing is rounded here; missing is null (JSON) or an
empty cell (CSV).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def results(store, run_id: int) -> list[dict[str, Any]]:
    """The run's rows as the exports write them (columns no row has left out)."""
    from accelbench.core.columns import exported

    return [exported(r) for r in store.records(run_id)]


def run_document(store, run_id: int, extra: Callable | None = None) -> dict:
    """The run as a JSON-ready dict: ``run_id``, ``name`` (None: unnamed), ``tags`` (a dict), ``kind``, ``status``,
    ``created_at``, ``finished_at``, ``spec_hash``, ``spec``, ``env``, ``results`` (one dict per case) and ``series``
    (per case key, its raw series by name: the per-batch latencies the confidence intervals resample).

    Args:
        extra: ``extra(store, run_id, document)`` adds what the run's scenario keeps in extension tables
            (a profile's ceilings and kernels: ``Scenario.export_extra``).
    """
    doc = {**run_meta(store, run_id), "results": results(store, run_id)}
    if extra is not None:
        extra(store, run_id, doc)
    return doc


def run_meta(store, run_id: int) -> dict:
    """The run document (:func:`run_document`) without its results: what a Parquet file keeps in its metadata."""
    run = store.run(run_id)
    series = {r["case_key"]: s for r in store.records(run_id) if (s := store.all_series(r["case_id"]))}
    return {
        "run_id": run_id,
        "name": run.get("name"),
        "tags": run.get("tags") or {},
        "kind": run["kind"],
        "status": run["status"],
        "created_at": run["created_at"],
        "finished_at": run.get("finished_at"),
        "spec_hash": run["spec_hash"],
        "spec": run["spec"],
        "env": run["env"],
        "series": series,
    }


PARQUET_META = b"accelbench.run"  # the key of the run's metadata (JSON) in a Parquet export


def pyarrow():
    """``pyarrow`` (with ``pyarrow.parquet``).

    Raises:
        MissingDependencyError: not installed; the message names the extra (``accelbench[parquet]``).
    """
    from accelbench.core.errors import MissingDependencyError

    try:
        import pyarrow as pa
        import pyarrow.parquet  # noqa: F401
    except ImportError:
        raise MissingDependencyError("pyarrow", "parquet") from None
    return pa


def parquet_bytes(store, run_id: int) -> bytes:
    """The run as a Parquet file: one row per case (the exported rows, types as inferred by pyarrow: 64-bit
    integers and floats, text; a column no row has is left out), the run's metadata (:func:`run_meta`) as JSON under
    :data:`PARQUET_META` in the schema's key-value metadata.

    Raises:
        MissingDependencyError: pyarrow is not installed.
    """
    pa = pyarrow()
    rows = results(store, run_id)
    names = list(dict.fromkeys(k for r in rows for k in r))
    table = pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])
    table = table.replace_schema_metadata({PARQUET_META: json.dumps(run_meta(store, run_id), default=str).encode()})
    sink = pa.BufferOutputStream()
    pa.parquet.write_table(table, sink)
    return sink.getvalue().to_pybytes()


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
