"""Add to committed run exports that lack them the ceilings their rows were measured against, from the stores that
measured them: each export's run is found in the stores by its start time (``created_at``, to the millisecond), and
its ceilings are the store's for the run (:func:`accelbench.ceilings.cache.run_ceilings`: the device's measurement
as of the run's end). Only the export's ``ceilings`` is written (JSON: the file re-serialized in its own layout, gzip
kept; Parquet: the metadata, the rows and their compression as they were); an export whose run is in none of the
stores is listed and left as it is.

Usage: ``python benchmarks/add_ceilings.py STORE... -- EXPORT...``.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from accelbench.ceilings.cache import run_ceilings
from accelbench.store import Store
from accelbench.store.export import PARQUET_META, pyarrow


def _ceilings_by_start(stores: list[str]) -> dict[float, dict]:
    found = {}
    for path in stores:
        with Store(path) as store:
            for r in store.runs():
                c = run_ceilings(store, store.run(r["run_id"]))
                if c is not None:
                    found[round(r["created_at"], 3)] = c.to_dict()
    return found


def _json(path: Path, ceilings_at) -> bool:
    packed = path.name.endswith(".gz")
    raw = gzip.decompress(path.read_bytes()) if packed else path.read_bytes()
    doc = json.loads(raw)
    ceilings = ceilings_at(doc)
    if ceilings is None:
        return False
    doc["ceilings"] = ceilings
    indented = raw.lstrip()[1:2] == b"\n"  # accelbench export's indent=1, or compact_export.py's compact layout
    text = json.dumps(doc, indent=1, default=str) if indented else json.dumps(doc, separators=(",", ":"))
    text += "\n" if raw.endswith(b"\n") else ""
    path.write_bytes(gzip.compress(text.encode(), mtime=0) if packed else text.encode())
    return True


def _parquet(path: Path, ceilings_at) -> bool:
    pa = pyarrow()
    pq = pa.parquet
    meta = pq.ParquetFile(path).metadata
    first = meta.row_group(0).column(0)
    options = {  # the file's own writing options: its compression, dictionaries, statistics, stored Arrow schema
        "compression": first.compression.lower(),
        "use_dictionary": any("DICTIONARY" in e for e in first.encodings),
        "write_statistics": first.statistics is not None,
        "store_schema": b"ARROW:schema" in (meta.metadata or {}),
    }
    table = pq.read_table(path)
    doc = json.loads(table.schema.metadata[PARQUET_META])
    ceilings = ceilings_at(doc)
    if ceilings is None:
        return False
    doc["ceilings"] = ceilings
    kv = {**table.schema.metadata, PARQUET_META: json.dumps(doc, default=str).encode()}
    table = table.replace_schema_metadata(None)
    # the key-value metadata through the writer: without a stored Arrow schema, write_table would drop it
    with pq.ParquetWriter(path, table.schema, **options) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(kv)
    return True


def main(argv: list[str]) -> None:
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    by_start = _ceilings_by_start(argv[:cut])

    def ceilings_at(doc: dict) -> dict | None:
        if not isinstance(doc, dict) or not isinstance(doc.get("created_at"), (int, float)) or doc.get("ceilings"):
            return None  # not a run export (a hand loop's JSON), or its ceilings are there
        return by_start.get(round(doc["created_at"], 3))

    for name in argv[cut + 1 :]:
        path = Path(name)
        done = (_parquet if path.suffix == ".parquet" else _json)(path, ceilings_at)
        print(f"{path}: {'ceilings added' if done else 'left as it is (its ceilings are there, or its store is not)'}")


if __name__ == "__main__":
    main(sys.argv[1:])
