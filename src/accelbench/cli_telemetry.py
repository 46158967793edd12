"""CLI commands of the telemetry/cost topic: ``accelbench cost`` and ``accelbench telemetry``."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from accelbench.cli import DB_OPTION, app, console, err_console, fail, open_run, open_store, styled
from accelbench.report.table import case_notes


@app.command()
def cost(run_id: Optional[int] = typer.Option(None, "--run", help="One run (default: every stored run)."),
         price_per_hour: Optional[float] = typer.Option(None, "--price-per-hour", help="Re-price every row at this USD per device-hour."),
         kwh_price: Optional[float] = typer.Option(None, "--kwh-price", help="USD per kWh: adds the electricity cost."),
         all_rows: bool = typer.Option(False, "--all", help="Every case, not only the best per (device, model, precision, mode)."),
         db: Path = DB_OPTION) -> None:
    """Cost comparison across stored runs: time, throughput, $/hour, total cost, $/1,000 images."""
    from accelbench.cost.compare import cost_comparison
    from accelbench.report.telemetry import cost_table

    if (price_per_hour is not None and price_per_hour < 0) or (kwh_price is not None and kwh_price < 0):
        fail("prices must be >= 0")
    store = open_store(db)
    try:
        rows = cost_comparison(store, run_id, price_per_hour=price_per_hour, kwh_price=kwh_price, best=not all_rows)
    except KeyError as exc:
        fail(str(exc.args[0]))
    if not rows:
        fail("no finished inference cases to compare")
    what = f"run {run_id}" if run_id is not None else "all runs"
    scope = "every finished case" if all_rows else "best throughput per device, model, precision, mode"
    console.print(cost_table(rows, title=f"Cost comparison ({what}; {scope})"))
    for src in dict.fromkeys(r.get("price_source") for r in rows if isinstance(r.get("price_source"), str)):
        console.print(f"price: {src}", highlight=False)


@app.command()
def telemetry(run_id: Optional[int] = typer.Option(None, "--run", help="Run id (default: newest)."), db: Path = DB_OPTION) -> None:
    """Per-case telemetry of a run: utilisation, power min/avg/max, idle power, temperature, energy, cost, validity."""
    from accelbench.report.telemetry import telemetry_table

    store = open_store(db)
    run = open_run(store, run_id)
    records = store.cases(run["run_id"]).to_dict("records")
    env = run["env"]
    console.print(telemetry_table(records, title=f"Run {run['run_id']} telemetry on {env.get('device_name')}"))
    print_notes(records, env)


def print_notes(records: list[dict], env: dict | None = None, failures: bool = True) -> None:
    """Where power, energy and GPM figures came from; low-confidence energy; with ``failures``, why each case
    failed or was flagged (model and case named)."""
    env = env or {}
    if env.get("idle_power_w") is not None:
        console.print(f"idle power {env['idle_power_w']:.1f} W ({env.get('idle_power_source')}, "
                      f"{env.get('idle_window_s') or 0:.1f} s before the sweep)", highlight=False)
    for key, label in (("power_source", "power"), ("energy_source", "energy"), ("gpm_status", "GPM"), ("cpu_energy_source", "CPU energy")):
        vals = {r.get(key) for r in records if isinstance(r.get(key), str)}
        if vals:
            console.print(f"{label}: {', '.join(sorted(vals))}", highlight=False)
    low = [r for r in records if r.get("energy_confidence") == "low"]
    if low:
        console.print(styled("note:", "yellow", f" energy of {len(low)} case(s) is low-confidence (window too short "
                             "for the energy counter's update interval): raise --min-time-s"))
    if not failures:
        return
    for label, text in case_notes(records):
        style = "yellow" if label in ("flagged:", "unsupported:", "skipped:") else "red"
        (err_console if label == "error:" else console).print(styled(label, style, " " + text))
