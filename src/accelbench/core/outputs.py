"""Files a command writes besides its store (``--json``, ``export -o``, ``report --html``, ``compare --json``):
checked before anything is measured, written atomically.

A path's missing folders are created when it is written, as ``--db`` creates the store's. A file is written to
a temporary file in its own folder and renamed over the target (``os.replace``: atomic on POSIX), so a full disk
or a file-size limit leaves the old file or none, never a truncated one. A device or a pipe (``/dev/stdout``) is
written in place.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from accelbench.core.errors import EXIT_CASE_ERRORS, OutputError


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_writable(path: str | Path) -> Path:
    """Refuse, before anything runs, an output ``path`` that cannot be written: a directory, a path under a file,
    a folder where no file can be created (read-only, no permission), a device that refuses writes.

    Returns:
        The path, ``~`` expanded.
    Raises:
        OutputError: one line naming the path and why (exit 2).
    """
    p = Path(path).expanduser()
    if p.is_dir():
        raise OutputError(f"cannot write {p}: it is a directory (give a file path)")
    if p.exists() and not p.is_file():  # a device or a pipe: written in place
        if not os.access(p, os.W_OK):
            raise OutputError(f"cannot write {p}: permission denied")
        return p
    base = next((a for a in p.parents if a.exists()), Path("."))
    if not base.is_dir():
        raise OutputError(f"cannot write {p}: {base} is a file, not a folder")
    try:  # a probe tells what os.access cannot: a read-only mount, /proc, root's rights
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {base} does not take new files ({_why(exc)})") from None
    return p


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically, as :func:`write_text` writes text (a Parquet export)."""
    return write_text(path, data)


def write_text(path: str | Path, text: str | bytes) -> Path:
    """Write ``text`` (UTF-8; bytes as they are) to ``path`` atomically (see the module docstring); missing folders are created.

    Returns:
        The path written.
    Raises:
        OutputError: the write failed (a full disk, a file-size limit, no permission): exit 1, since it is found
        after the work it would have saved (the store keeps the results).
    """
    p = Path(path).expanduser()
    try:
        if p.exists() and not p.is_file() and not p.is_dir():
            with open(p, *_mode(text)) as fh:
                fh.write(text)
            return p
        check_writable(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        _replace(p, text)
    except OutputError as exc:
        raise OutputError(str(exc), EXIT_CASE_ERRORS) from None
    except OSError as exc:
        raise OutputError(f"cannot write {p}: {_why(exc)}", EXIT_CASE_ERRORS) from None
    return p


def _mode(data: str | bytes) -> tuple:
    return ("wb",) if isinstance(data, bytes) else ("w", -1, "utf-8")


def _replace(p: Path, text: str | bytes) -> None:
    """A temporary file beside ``p``, written, synced and renamed over it; removed when anything fails."""
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, *_mode(text)) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, p.stat().st_mode & 0o7777 if p.exists() else 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
