"""The command line run inside the test process, as a user's ``python -m accelbench`` would run it.

:func:`run` calls :func:`accelbench.cli.main` with the process set up as a fresh ``python -m accelbench`` would
have it, and puts back everything a command changes globally, so that the next test in the same pytest-xdist
worker starts from the same state:

- the environment (the command's own on top, :func:`conftest.cli_env`), the current folder, ``sys.argv``,
  ``sys.path`` and the modules a command imported from a folder that was not on ``sys.path`` (a factory module a test
  wrote in its working folder; every other module stays imported, as in one process);
- stdout and stderr captured, and the CLI's rich consoles rebuilt on the captured streams as at a fresh import
  (their width from ``COLUMNS``, no colours on a pipe);
- the SIGINT and SIGTERM handlers (``main`` installs its own SIGTERM one), warnings (filters, ``showwarning``,
  each location's once-only registry: Python's defaults inside), logging (the root's handlers are pytest's:
  records reach stderr through ``logging.lastResort`` as in a process without logging set up; the filters
  ``accelbench.core.quiet`` adds), the store files this process created (``accelbench.store.discard_created``);
- torch's intra-op thread count (a fresh process takes ``OMP_NUM_THREADS``), its global flags (TF32, cuDNN,
  deterministic algorithms, default dtype, gradient mode) and its random state.

What needs a fresh interpreter stays a subprocess (:func:`needs_process`): a different ``PYTHONPATH`` (packages
hidden or added: an install check, a plugin's entry points), a ``PYTHON*`` setting read at start-up.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

# Python's own warning filters in a fresh process without -W or PYTHONWARNINGS (`python -c "import warnings;
# print(warnings.filters)"`): pytest's are different (it shows every DeprecationWarning) and record, not print.
DEFAULT_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, ""),
    ("ignore", PendingDeprecationWarning, ""),
    ("ignore", ImportWarning, ""),
    ("ignore", ResourceWarning, ""),
)
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def needs_process(env: dict[str, str] | None) -> bool:
    """Whether a command with the extra environment ``env`` must run in a fresh interpreter: Python reads
    ``PYTHONPATH`` and the other ``PYTHON*`` settings at start-up only, and ``BLOCK_IMPORTS`` is read by a
    ``sitecustomize`` on that path."""
    return any(key.startswith("PYTHON") or key == "BLOCK_IMPORTS" for key in env or {})


def run(argv: list[str], env: dict[str, str], cwd: str | os.PathLike | None) -> subprocess.CompletedProcess:
    """``accelbench *argv`` in this process under the environment ``env`` (the whole of it) and in ``cwd``:
    its exit code, stdout and stderr, as :func:`subprocess.run` with ``text=True`` gives them."""
    out, err = _stream(), _stream()
    with _process_state(argv, env, cwd, out, err):
        code = _main(argv)
    return subprocess.CompletedProcess([sys.executable, "-m", "accelbench", *argv], code, _text(out), _text(err))


def _stream() -> io.TextIOWrapper:
    """A text stream like a pipe's (utf-8, has ``buffer``, not a terminal), read back with :func:`_text`."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", errors="replace").replace("\r\n", "\n")


