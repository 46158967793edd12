"""Commands that read the store: ``results``, ``export``, ``telemetry``, ``cost``; ``schema`` (of an exported row);
and ``models``."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from accelbench.cli import common as a
from accelbench.cli.common import command, console
from accelbench.cli.options import DB, WIDE
from accelbench.core import kinds

RUN = typer.Option(
    None, "--run", help="Run id in --db, or PATH:ID for a run in another store (default: the newest in --db)."
)


@command()
def results(
    run_id: str | None = RUN,
    db: Path = DB,
    all_runs: bool = typer.Option(False, "--runs", help="List the runs instead."),
    wide: bool = WIDE,
    hist: int | None = typer.Option(
        None,
        "--hist",
        help="A case id of the run (in its export; a wrong one lists them): its latency distribution as a histogram (a generate case: its inter-token latencies).",
    ),
    compact: bool = typer.Option(False, "--compact", hidden=True, help="The default now (kept for old scripts)."),
) -> None:
    """Print a stored run: the compact table (--wide: every column), the notes, the cheapest precision; --hist CASE:
    one case's latency histogram."""
    from accelbench.report import table_for
    from accelbench.report.table import runs_table

    if all_runs:
        console.print(runs_table(a.open_store(db).runs()))
        return
    store, run = a.run_ref(db, run_id)
    wide = wide and not compact
    records = store.records(run["run_id"])
    if hist is not None:
        return print_histogram(store, run, records, hist)
    env = run["env"]
    named = f" '{run['name']}'" if run.get("name") else ""
    tags = "".join(f" {k}={v}" for k, v in run["tags"].items())
    console.print(
        f"run {run['run_id']}{named} ({run['kind']}, {run['status']}{tags}) on {env.get('device_name')} | "
        f"torch {env.get('torch')} | commit {env.get('git_commit')}"
    )
    a.print_table(table_for(run["kind"])(records, compact=not wide), wide)
    if wide:
        a.print_ci_note(run["kind"], records)
    a.print_cheapest(run["kind"], records)
    if run["kind"] in kinds.SWEEP_KINDS:
        a.print_notes(records, env)


@command()
def export(
    run_id: str | None = RUN,
    fmt: str = typer.Option("csv", "--format", "-f", help="csv, json or parquet (pip install 'accelbench[parquet]')"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="File (default, or -: stdout; parquet needs a file)."
    ),
    db: Path = DB,
) -> None:
    """Export one run's results as CSV (one row per case), JSON (spec, environment, results, raw series) or Parquet
    (one row per case, the run's metadata inside); accelbench import loads JSON and Parquet back."""
    from accelbench import api
    from accelbench.core.outputs import check_writable, write_bytes, write_text
    from accelbench.store.export import csv_text, pyarrow

    if fmt not in ("csv", "json", "parquet"):
        a.fail(f"invalid format {fmt!r}: allowed csv, json, parquet")
    if fmt == "parquet":
        pyarrow()  # a missing extra is one line before anything else
        if output is None or a.is_stdout(output):
            a.fail("--format parquet writes a file: give --output FILE.parquet")
    if output is not None and not a.is_stdout(output):
        check_writable(output)
    store, run = a.run_ref(db, run_id)
    rid = run["run_id"]
    if fmt == "parquet":
        write_bytes(output, api.export_parquet(store, rid))
        console.print(f"wrote {output}")
    elif fmt == "json":
        a.write_output(output or Path("-"), lambda path: api.export_json(store, rid, path))
    else:
        text = csv_text(store, rid)
        (write_text(output, text) if output and not a.is_stdout(output) else sys.stdout.write(text))


@command("import")
def import_cmd(
    files: list[Path] = typer.Argument(
        ..., help="JSON (or gzip-compressed .json.gz) or Parquet files written by accelbench export."
    ),
    db: Path = DB,
) -> None:
    """Load exported runs (JSON, .json.gz or Parquet; CSV holds no run metadata) into --db, each as a new run with its
    provenance, name and tags, and a note of the file it came from."""
    from accelbench import api

    store = a.open_store(db, create=True)
    for path in files:
        new = api.import_run(store, path)
        run = store.run(new)
        console.print(f"{path}: run {new} ({run['kind']}, {len(store.records(new))} cases) in {db}")


@command()
def schema(output: Path | None = typer.Option(None, "--output", "-o", help="File (default, or -: stdout).")) -> None:
    """Print the JSON Schema (draft 2020-12) of an exported result row: every column, its type, label and rule."""
    from accelbench.core.columns import schema_text
    from accelbench.core.outputs import check_writable, write_text

    if output is not None and not a.is_stdout(output):
        write_text(check_writable(output), schema_text())
    else:
        sys.stdout.write(schema_text())


