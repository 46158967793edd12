"""A run named on the command line or in a notebook: ``12`` (a run in the store at hand), ``other.db:12`` (a run in
another store), ``name:nightly`` (the newest run named ``nightly``) or ``other.db:name:nightly``, opened and loaded
as :class:`accelbench.core.rundata.RunData`."""

from __future__ import annotations

import re
from pathlib import Path

from accelbench.core.errors import AccelbenchError
from accelbench.core.rundata import RunData, load_run, parse_ref
from accelbench.store import Store

_NAMED = re.compile(r"^(?:(?P<path>.+):)?name:(?P<name>[^:]+)$")


def ref_path(ref: str | int) -> str | None:
    """The other store a reference names (``PATH:ID``, ``PATH:name:NAME``), or None: a run of the store at hand
    (``--db``). A malformed reference is None too (:func:`open_ref` says what is wrong with it)."""
    m = _NAMED.match(str(ref).strip())
    if m:
        return m.group("path")
    try:
        return parse_ref(str(ref))[0]
    except ValueError:
        return None


def latest_named(store, name: str) -> int:
    """The id of the newest run of ``store`` named ``name``.

    Raises:
        AccelbenchError: no run has that name; the message lists the names the store has (one line, exit 2).
    """
    ids = store.named(name)
    if ids:
        return ids[-1]
    known = store.names()
    have = f"known names: {', '.join(known)}" if known else "no run in it has a name (--name NAME names one)"
    raise AccelbenchError(f"no run named {name!r} in {store.path}: {have}")


def newest_other(store, run_id: int) -> int:
    """The newest run of ``store`` other than ``run_id`` (what ``compare --baseline NAME`` compares by default).

    Raises:
        AccelbenchError: the store holds no other run.
    """
    others = [r["run_id"] for r in store.runs() if r["run_id"] != run_id]
    if not others:
        raise AccelbenchError(f"{store.path} holds no run but the baseline (run {run_id}): name run B")
    return max(others)


def open_ref(store, ref: str | int):
    """``(store, run_id, label)`` of a run reference: a run id in ``store``, ``PATH:ID`` (a run in another store),
    ``name:NAME`` or ``PATH:name:NAME`` (the newest run of that name).

    Raises:
        AccelbenchError: a malformed reference, a store that does not exist, no such run, or no run of that name
            (one line).
    """
    named = _NAMED.match(str(ref).strip())
    try:
        path, run_id = (named.group("path"), None) if named else parse_ref(str(ref))
    except ValueError as exc:
        raise AccelbenchError(f"{exc} or a run name (name:nightly)") from None
    if path is not None:
        if not Path(path).is_file():
            raise AccelbenchError(f"no results store at {path} (in {ref!r})")
        store = Store(path)
    if named:
        run_id = latest_named(store, named.group("name"))
    try:
        run = store.run(run_id)
    except KeyError:
        raise AccelbenchError(f"no run {run_id} in {path or store.path}") from None
    label = f"{path}:{run_id}" if path else f"run {run_id}"
    return store, run_id, label + (f" '{run['name']}'" if run.get("name") else "")


def load_ref(store, ref: str | int) -> RunData:
    """The run a ``compare`` argument names (:func:`open_ref`), loaded.

    Raises:
        AccelbenchError: a malformed reference, a store that does not exist, or no such run (one line).
    """
    store, run_id, label = open_ref(store, ref)
    return load_run(store, run_id, label=label)
