"""Errors with one-line messages meant for the user, and the exit codes every command uses.

Exit codes (the same for every command, with or without ``--gpus``; README "Exit codes"):

| code | meaning |
| --- | --- |
| 0 | every case ran: ``ok``, or ``oom`` / ``unsupported`` / ``skipped`` (those are results too) |
| 1 | at least one case has status ``error`` (every result is still stored; the summary says how many) |
| 2 | a usage or input error found before anything ran (bad flag, unknown model, missing data, bad store) |
| 3 | ``compare --fail-on-slower``: no case slower, but a matched case could not be judged (too few windows, no
      per-batch samples, or a validity flag fired) and ``--allow-undecided`` was not given |
| 130 | interrupted (Ctrl-C, SIGTERM): finished cases are stored and ``--resume`` continues the run |
"""

from __future__ import annotations

import re
from collections.abc import Iterable

EXIT_OK = 0
EXIT_CASE_ERRORS = 1
EXIT_USAGE = 2
EXIT_UNDECIDED = 3  # compare --fail-on-slower could not judge a matched case
EXIT_INTERRUPTED = 130

# ``allowed`` text that is a plain list of names ("fp32, tf32, bf16"): its names are the choices a typo is
# matched against
_NAME_LIST = re.compile(r"[\w.:<>+-]+(, [\w.:<>+-]+)+")


class AccelbenchError(Exception):
    """Base class: the message is one line a user can act on (the CLI prints it and exits ``exit_code``).

    Attributes:
        exit_code: the command's exit code when this error ends it (2: found before anything ran).
    """

    exit_code = EXIT_USAGE


def did_you_mean(value: object, choices: Iterable[object]) -> str:
    """`` (did you mean 'x'?)`` for the choices closest to a mistyped ``value`` (case-insensitive similarity of
    :class:`difflib.SequenceMatcher`, at least 0.6 and within 0.05 of the closest; up to three), or ``""``."""
    import difflib

    if not isinstance(value, str) or not value:
        return ""
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, value.lower(), str(c).lower()).ratio(), str(c))
            for c in dict.fromkeys(choices)
            if str(c) != value
        ),
        key=lambda t: -t[0],
    )
    close = [c for r, c in scored if r >= max(0.6, scored[0][0] - 0.05)][:3] if scored else []
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""


class ConfigError(AccelbenchError, ValueError):
    """A spec field has an invalid value. The message names the field, the closest allowed names to a typo
    (``choices``, else the names of an ``allowed`` that lists names) and the allowed values."""

    def __init__(self, field: str, value: object, allowed: str, choices=None):
        self.field, self.value, self.allowed = field, value, allowed
        if choices is None and _NAME_LIST.fullmatch(allowed or ""):
            choices = allowed.split(", ")
        if value is None:
            super().__init__(f"missing {field}: allowed {allowed}")
            return
        super().__init__(f"invalid {field} {shown(value)}: allowed {allowed}{did_you_mean(value, choices or ())}")


def shown(value: object) -> str:
    """A value as a user types it: a list's items joined by commas (``2,0.0``; an empty one ``""``), a text quoted
    (``'fp33'``), a number as it is (``0``, ``0.0``)."""
    if isinstance(value, (list, tuple)):
        return ",".join(_item(v) for v in value) or '""'
    return repr(value)


def _item(v: object) -> str:
    """A list's item as typed; a text with a line break or another control character quoted (``'\\n'``), so the
    message stays one line."""
    if not isinstance(v, str):
        return shown(v)
    return v if v.isprintable() else repr(v)


class UnknownModelError(AccelbenchError, ValueError):
    """The model name is not registered, not a timm model, and not an importable factory."""


class ModelFactoryError(UnknownModelError):
    """A user's model factory (``pkg.mod:fn``) ended accelbench's way of running it: it called ``sys.exit`` (an
    ``argparse`` parser that rejected the arguments does), or returned something that is not a model."""


