"""Make the first roofline study's summary (``profile-h200.json`` of ``benchmarks/profile_summary.py``: the H200's
environment, its ceilings and the newest row of each profiled case over the study's 8 runs) one run export that
``accelbench import`` reads, with the kernels of ``roofline-profile/h200-kernels.csv.gz`` (names cut to 160
characters) as each case's kernel table. The study's store was never committed, so its spec is not known: the export's
spec holds only the axes its rows show (models, batch sizes, precisions, modes, steps), its tags say so, and each row
keeps the id of the run that measured it (``source_run_id``).

Usage: ``python benchmarks/profile_json_to_export.py PROFILE_H200_JSON KERNELS_CSV_GZ OUT.json``.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
from pathlib import Path

from accelbench.core.columns import exported

TEXT = ("name", "family", "tensor_source", "ceiling_name", "bound")
INTS = ("idx", "layer")


def _slug(r: dict) -> str:  # profile_summary.py's case name, the kernel CSV's ``case``
    return f"{r['model']}-{r['step']}-{r['precision']}-bs{r['batch_size']}-{r['mode']}".replace(":", "_")


def _kernel(row: dict) -> dict:
    """A kernel row of the CSV typed as the store's ``profile_kernels`` (an empty cell: None)."""
    cells = {k: v for k, v in row.items() if k != "case"}
    return {
        k: None if v == "" else v if k in TEXT else int(float(v)) if k in INTS else float(v) for k, v in cells.items()
    }


def document(summary: dict, kernels_csv: Path) -> dict:
    """The run document: kind profile, status complete, the summary's environment and ceilings, its cases."""
    kernels: dict[str, list[dict]] = {}
    with gzip.open(kernels_csv, "rt", newline="") as f:
        for row in csv.DictReader(f):
            kernels.setdefault(row["case"], []).append(_kernel(row))
    cases = summary["cases"]
    rows = []
    for c in cases:
        row = {k: v for k, v in exported(c).items() if k not in ("case_id", "run_id")}
        rows.append({**row, "source_run_id": c["run_id"], "kernels": kernels.get(_slug(c), [])})
    axes = {
        "models": sorted({c["model"] for c in cases}),
        "batch_sizes": sorted({c["batch_size"] for c in cases}),
        "precisions": sorted({c["precision"] for c in cases}),
        "modes": sorted({c["mode"] for c in cases}),
        "steps": sorted({c["step"] for c in cases}),
    }
    started = sorted(c["started_at"] for c in cases if c.get("started_at"))
    return {
        "name": "h200-first-roofline-study",
        "tags": {"spec": "axes of the rows only (the study's store was not kept)", "runs": "8, newest row a case"},
        "kind": "profile",
        "status": "complete",
        "created_at": started[0],
        "finished_at": None,  # not known
        "spec_hash": "reconstructed",
        "spec": axes,
        "env": summary["env"],
        "ceilings": summary["ceilings"],
        "series": {},
        "results": rows,
    }


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        sys.exit(__doc__)
    doc = document(json.loads(Path(argv[0]).read_text()), Path(argv[1]))
    Path(argv[2]).write_text(json.dumps(doc, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
