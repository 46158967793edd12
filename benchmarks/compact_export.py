"""Write a stored run as a compact JSON export for ``benchmarks/results/``: ``accelbench export --format json`` with
its raw per-step and telemetry series left out, null columns dropped and, for a multi-GPU run, only the aggregate rows
(the ranks' rows keep their own step times in the store), gzip-compressed when OUT ends in ``.gz``. Every measured
column of the rows kept is unchanged, and ``accelbench import`` reads the file back.

Usage: ``python benchmarks/compact_export.py STORE RUN_ID OUT.json[.gz] [--ranks]`` (``--ranks``: keep the rank rows).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from accelbench.store import Store
from accelbench.store.export import results, run_meta


def compact(store: Store, run_id: int, keep_ranks: bool = False) -> dict:
    """The run's export without series and null columns; rank rows dropped unless ``keep_ranks``."""
    rows = results(store, run_id)
    if not keep_ranks and any(r.get("aggregate") for r in rows):
        rows = [r for r in rows if r.get("aggregate")]
    rows = [{k: v for k, v in r.items() if v is not None} for r in rows]
    return {**run_meta(store, run_id), "series": {}, "results": rows}


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(__doc__)
    with Store(argv[0]) as store:
        doc = compact(store, int(argv[1]), keep_ranks="--ranks" in argv)
    raw = json.dumps(doc, separators=(",", ":"), default=str).encode()
    Path(argv[2]).write_bytes(gzip.compress(raw, mtime=0) if argv[2].endswith(".gz") else raw)
    print(f"{argv[2]}: {len(doc['results'])} rows, {Path(argv[2]).stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