class OutputError(AccelbenchError):
    """An output file (``--json``, ``export -o``, ``report --html``) cannot be written. Found before anything
    ran: exit 2; a write that fails afterwards (a full disk) is exit 1, the results staying in the store."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


class StopSweep(AccelbenchError):
    """The sweep cannot go on: the results store cannot be written (locked by another process for longer than
    accelbench waits, a full disk). The loop ends the run as interrupted (exit 130, ``--resume`` continues it)."""

    exit_code = EXIT_INTERRUPTED


class DataError(AccelbenchError, ValueError):
    """The data source cannot be read (missing path, no images, bad archive, an image that does not decode)."""


def install_command(package: str, extra: str | None = None) -> str:
    """The command that installs ``package``: its accelbench extra, or the package itself (a base requirement)."""
    return f"pip install 'accelbench[{extra}]'" if extra else f"pip install {package}"


class MissingDependencyError(AccelbenchError, ImportError):
    """A dependency is missing; the message names the extra to install (None: the package itself, part of the
    base install)."""

    def __init__(self, package: str, extra: str | None = None):
        super().__init__(f"{package} is not installed: {install_command(package, extra)}")


class InstallError(AccelbenchError):
    """The installed packages cannot run what was asked (a missing extra, a torch/torchvision pair that does not
    match), found before anything ran; the message names the versions and the install command."""


class SettingsNote(UserWarning):
    """A warning about the settings that changes nothing the user asked for (a batch size given twice runs
    once); the CLI prints it as one ``note:`` line, a library caller sees a :class:`UserWarning`."""


class PluginWarning(UserWarning):
    """A plugin (an entry point, a file dropped into a registry's folder) that could not be loaded: the CLI prints it
    as one ``warning:`` line naming the plugin and goes on (:mod:`accelbench.core.plugins`)."""


class Unsupported(Exception):
    """A case that cannot run here, found once its model was built (a convolutional model in fp8, say): the loop
    stores an ``unsupported`` row with ``reason`` and ``columns`` (what was measured anyway: simulated accuracy)."""

    def __init__(self, reason: str, columns: dict | None = None):
        super().__init__(reason)
        self.reason, self.columns = reason, dict(columns or {})


class CaseFailed(Exception):
    """A case that ran but failed as a whole (most of a serve level's requests failed): the loop stores an ``error``
    row with ``reason`` and ``columns`` (what was measured: the counts and reasons of the failures)."""

    def __init__(self, reason: str, columns: dict | None = None):
        super().__init__(reason)
        self.reason, self.columns = reason, dict(columns or {})


def exit_code(statuses: Iterable[str | None], interrupted: bool = False) -> int:
    """The exit code of a command whose cases ended with ``statuses`` (see the module table).

    Args:
        statuses: the ``status`` of every row the command stored (``ok``, ``oom``, ``error``, ...).
        interrupted: the command was stopped by Ctrl-C or SIGTERM.
    """
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_CASE_ERRORS if any(s == ERROR for s in statuses) else EXIT_OK


# Case statuses: ``ok`` measured; ``oom`` out of memory; ``error`` any other failure; ``unsupported`` cannot
# run on this device; ``skipped`` not run (a smaller batch size of the same configuration ran out of memory).
OK, OOM, ERROR, UNSUPPORTED, SKIPPED = "ok", "oom", "error", "unsupported", "skipped"

# Run statuses (``runs.status``): ``running`` (its writer holds the lease), ``complete``, ``interrupted`` (Ctrl-C,
# SIGTERM, or a store that stopped taking rows; ``--resume`` continues it).
RUNNING, COMPLETE, INTERRUPTED = "running", "complete", "interrupted"

# How an allocation failure reads when it is not torch.OutOfMemoryError: the CPU allocator's RuntimeError
# (c10/core/impl/alloc_cpu.cpp: "DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes"),
# and CUDA's own text when a library reports it.
_OOM_TEXT = ("out of memory", "can't allocate memory", "cannot allocate memory")


def one_line(exc: BaseException, limit: int = 300) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters."""
    msg = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def is_oom(exc: BaseException) -> bool:
    """True for an allocation failure on any device, also when wrapped (e.g. by a compiler backend):
    torch's OutOfMemoryError (CUDA), the CPU allocator's "can't allocate memory" RuntimeError, and Python's
    MemoryError."""
    import torch

    oom_type = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, (oom_type, MemoryError)) or any(t in str(link).lower() for t in _OOM_TEXT):
            return True
        link = link.__cause__ or link.__context__
    return False
