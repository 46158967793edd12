"""The tests' shorthand for building and running each scenario's spec through :mod:`accelbench.api`."""

from __future__ import annotations

from accelbench import api, scenarios


def build_spec(*layers, cuda: bool = False):
    return api.spec("inference", *layers, cuda=cuda)


def build_train_spec(*layers, cuda: bool = False):
    return api.spec("train_step", *layers, cuda=cuda)


def build_converge_spec(*layers, cuda: bool = False):
    return api.spec("converge", *layers, cuda=cuda)


def build_profile_spec(*layers, cuda: bool = False):
    return api.spec("profile", *layers, cuda=cuda)


def expand(spec, device: str | None = None):
    """The cases of ``spec`` on ``device`` (default: the spec's)."""
    return scenarios.get(spec.scenario).cases(spec, device or spec.device)


def epochs(store, run_id: int) -> list[dict]:
    """The epoch rows of a convergence run, in order."""
    return [r for r in store.cases(run_id).to_dict("records") if r.get("row_type") == "epoch"]


class Converged:
    """A convergence run's outcome as the tests read it: the loop's :class:`Outcome` plus the epoch rows this
    call stored (``epochs``) and the summary rows (``summaries``)."""

    def __init__(self, out, epochs: list[dict]):
        self.run_id, self.interrupted, self.notes, self.resumed = out.run_id, out.interrupted, out.notes, out.resumed
        self.summaries, self.epochs = out.records, epochs


def run_convergence(spec, store, resume: bool = False, on_epoch=None, on_note=None) -> Converged:
    """``accelbench train --epochs``: :func:`accelbench.api.train` on a converge spec, ``on_epoch(bs, row)``
    after each stored epoch, ``on_note(line)`` for each note."""
    rows: list[dict] = []

    def on_row(r: dict) -> None:
        rows.append(r)
        if on_epoch:
            on_epoch(r["batch_size"], r)

    out = api.train(spec, store, resume=resume, on_row=on_row)
    for n in out.notes:
        if on_note:
            on_note(n)
    return Converged(out, rows)
