"""A run named on the command line or in a notebook: ``12`` (a run in the store at hand) or ``other.db:12`` (a run
in another store), opened and loaded as :class:`accelbench.core.rundata.RunData`."""

from __future__ import annotations

from pathlib import Path

from accelbench.core.errors import AccelbenchError
from accelbench.core.rundata import RunData, load_run, parse_ref
from accelbench.store import Store


def open_ref(store, ref: str | int):
    """``(store, run_id, label)`` of a run reference: a run id in ``store``, or ``PATH:ID`` (a run in another store).

    Raises:
        AccelbenchError: a malformed reference, a store that does not exist, or no such run (one line).
    """
    try:
        path, run_id = parse_ref(str(ref))
    except ValueError as exc:
        raise AccelbenchError(str(exc)) from None
    if path is not None:
        if not Path(path).is_file():
            raise AccelbenchError(f"no results store at {path} (in {ref!r})")
        store = Store(path)
    try:
        store.run(run_id)
    except KeyError:
        raise AccelbenchError(f"no run {run_id} in {path or store.path}") from None
    return store, run_id, f"{path}:{run_id}" if path else f"run {run_id}"


def load_ref(store, ref: str | int) -> RunData:
    """The run a ``compare`` argument names (:func:`open_ref`), loaded.

    Raises:
        AccelbenchError: a malformed reference, a store that does not exist, or no such run (one line).
    """
    store, run_id, label = open_ref(store, ref)
    return load_run(store, run_id, label=label)
