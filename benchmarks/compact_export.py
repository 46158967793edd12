"""Write a stored run as a compact JSON export for ``benchmarks/results/``: ``accelbench export --format json`` (its
ceilings and what its scenario exports from extension tables: a profile's kernel table) with its raw per-step and
telemetry series left out, null columns dropped (in the rows and the kernel rows) and, for a multi-GPU run, only the
aggregate rows (the ranks' rows keep their own step times in the store), gzip-compressed when OUT ends in ``.gz``.
Every measured column of the rows kept is unchanged, and ``accelbench import`` reads the file back (a profile's
roofline and kernels included).

Usage: ``python benchmarks/compact_export.py STORE RUN_ID OUT.json[.gz] [--ranks] [--source TEXT]`` (``--ranks``: keep
the rank rows; ``--source``: for a run imported from a temporary file, what ``env.imported_from.file`` names instead,
e.g. ``git:COMMIT:PATH``, so the export does not depend on where the file was).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from accelbench import scenarios
from accelbench.store import Store
from accelbench.store.export import run_document


def _dense(row: dict) -> dict:
    """``row`` without its null columns; the same for the rows of its extension tables (a profile's kernels)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            v = [{kk: vv for kk, vv in r.items() if vv is not None} for r in v]
        if v is not None:
            out[k] = v
    return out


def compact(store: Store, run_id: int, keep_ranks: bool = False) -> dict:
    """The run's export without series and null columns; rank rows (``aggregate`` False: one rank's own row beside the
    run's aggregate) dropped unless ``keep_ranks``. A row with no ``aggregate`` (a tensor-parallel case: one row for
    all the GPUs) is kept."""
    scenario = scenarios.by_kind(store.run(run_id)["kind"])
    doc = run_document(store, run_id, scenario.export_extra if scenario is not None else None)
    rows = doc["results"]
    if not keep_ranks and any(r.get("aggregate") for r in rows):
        rows = [r for r in rows if r.get("aggregate") is None or r.get("aggregate")]
    return {**doc, "series": {}, "results": [_dense(r) for r in rows]}


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(__doc__)
    with Store(argv[0]) as store:
        doc = compact(store, int(argv[1]), keep_ranks="--ranks" in argv)
    if "--source" in argv and isinstance(doc["env"].get("imported_from"), dict):
        doc["env"]["imported_from"]["file"] = argv[argv.index("--source") + 1]
    raw = json.dumps(doc, separators=(",", ":"), default=str).encode()
    Path(argv[2]).write_bytes(gzip.compress(raw, mtime=0) if argv[2].endswith(".gz") else raw)
    print(f"{argv[2]}: {len(doc['results'])} rows, {Path(argv[2]).stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
