"""``accelbench doctor``: can this install run a sweep? (parsing only)."""

from __future__ import annotations

import typer

from accelbench.cli.common import command, console, err_console, styled


@command()
def doctor() -> None:
    """Check the install: torch and torchvision work together; which extras are installed (exit 2: broken)."""
    from rich.table import Table

    from accelbench.sweep.requirements import report

    rows = report()
    table = Table("package", "version", "status", "", box=None)
    for r in rows:
        status = "ok" if r.ok else "missing" if r.version is None else "broken"
        table.add_row(r.package, r.version or "-", status, r.note if r.ok else "")
    console.print(table)
    for r in rows:
        if not r.ok and r.note:
            (err_console if r.required else console).print(
                styled("error:" if r.required else "optional:", "red" if r.required else "yellow", " " + r.note)
            )
    broken = any(r.required and not r.ok for r in rows)
    console.print("accelbench cannot run: fix the errors above" if broken else "ready: accelbench run")
    raise typer.Exit(2 if broken else 0)
