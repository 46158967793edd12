"""How text reaches the terminal: a wide table goes through a pager only on a terminal it
does not fit; notes wrap at word boundaries; names are printed as written (no emoji, no markup)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.pager import Pager
from rich.table import Table

from accelbench.cli import terminal


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Pages(Pager):
    def __init__(self):
        self.shown: list[str] = []

    def show(self, content: str) -> None:
        self.shown.append(content)


def _wide_table(columns: int) -> Table:
    t = Table()
    for k in range(columns):
        t.add_column(f"Column {k:02d}")
    t.add_row(*[f"value {k:02d}" for k in range(columns)])
    return t


@pytest.fixture
def screen(monkeypatch):
    """An 80-column terminal (or, with ``tty=False``, a pipe) and the pager it would open."""
    pages = _Pages()

    def make(tty: bool = True):
        out = _Terminal() if tty else io.StringIO()
        monkeypatch.setattr(
            terminal,
            "console",
            Console(file=out, width=80, markup=False, emoji=False, highlight=False, force_terminal=tty),
        )
        monkeypatch.setattr(terminal, "pager", lambda: pages)
        return out, pages

    return make


def test_a_wide_table_wider_than_the_terminal_goes_through_the_pager(screen):
    out, pages = screen()
    terminal.print_table(_wide_table(12), wide=True)
    assert len(pages.shown) == 1 and out.getvalue() == ""
    first = pages.shown[0].splitlines()[1]
    assert "Column 00" in pages.shown[0] and "Column 11" in pages.shown[0] and len(first) > 80  # nothing squeezed


@pytest.mark.parametrize("tty, columns, wide", [(False, 12, True), (True, 2, True), (True, 12, False)])
def test_no_pager_when_piped_when_it_fits_or_when_compact(screen, tty, columns, wide):
    out, pages = screen(tty)
    terminal.print_table(_wide_table(columns), wide=wide)
    assert pages.shown == [] and "┃" in out.getvalue()


def test_the_consoles_keep_names_as_written_and_wrap_notes_at_words(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    out = io.StringIO()
    console = terminal._console(out)
    console.file = out
    note = "flagged: latency spread (IQR/median) > 5%: 3 cases of :fire: [timm]: bs=1 fp32 eager 7.2%"
    console.print(note)
    lines = out.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 40 for line in lines)
    assert " ".join(out.getvalue().split()) == note  # broken only between words: "fp32" stays whole
    err = io.StringIO()
    terminal._console(err, stderr=True).print("error: " + "x " * 60, soft_wrap=None)
    assert len(err.getvalue().splitlines()) in (0, 1)  # stderr: every failure one line
