"""Loading an export back (``accelbench import``): a JSON export (the full run document; gzip-compressed as
``.json.gz`` too, as the repository's recorded results are kept) or a Parquet export (rows, with the run document in
the file's metadata) becomes a new run of a store, with its spec, provenance, name, tags,
start and end times, raw series, the ceilings its rows were measured against (kept with the new run:
:func:`accelbench.ceilings.cache.save_run_ceilings`, so its report draws the roofline the original drew), what its
scenario exported from extension tables (handed to ``extra``: a profile's kernels), and a note of where it came from
(``env["imported_from"]``), so results move between machines without copying SQLite files.

Nothing read executes code: JSON through :func:`json.loads`, Parquet through pyarrow's reader (no pickle, no
pandas metadata). A CSV export carries no run metadata (spec, environment, series), so it is refused.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelbench.core.errors import AccelbenchError

REQUIRED = ("case_key", "workload", "status")  # every row's own columns (the store requires them)
NOT_COPIED = ("case_id", "run_id")  # the importing store numbers its cases and runs


class ExportFileError(AccelbenchError):
    """A file that cannot be imported: unreadable, not an accelbench export, a CSV (one line, exit 2)."""


def read_export(path: str | Path) -> dict[str, Any]:
    """The run document of an export file: ``kind``, ``status``, ``spec``, ``env``, ``results`` (rows, with their
    extension data: a profile's ``kernels``), and what the export kept of ``name``, ``tags``, ``created_at``,
    ``finished_at``, ``spec_hash``, ``series`` and ``ceilings`` (read as :class:`accelbench.ceilings.measure.Ceilings`).

    Raises:
        ExportFileError: unreadable, a CSV, another format, or not an accelbench run (one line).
        MissingDependencyError: a Parquet file without pyarrow (names ``accelbench[parquet]``).
    """
    p = Path(path)
    if not p.is_file():
        raise ExportFileError(f"cannot import {p}: no such file")
    suffix = ".json.gz" if p.name.lower().endswith(".json.gz") else p.suffix.lower()
    if suffix == ".csv":
        raise ExportFileError(
            f"cannot import {p}: a CSV export holds no run metadata (spec, environment, raw series); "
            "export the run with --format json or --format parquet"
        )
    if suffix in (".json", ".json.gz"):
        try:
            raw = gzip.decompress(p.read_bytes()) if suffix == ".json.gz" else p.read_bytes()
            doc = json.loads(raw.decode("utf-8"))
        except (OSError, EOFError, UnicodeDecodeError, ValueError) as exc:
            raise ExportFileError(f"cannot import {p}: not readable JSON ({' '.join(str(exc).split())})") from None
    elif suffix == ".parquet":
        doc = _parquet(p)
    else:
        raise ExportFileError(f"cannot import {p}: allowed a .json, .json.gz or .parquet export of accelbench export")
    return _checked(p, doc)


def _parquet(p: Path) -> dict[str, Any]:
    from accelbench.store.export import PARQUET_META, pyarrow

    pa = pyarrow()
    try:
        table = pa.parquet.read_table(p)
    except (OSError, pa.ArrowException) as exc:
        raise ExportFileError(
            f"cannot import {p}: not a readable Parquet file ({' '.join(str(exc).split())})"
        ) from None
    meta = (table.schema.metadata or {}).get(PARQUET_META)
    if meta is None:
        raise ExportFileError(f"cannot import {p}: no accelbench run metadata in it (not written by accelbench export)")
    try:
        doc = json.loads(meta)
    except ValueError:
        raise ExportFileError(f"cannot import {p}: its accelbench run metadata is not JSON") from None
    rows = [{k: v for k, v in r.items() if v is not None} for r in table.to_pylist()]
    if not isinstance(doc, dict):
        return doc
    row_extra = doc.pop("row_extra", None) or {}
    if isinstance(row_extra, dict):  # each row's extension data, kept in the metadata (Parquet rows hold columns)
        rows = [{**r, **ext} if isinstance(ext := row_extra.get(r.get("case_key")), dict) else r for r in rows]
    return {**doc, "results": rows}


def _checked(p: Path, doc: Any) -> dict[str, Any]:
    ok = (
        isinstance(doc, dict)
        and isinstance(doc.get("kind"), str)
        and isinstance(doc.get("status"), str)
        and isinstance(doc.get("spec"), dict)
        and isinstance(doc.get("env"), dict)
        and isinstance(doc.get("results"), list)
        and all(isinstance(r, dict) and all(isinstance(r.get(k), str) for k in REQUIRED) for r in doc["results"])
    )
    if not ok:
        raise ExportFileError(
            f"cannot import {p}: not an accelbench run export (needs kind, status, spec, env and "
            "results rows with case_key, workload, status)"
        )
    series = doc.get("series")
    if series is not None and not (
        isinstance(series, dict)
        and all(isinstance(s, dict) and all(isinstance(v, list) for v in s.values()) for s in series.values())
    ):
        raise ExportFileError(f"cannot import {p}: its raw series are not a table of lists")
    if doc.get("ceilings") is not None:
        try:
            from accelbench.ceilings.cache import from_dict

            doc["ceilings"] = from_dict(doc["ceilings"])
        except (TypeError, AttributeError):
            raise ExportFileError(f"cannot import {p}: its ceilings are not accelbench's ceilings") from None
    return doc


def import_run(store, path: str | Path, extra: Callable | None = None) -> int:
    """Import one export file into ``store`` as a new run; returns its id. Rows keep every column (values as
    exported: the store's typed read gives them back as the original store's did), ``case_id`` and ``run_id`` are
    the new store's; the export's ceilings are kept with the new run.

    Args:
        extra: ``extra(store, run_id, doc, case_ids)`` stores what the run's scenario exported from its extension
            tables (``doc["results"][i]`` keys that are lists or tables, as :func:`accelbench.store.export.is_extension`
            tells; ``case_ids``: case key -> the new case id): ``Scenario.import_extra``. Without it they are dropped.
    Raises:
        As :func:`read_export`; StoreError: the store cannot be written.
    """
    from accelbench.ceilings.cache import save_run_ceilings
    from accelbench.core.runlabel import RunLabel
    from accelbench.store.export import is_extension

    doc = read_export(path)
    origin = {
        "file": str(Path(path).resolve()),
        "run_id": doc.get("run_id"),
        "host": doc["env"].get("host") or doc["env"].get("hostname"),
    }
    label = RunLabel(name=doc.get("name"), tags=doc.get("tags") or {})
    run_id = store.insert_run(
        kind=doc["kind"],
        status=doc["status"],
        spec=doc["spec"],
        env={**doc["env"], "imported_from": origin},
        spec_hash=str(doc.get("spec_hash") or "imported"),
        label=label,
        created_at=doc.get("created_at"),
        finished_at=doc.get("finished_at"),
    )
    if doc.get("ceilings") is not None:
        save_run_ceilings(store, run_id, doc["ceilings"])
    series = doc.get("series") or {}
    case_ids = {}
    for row in doc["results"]:
        rec = {k: v for k, v in row.items() if k not in NOT_COPIED and not is_extension(v)}
        case_ids[row["case_key"]] = store.add_case(run_id, rec, series.get(row["case_key"]))
    if extra is not None:
        extra(store, run_id, doc, case_ids)
    return run_id
