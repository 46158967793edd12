"""The Typer app, the ``command`` decorator, and how every command ends (exit code, JSON, next commands). It
re-exports the consoles of ``terminal.py`` and the outcome printing of ``outcome.py``; the options the commands share
are ``options.py`` (groups, one per concern), help panels and completion ``help.py``.

Every command follows one exit-code contract (:mod:`accelbench.core.errors`): 0 every case ran, 1 at least
one case ended in ``error`` (all results stored), 2 a usage or input error before anything ran, 130
interrupted (resumable).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from accelbench.cli.help import PANEL_OF, HelpCommand, OrderedGroup
from accelbench.cli.options import expand
from accelbench.cli.outcome import (
    print_cheapest,  # noqa: F401
    print_ci_note,  # noqa: F401
    print_notes,  # noqa: F401
    print_outcome,  # noqa: F401
    run_with_progress,  # noqa: F401
)
from accelbench.cli.terminal import (
    console,
    err_console,
    is_stdout,
    json_to_stdout,  # noqa: F401
    print_command,  # noqa: F401
    print_table,  # noqa: F401
    styled,
    write_output,
)
from accelbench.core.errors import ERROR, EXIT_CASE_ERRORS, AccelbenchError, OutputError, exit_code

app = typer.Typer(
    cls=OrderedGroup,
    add_completion=True,
    no_args_is_help=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    help="How fast, how efficient and how costly is this model on this hardware, and why.",
)


def command(name: str | None = None):
    """``@app.command`` whose input errors end as one line and exit 2 (or the error's ``exit_code``), and whose Ctrl-C
    before a run exists says nothing was stored (exit 130), also when called directly (a test's CliRunner, a
    notebook) rather than through :func:`accelbench.cli.main`; listed in its help panel
    (:data:`accelbench.cli.help.COMMAND_PANELS`), its help completed when shown; its option groups expanded
    (:func:`accelbench.cli.options.expand`)."""

    def deco(fn):
        fn = expand(fn)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except AccelbenchError as exc:
                # a model of the wrong kind names the command as typed (tune and scale run another's scenario)
                said_by = getattr(exc, "said_by", None)
                fail(said_by(f"accelbench {cmd}") if said_by else str(exc), exc.exit_code)
            except KeyboardInterrupt:  # a sweep turns Ctrl-C into an interrupted run: this came before one
                err_console.print(nothing_stored())
                raise typer.Exit(130) from None
            finally:
                console.stderr = False  # `--json -` sent this command's text to stderr

        cmd = name or fn.__name__.replace("_", "-")
        return app.command(name, cls=HelpCommand, rich_help_panel=PANEL_OF.get(cmd))(wrapped)

    return deco


def where(spec, opts) -> str:
    """Where the cases will run, checked now (a missing device is one line before anything is printed)."""
    from accelbench.core.device import resolve_device

    return f"{opts.world_size} ranks" if opts else str(resolve_device(spec.device))


def layers(config: Path | None, table: str, flags: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec layers: the TOML file's ``[table]`` (or its top level), then the flags."""
    from accelbench.core.config import load_toml
    from accelbench.core.config import table as toml_table

    return ([toml_table(load_toml(config), table, config)] if config else []) + [flags]


def fail(message: str, code: int = 2) -> None:
    """Print a one-line error and exit (default 2: a usage or input error)."""
    err_console.print(styled("error:", "red", " " + " ".join(str(message).split())))
    raise typer.Exit(code)


def open_store(db: Path, create: bool = False):
    """The results store at ``db``; without ``create``, a one-line error (exit 2) when there is none. A store
    this command creates and leaves empty is deleted again at its end (:func:`accelbench.cli.main`)."""
    from accelbench.store import Store

    if not create and not db.exists():
        fail(f"no results store at {db}")
    return Store(db)  # a StoreError is one line through command()


def before_run(spec, opts, db: Path, outputs=()) -> tuple[str, Any]:
    """``(where the cases run, the store)`` for a measuring command, before it prints its header: what can refuse
    it (device, models, data, output files: :func:`accelbench.api.check`) is checked before the store exists."""
    from accelbench import api

    place = where(spec, opts)
    api.check(spec, opts=opts, outputs=outputs)
    return place, open_store(db, create=True)


def open_run(store, run_id: int | None) -> dict:
    """Run ``run_id`` of ``store`` (None: the newest); a one-line error (exit 2) when it does not exist."""
    try:
        return store.run(run_id)
    except KeyError as exc:
        fail(str(exc.args[0]))


def run_ref(db: Path, ref: str | None) -> tuple[Any, dict]:
    """``(store, run)`` a ``--run`` names: an id in ``db`` (None: the newest run), ``PATH:ID`` (a run in
    another store) or ``[PATH:]name:NAME``, parsed as ``compare`` and ``report`` parse it (:func:`accelbench.store.refs.open_ref`);
    a one-line error (exit 2) when the store or the run does not exist."""
    from accelbench.store.refs import open_ref, ref_path

    if ref is None:
        store = open_store(db)
        return store, open_run(store, None)
    try:
        store, run_id, _ = open_ref(None if ref_path(ref) else open_store(db), ref)
    except (AccelbenchError, ValueError) as exc:
        fail(str(exc))
    return store, store.run(run_id)


def nothing_stored() -> str:
    """The line of a command stopped before its sweep opened a run: "interrupted: nothing was stored", and where it
    was when the process had started a stage (:mod:`accelbench.core.stage`: measuring the device's ceilings)."""
    from accelbench.core import stage

    where = stage.current()
    return "interrupted: nothing was stored" + (f" (stopped in {where.line()})" if where else "")


def finish(
    store,
    run_id: int,
    *,
    interrupted: bool = False,
    json_path: Path | None = None,
    statuses: list | None = None,
    stopped_in: str | None = None,
) -> None:
    """End a command that ran cases: failures counted, JSON written (one line when it cannot be: exit 1, the run
    stays stored), the next commands named; raises typer.Exit with :func:`accelbench.core.errors.exit_code`'s code.

    Args:
        statuses: the statuses of the rows this command stored (default: every row of the run).
        stopped_in: where an interrupted run was when it stopped (:attr:`accelbench.sweep.loop.Outcome.stopped_in`,
            taken as it stopped); None: where this process last knew it was (a study's launches), if anywhere.
    """
    from accelbench import api

    statuses = [r["status"] for r in store.records(run_id)] if statuses is None else statuses
    failed, code = sum(s == ERROR for s in statuses), exit_code(statuses, interrupted)
    if failed:
        err_console.print(
            styled(
                "failed:",
                "red",
                f" {failed} of {len(statuses)} cases ended in error (their reasons are above); every result is stored",
            )
        )
    try:
        if json_path:
            write_output(json_path, lambda path: api.export_json(store, run_id, path))
            console.print(f"wrote {'the JSON to stdout' if is_stdout(json_path) else json_path}")
    except OutputError as exc:  # the results are in the store: `accelbench export` writes them again
        err_console.print(styled("error:", "red", f" {exc} (run {run_id} is stored in {store.path})"))
        code = code or EXIT_CASE_ERRORS
    if interrupted:
        from accelbench.core import stage

        last = stage.current()
        stopped_in = stopped_in or (last.line() if last else None)
        where = f"; it stopped in {stopped_in}" if stopped_in else ""
        err_console.print(
            f"interrupted: {len(statuses)} finished cases stored in run {run_id}{where}; rerun with --resume"
        )
    db = (
        ""
        if Path(store.path).name == "accelbench.db" and Path(store.path).parent == Path(".")
        else f" --db {store.path}"
    )
    console.print(
        f"run {run_id} stored in {store.path}. Next: accelbench results --run {run_id}{db} --wide (every column) | "
        f"accelbench export --run {run_id}{db} --format csv"
    )
    raise typer.Exit(code)


def finish_outcome(out, store, *, json_path: Path | None = None, wide: bool = False) -> None:
    """Print a sweep's outcome and end the command; a ``--resume`` that found the run complete says so, exit 0."""
    if out.already_complete:
        console.print(
            f"nothing to resume: run {out.run_id} in {store.path} is complete with these settings ("
            f"{out.skipped_done} cases): accelbench results --run {out.run_id} --db {store.path} shows it"
        )
        raise typer.Exit(0)
    if out.resume_new:
        console.print(f"--resume: no earlier run of these settings in {store.path}: ran them as new run {out.run_id}")
    if out.stop_reason:  # the store takes no writes and may take no reads: no table, no JSON
        err_console.print(styled("error:", "red", f" the sweep stopped: {out.stop_reason}"))
    else:
        print_outcome(store, out.run_id, wide=wide, resumed=out.skipped_done, notes=out.notes)
    finish(
        store,
        out.run_id,
        interrupted=out.interrupted,
        json_path=None if out.stop_reason else json_path,
        statuses=[r["status"] for r in out.records],
        stopped_in=out.stopped_in,
    )