def _main(argv: list[str]) -> int:
    """``accelbench.cli.main(argv)``'s exit code; what escapes it is printed as the interpreter would."""
    from accelbench.cli import main

    try:
        main(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # the interpreter prints it and ends by SIGINT
        traceback.print_exc()
        return -signal.SIGINT
    except BaseException:  # ACCELBENCH_TRACEBACK=1 lets a bug's exception out of main
        traceback.print_exc()
        return 1
    return 0


@contextlib.contextmanager
def _process_state(argv: list[str], env: dict[str, str], cwd, out, err) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        stack.enter_context(_environment(env))
        stack.enter_context(_chdir(cwd))
        stack.enter_context(_imports(argv))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        stack.enter_context(_consoles())
        stack.enter_context(_signals())
        stack.enter_context(_warnings())
        stack.enter_context(_logging())
        stack.enter_context(_created_stores())
        stack.enter_context(_torch(env))
        yield


@contextlib.contextmanager
def _environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def _chdir(folder: str | os.PathLike | None) -> Iterator[None]:
    """In ``folder`` (None: where it is), and back after however the command moved."""
    saved = os.getcwd()
    if folder is not None:
        os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(saved)


@contextlib.contextmanager
def _imports(argv: list[str]) -> Iterator[None]:
    """``sys.argv`` as ``python -m accelbench`` has it; ``sys.path`` put back after; the modules the command imported
    from a folder that was not on ``sys.path`` before it (its working folder, through ``""`` or the model loader's
    insertion: a factory module a test wrote) forgotten, so that the next test's module of the same name is its own
    file. Every other module stays: one imported again would run its import-time registrations twice (a Dynamo
    backend's ``register_backend``: "duplicate name"), whatever folder the checkout, the virtualenv or
    ``tempfile.gettempdir()`` is in."""
    import accelbench

    saved_argv, saved_path, before = sys.argv, list(sys.path), set(sys.modules)
    on_path = _folders(saved_path, os.getcwd())
    sys.argv = [str(Path(accelbench.__file__).with_name("__main__.py")), *argv]
    importlib_invalidate()
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
        for name in _imported_from_elsewhere(set(sys.modules) - before, before, on_path):
            del sys.modules[name]
        importlib_invalidate()


def _folders(path: list[str], cwd: str) -> set[Path]:
    """The folders of ``sys.path`` entries, resolved (``""``: ``cwd``, where the process was)."""
    out = set()
    for entry in path:
        with contextlib.suppress(OSError, ValueError):
            out.add(Path(entry or cwd).resolve())
    return out


def _imported_from_elsewhere(new: set[str], before: set[str], on_path: set[Path]) -> list[str]:
    """Of the modules ``new`` to ``sys.modules``, those whose top-level package is new too and was found in a
    folder not in ``on_path`` (a package imported before, or found on the path as it was, keeps every submodule)."""
    tops: dict[str, bool] = {}
    for name in new:
        top = name.partition(".")[0]
        if top in before or top in tops:
            continue
        where = getattr(sys.modules.get(top), "__file__", None)
        if not where:
            tops[top] = False
            continue
        file = Path(where).resolve()
        folder = file.parent.parent if file.name == "__init__.py" else file.parent
        tops[top] = folder not in on_path
    return [name for name in new if tops.get(name.partition(".")[0])]


def importlib_invalidate() -> None:
    """Forget the import system's listings of folders: a file a test just wrote there is found."""
    import importlib

    importlib.invalidate_caches()


@contextlib.contextmanager
def _consoles() -> Iterator[None]:
    """The CLI's consoles (module objects other modules imported by name) rebuilt in place on the captured
    streams, as a fresh import makes them (``accelbench.cli.terminal._console``), and put back after."""
    from accelbench.cli import terminal

    pairs = (
        (terminal.console, terminal._console(sys.stdout)),
        (terminal.err_console, terminal._console(sys.stderr, True)),
    )
    saved = [dict(console.__dict__) for console, _ in pairs]
    for console, fresh in pairs:
        console.__dict__.update(fresh.__dict__)
    try:
        yield
    finally:
        for (console, _), state in zip(pairs, saved):
            console.__dict__.clear()
            console.__dict__.update(state)


@contextlib.contextmanager
def _signals() -> Iterator[None]:
    saved = {sig: signal.getsignal(sig) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def _warnings() -> Iterator[None]:
    """Python's default filters and its printing ``showwarning`` inside (pytest records warnings instead);
    ``catch_warnings`` puts back the filters, ``showwarning`` and the once-only registries after."""

    def show(message) -> None:  # what warnings._showwarnmsg_impl does: print to the current stderr
        text = warnings.formatwarning(message.message, message.category, message.filename, message.lineno, message.line)
        sys.stderr.write(text)

    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in DEFAULT_FILTERS:
            warnings.filterwarnings(action, category=category, module=module, append=True)
        warnings.showwarning = warnings._showwarning_orig
        warnings._showwarnmsg_impl = show
        yield


@contextlib.contextmanager
def _logging() -> Iterator[None]:
    """No handlers on the root logger inside (records reach stderr through ``logging.lastResort``, as in a
    process that set up no logging); the root's handlers and level and each logger's filters put back after."""
    root = logging.getLogger()
    loggers = [root, *(v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger))]
    filters = {logger: list(logger.filters) for logger in loggers}
    handlers, level = list(root.handlers), root.level
    root.handlers[:] = []
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        for logger in logging.Logger.manager.loggerDict.values():
            if isinstance(logger, logging.Logger):
                logger.filters[:] = filters.get(logger, [])
        root.filters[:] = filters[root]


@contextlib.contextmanager
def _created_stores() -> Iterator[None]:
    """The command's own list of the store files it created: a store the test made before is not the command's
    (``accelbench.cli.main`` deletes the empty ones on its list)."""
    from accelbench.store import schema

    saved = list(schema._CREATED)
    schema._CREATED.clear()
    try:
        yield
    finally:
        schema._CREATED[:] = saved


@contextlib.contextmanager
def _torch(env: dict[str, str]) -> Iterator[None]:
    """torch's thread count as ``OMP_NUM_THREADS`` sets it at a fresh import; its global flags and random state
    put back after."""
    try:
        import torch
    except ImportError:
        yield
        return
    backends = torch.backends
    flags = (
        (backends.cuda.matmul, "allow_tf32"),
        (backends.cudnn, "allow_tf32"),
        (backends.cudnn, "benchmark"),
        (backends.cudnn, "deterministic"),
    )
    saved = [getattr(owner, name) for owner, name in flags]
    threads, matmul = torch.get_num_threads(), torch.get_float32_matmul_precision()
    deterministic, dtype, grad = (
        torch.are_deterministic_algorithms_enabled(),
        torch.get_default_dtype(),
        torch.is_grad_enabled(),
    )
    rng = torch.get_rng_state()
    wanted = env.get("OMP_NUM_THREADS", "")
    if wanted.isdigit() and int(wanted) > 0:
        torch.set_num_threads(int(wanted))
    try:
        yield
    finally:
        for (owner, name), value in zip(flags, saved):
            setattr(owner, name, value)
        torch.set_num_threads(threads)
        torch.set_float32_matmul_precision(matmul)
        torch.use_deterministic_algorithms(deterministic)
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)
        torch.set_rng_state(rng)
