"""The inline launcher: every case in this process, one after another, through :func:`accelbench.launchers.case.run_case`."""

from __future__ import annotations

from typing import Any


class RowSink:
    """What a scenario's ``measure`` can do besides returning its row: store detail rows as they happen
    (epochs), drop rows it will measure again, and leave one-line notes for the user.

    Attributes:
        store, run_id: where rows go. resumed: the run was reopened (a case may continue where it stopped).
    """

    def __init__(self, sweep):
        self.sweep = sweep
        self.store, self.run_id, self.resumed = sweep.store, sweep.run_id, sweep.resumed

    def add(self, rec: dict[str, Any], series: dict | None = None, derived: dict | bool | None = None) -> int:
        """Store a detail row now (with derived columns; ``derived`` as :meth:`Sweep.add_row`)."""
        case_id = self.sweep.add_row(rec, series, derived)
        if self.sweep.on_row:
            self.sweep.on_row(rec)
        return case_id

    def delete(self, keys) -> int:
        return self.store.delete_cases(self.run_id, keys)

    def done_keys(self) -> set[str]:
        return self.store.done_keys(self.run_id)

    def note(self, text: str) -> None:
        self.sweep.out.notes.append(text)

    def continued(self, batch_size: int, done: int) -> None:
        """A case of ``batch_size`` continues after ``done`` units (epochs) stored by an earlier call."""
        self.sweep.out.resumed[batch_size] = done


class Inline:
    """Run the cases here (see :mod:`accelbench.launchers`)."""

    distributed = False

    def device(self, spec):
        from accelbench.core.device import resolve_device

        return resolve_device(spec.device)

    def case_device(self, device) -> str:
        return str(device)

    def env_device(self, device):
        return device

    def devices(self, device) -> list:
        return [device]

    def prepare(self, scenario, spec, device, store):
        return scenario.prepare(spec, device, store)

    def kind(self, scenario) -> str:
        from accelbench.core.errors import ConfigError

        if not scenario.kind:
            raise ConfigError("gpus", None, f"a number of processes: {scenario.name} runs on torchrun ranks only")
        return scenario.kind

    def identity(self) -> dict:
        return {}

    def env(self) -> dict:
        return {}

    def doc(self, scenario) -> dict:
        return {}

    def key(self, case) -> str:
        return case.key

    def execute(self, sweep, cases: list, state) -> None:
        from accelbench.core.rank import Rank
        from accelbench.launchers.case import run_case

        rank, sink = Rank(sweep.device), RowSink(sweep)
        for case in cases:
            sweep.started(case)
            reason = sweep.skip_reason(case)
            if reason:
                rec, series = sweep.skipped(case, reason), {}
            else:
                rec, series = run_case(sweep.scenario, case, sweep.spec, state, rank, sink)
            sweep.finished(case, rec, series)


INLINE = Inline()