@command("models")
def models_cmd(
    kind: str | None = typer.Option(
        None, "--kind", help="Only models of one kind: image (image classifiers) or lm (language models)."
    ),
) -> None:
    """List the models --model accepts: each name (or name pattern), its kind and its source."""
    from rich import box
    from rich.table import Table

    from accelbench.core.config import check_choices
    from accelbench.models import KINDS
    from accelbench.models.base import catalog

    if kind is not None:
        check_choices("kind", (kind,), tuple(KINDS))
    t = Table(box=box.SIMPLE_HEAD, padding=(0, 1, 0, 0), expand=True)
    t.add_column("model", ratio=1)  # the torchvision names wrap at their commas in what the other two leave
    t.add_column("kind", no_wrap=True)
    t.add_column("source", no_wrap=True)
    for row in catalog(kind):
        t.add_row(*row)
    console.print(t)
    for k in KINDS.values() if kind is None else (KINDS[kind],):
        console.print(k.extra)


@command()
def cost(
    run_id: str | None = typer.Option(
        None, "--run", help="One run: an id in --db, or PATH:ID (default: every run in --db)."
    ),
    price_per_hour: float | None = typer.Option(
        None, "--price-per-hour", help="Re-price every row at this USD per device-hour."
    ),
    kwh_price: float | None = typer.Option(None, "--kwh-price", help="USD per kWh: adds the electricity cost."),
    all_rows: bool = typer.Option(
        False, "--all", help="Every case, not only the best per (device, model, precision, mode)."
    ),
    db: Path = DB,
) -> None:
    """Cost comparison across stored runs: time, throughput, $/hour, total cost, $/1,000 images."""
    from accelbench.core.config import check_number
    from accelbench.cost.compare import cost_comparison
    from accelbench.report.telemetry import cost_table

    for name, price in (("price_per_hour", price_per_hour), ("kwh_price", kwh_price)):
        if price is not None:  # a finite number >= 0: nan and inf are refused
            check_number(name, price, allowed="a number >= 0 (USD)")
    store, rid = (a.open_store(db), None) if run_id is None else _ref(db, run_id)
    try:
        rows = cost_comparison(store, rid, price_per_hour=price_per_hour, kwh_price=kwh_price, best=not all_rows)
    except KeyError as exc:
        a.fail(str(exc.args[0]))
    if not rows:
        a.fail("no finished inference cases to compare")
    what = f"run {run_id}" if run_id is not None else "all runs"
    scope = "every finished case" if all_rows else "best throughput per device, model, precision, mode"
    console.print(cost_table(rows, title=f"Cost comparison ({what}; {scope})"))
    for src in dict.fromkeys(r.get("price_source") for r in rows if isinstance(r.get("price_source"), str)):
        console.print(f"price: {src}")


def _ref(db: Path, ref: str) -> tuple:
    store, run = a.run_ref(db, ref)
    return store, run["run_id"]


@command()
def telemetry(run_id: str | None = RUN, db: Path = DB) -> None:
    """Per-case telemetry of a run: utilisation, power min/avg/max, idle power, temperature, energy, cost, validity."""
    from accelbench.report.telemetry import telemetry_table

    store, run = a.run_ref(db, run_id)
    records = store.records(run["run_id"])
    env = run["env"]
    console.print(telemetry_table(records, title=f"Run {run['run_id']} telemetry on {env.get('device_name')}"))
    a.print_notes(records, env)


def print_histogram(store, run: dict, records: list[dict], case_id: int) -> None:
    """``results --hist CASE``: the case's stored latencies (per batch, per training step, or between tokens)."""
    from accelbench.core.columns import of_row
    from accelbench.report.histogram import lines
    from accelbench.report.table import case_label

    rec = next((r for r in records if r.get("case_id") == case_id), None)
    if rec is None:
        ids = ", ".join(str(r["case_id"]) for r in records[:12])
        a.fail(f"invalid --hist {case_id}: run {run['run_id']} has no such case (its case ids: {ids})")
    m = of_row(rec)  # the series is the one the case's scenario stores
    series = m.latency_series if m is not None else None
    if series is None:
        a.fail(f"case {case_id} ({rec.get('workload')}) stores no per-batch latencies: nothing to plot")
    values = store.series(case_id, series)
    if not values:
        a.fail(f"case {case_id} stored no {series} series ({rec.get('status')}): nothing to plot")
    console.print(f"{case_label(rec)}: {series}")
    for line in lines(values):
        console.print(line, highlight=False)
