"""The command line's consoles and how a table reaches the terminal (a pager for a wide one), and ``--json -``.

Markup and emoji are off on both consoles: nothing a user or an exception wrote (``[timm]``, ``[enforce fail
at ...]``, a model named ``:fire:``) is read as rich markup or an emoji code; styles are applied explicitly.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text


def _console(stream, stderr: bool = False) -> Console:
    """A console with markup and emoji off: nothing a user or an exception wrote (``[timm]``, a model named
    ``:fire:``) is ever read as rich markup or an emoji code.

    stdout wraps at word boundaries at the terminal's width (``COLUMNS`` when set); piped without ``COLUMNS``
    it keeps each line whole (200-column tables). stderr never wraps: every failure is one line.
    """
    import os

    sized = stream.isatty() or os.environ.get("COLUMNS", "").isdigit()
    return Console(
        stderr=stderr,
        width=None if sized else 200,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=stderr or not sized,
    )


console = _console(sys.stdout)
err_console = _console(sys.stderr, stderr=True)


def styled(label: str, style: str, rest: str = "") -> Text:
    """``label`` in ``style`` followed by plain ``rest`` (never parsed as markup)."""
    return Text.assemble((label, style), rest)


def json_to_stdout(value: Path | None) -> Path | None:
    """``--json -``: the JSON goes to stdout, so everything else this command prints goes to stderr."""
    if value is not None and str(value) == "-":
        console.stderr = True
    return value


def is_stdout(path: Path | None) -> bool:
    return path is not None and str(path) == "-"


def write_output(path: Path, write) -> None:
    """``write(path)``, or for ``-`` (stdout) ``write`` into a temporary file whose text goes to stdout."""
    if not is_stdout(path):
        write(path)
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        write(out)
        sys.stdout.write(out.read_text())
        sys.stdout.flush()


def _is_tty() -> bool:
    isatty = getattr(console.file, "isatty", None)
    return bool(isatty and isatty())


def pager():
    """rich's pager for a wide table: ``less -SR`` (long lines scroll sideways, colours kept) unless ``$PAGER``
    names another, else the system's (pydoc's)."""
    import os
    import shutil

    from rich.pager import Pager, SystemPager

    class Less(Pager):
        def show(self, content: str) -> None:
            import pydoc

            pydoc.pipepager(content, "less -SR")

    return Less() if not os.environ.get("PAGER") and shutil.which("less") else SystemPager()


def print_table(table, wide: bool = False) -> None:
    """Print a results table; a wide one at its natural width (never squeezed into the terminal), through a
    pager when that is wider than a terminal."""
    from accelbench.report.table import natural_width

    if not wide:
        console.print(table)
        return
    width, needed = console.width, natural_width(table, console)
    console.width = max(width, needed)  # Console.print caps its width argument here
    try:
        if needed > width and _is_tty():
            with console.pager(pager(), styles=True):
                console.print(table, crop=False)
        else:
            console.print(table, crop=False)
    finally:
        console.width = width


def print_command(prefix: str, cmd: str) -> None:
    """``prefix`` and a shell command, continued with `` \\`` over lines that fit the console (a command
    wrapped at a word would not paste whole)."""
    import shlex

    width = console.width if not console.soft_wrap else 10_000
    lines, line = [], prefix.rstrip() + " " if prefix.strip() else ""
    words: list[str] = []
    for token in map(shlex.quote, shlex.split(cmd)):  # a flag and its value stay on one line
        glue = words and words[-1].startswith("-") and " " not in words[-1] and not token.startswith("-")
        words[-1:] = [f"{words[-1]} {token}"] if glue else [*words[-1:], token]
    for word in words:
        if line.strip() and len(line) + len(word) + 2 > width:
            lines.append(line.rstrip() + " \\")
            line = "    "
        line += word + " "
    for text in lines + [line.rstrip()]:
        console.print(Text(text), soft_wrap=True)
