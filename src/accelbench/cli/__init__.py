"""The ``accelbench`` command line. It only parses: every command calls :mod:`accelbench.api`.

``common.py`` holds the app, the consoles and the options every command shares; each other module registers
its commands when imported below (the command modules import ``app.py`` only: no cycles).
"""

from __future__ import annotations

import signal
import sys

import typer

from accelbench.cli import compare, doctor, generate, loadgen, multi, profile, results, run, serve, train, tune  # noqa: E402,F401  (each registers its commands)
from accelbench.cli.common import app, console, err_console, styled
from accelbench.core.errors import EXIT_INTERRUPTED, EXIT_USAGE, AccelbenchError
from accelbench.core.signals import raise_interrupt

__all__ = ["app", "main"]


def _version(value: bool) -> None:
    if value:
        from accelbench.core.version import __version__

        console.print(f"accelbench {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    if ctx.invoked_subcommand is None:
        console.print(ctx.get_help())


def _click_exceptions() -> tuple[tuple, tuple]:
    """``(abort classes, usage-error classes)`` of the click typer runs on: recent typer vendors click as
    ``typer._click``, older typer uses the ``click`` package."""
    import importlib

    mods = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            mods.append(importlib.import_module(name))
        except ImportError:
            pass
    aborts = tuple({getattr(m, "Abort", typer.Abort) for m in mods} | {typer.Abort})
    return aborts, tuple({m.ClickException for m in mods})


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and exit with the contract's code (:mod:`accelbench.core.errors`).

    Every error that escapes a command is one line on stderr: an input error (:class:`AccelbenchError`) or a
    usage error (click's: unknown flag, bad value) exits 2 (an error that says otherwise: its ``exit_code``);
    Ctrl-C before any case ran exits 130; an unexpected exception (a bug) exits 1, and ``ACCELBENCH_TRACEBACK=1``
    shows its traceback. A store the command created and left empty (it was refused) is deleted.
    """
    from accelbench.core import quiet
    from accelbench.store import discard_created

    # `timeout`, `kill` and a batch scheduler's time limit send SIGTERM: stop as Ctrl-C does (finished cases
    # are stored already; the run is marked interrupted and `--resume` continues it)
    signal.signal(signal.SIGTERM, raise_interrupt)
    quiet.install(
        lambda text: err_console.print(styled("note:", "yellow", " " + text)),
        lambda text: err_console.print(styled("warning:", "yellow", " " + text)),
    )
    try:
        code = _run(argv)
    finally:
        discard_created()
    sys.exit(code)


def _run(argv: list[str] | None) -> int:
    """The app's exit code, every escaping error printed as one line (see :func:`main`)."""
    aborts, usage_errors = _click_exceptions()
    try:
        rv = app(args=argv, standalone_mode=False, prog_name="accelbench")
        return rv if isinstance(rv, int) else 0
    except AccelbenchError as exc:
        err_console.print(styled("error:", "red", " " + " ".join(str(exc).split())))
        return exc.exit_code
    except aborts as exc:
        if isinstance(exc.__cause__, EOFError):  # click turns an EOFError into Abort, as it does Ctrl-C
            return _internal(exc.__cause__)
        from accelbench.cli.common import nothing_stored

        err_console.print(nothing_stored())
        return EXIT_INTERRUPTED
    except usage_errors as exc:
        where = getattr(getattr(exc, "ctx", None), "command_path", "accelbench")
        err_console.print(styled("error:", "red", f" {' '.join(exc.format_message().split())} (see {where} --help)"))
        return EXIT_USAGE
    except Exception as exc:
        return _internal(exc)


def _internal(exc: BaseException) -> int:
    import os

    if os.environ.get("ACCELBENCH_TRACEBACK"):
        raise exc
    from accelbench.core.errors import one_line

    err_console.print(
        styled(
            "internal error:",
            "red",
            f" {one_line(exc)} (a bug: please report it; ACCELBENCH_TRACEBACK=1 shows the traceback)",
        )
    )
    return 1


if __name__ == "__main__":
    main()
