"""Exports of a stored run: JSON (spec, environment, results, raw series), CSV (one row per case) and Parquet (one row
per case; the run's metadata and raw series in the file's key-value metadata: ``pip install 'accelbench[parquet]'``).
JSON and Parquet load back into a store (:mod:`accelbench.store.imports`); CSV carries no run metadata.

JSON and Parquet exports carry the ceilings the run's rows were measured against (``ceilings``: the run's own, else
the device's measurement as of the run, :func:`accelbench.ceilings.cache.run_ceilings`; null when the store has none)
and what the run's scenario keeps in extension tables (``Scenario.export_extra``: a profile's kernel table, bounded in
size by the scenario). In JSON a row's extension data is a key of the row (``results[i]["kernels"]``); in Parquet,
whose rows hold only columns, it is in the metadata under ``row_extra`` (per case key, its keys).

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
    from accelbench.ceilings.cache import run_ceilings

    run = store.run(run_id)
    ceilings = run_ceilings(store, run)
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
        "ceilings": ceilings.to_dict() if ceilings is not None else None,
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


def is_extension(value: Any) -> bool:
    """Whether a row's value is extension data (a list or table a scenario added), not a column: every exported
    column is a scalar (JSON columns are text)."""
    return isinstance(value, (list, dict))


def parquet_bytes(store, run_id: int, extra: Callable | None = None) -> bytes:
    """The run as a Parquet file: one row per case (the exported rows, types as inferred by pyarrow: 64-bit
    integers and floats, text; a column no row has is left out), the rest of the run document (:func:`run_document`
    without its rows: :func:`run_meta`, what ``extra`` adds, and the rows' extension data under ``row_extra``) as JSON
    under :data:`PARQUET_META` in the schema's key-value metadata.

    Args:
        extra: as :func:`run_document`'s (a profile's ceilings and kernels).
    Raises:
        MissingDependencyError: pyarrow is not installed.
    """
    pa = pyarrow()
    meta = run_document(store, run_id, extra)
    rows, row_extra = [], {}
    for r in meta.pop("results"):
        rows.append({k: v for k, v in r.items() if not is_extension(v)})
        if ext := {k: v for k, v in r.items() if is_extension(v)}:
            row_extra[r["case_key"]] = ext
    if row_extra:
        meta["row_extra"] = row_extra
    names = list(dict.fromkeys(k for r in rows for k in r))
    table = pa.Table.from_pylist([{k: r.get(k) for k in names} for r in rows])
    table = table.replace_schema_metadata({PARQUET_META: json.dumps(meta, default=str).encode()})
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
