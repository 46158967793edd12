"""What the API's commands return: typed, frozen results (pyperf's ``Run``, optimum-benchmark's
``BenchmarkReport``), so a notebook needs no SQL. Frozen: an attribute cannot be reassigned; its lists stay lists,
as earlier releases returned them (``out.records == []`` still holds).

Every result names its run and its store (``run_id``, ``store_path``), says how the call ended
(``interrupted``, ``statuses``, ``skipped_done``) and reads the run back as a pandas DataFrame
(:meth:`RunResult.to_dataframe`: every stored row of the run, one per case; missing values are NaN, as pandas
keeps them). The rows this call stored are ``records`` (dicts of columns, base units: seconds, bytes, joules).

::

    from accelbench import api
    from accelbench.store import Store

    out = api.run(api.spec("inference", {"model": "cifar-resnet20"}), Store("a.db"))
    out.run_id, out.interrupted, out.records[0]["throughput_samples_per_s"]
    df = out.to_dataframe()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.core.errors import ERROR, exit_code


@dataclass(frozen=True, kw_only=True, slots=True)
class Result:
    """The fields every result has.

    Attributes:
        run_id: the run the rows went to (a ``--resume`` that found the run complete: that run).
        store_path: the SQLite store that holds it.
        interrupted: Ctrl-C, SIGTERM or a store that cannot be written stopped it (finished cases are stored).
        skipped_done: cases already stored by an earlier call (``resume``).
        statuses: the ``status`` of each case row this call stored (``ok``, ``error``, ``oom``, ``unsupported``,
            ``skipped``): what the exit code is made of.
    """

    run_id: int
    store_path: Path
    interrupted: bool = False
    skipped_done: int = 0
    statuses: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """The command line's exit code of this outcome (:func:`accelbench.core.errors.exit_code`): 0, 1 when a
        case ended in ``error``, 130 when interrupted."""
        return exit_code(self.statuses, self.interrupted)

    @property
    def errors(self) -> int:
        """How many of the cases this call stored ended in ``error``."""
        return sum(s == ERROR for s in self.statuses)

    def to_dataframe(self):
        """Every stored row of the run as a pandas DataFrame (one row per case; a convergence run's epochs and a
        multi-process run's per-rank rows too, told apart by ``row_type``), as ``accelbench export`` writes it."""
        from accelbench.store import Store

        with Store(self.store_path) as store:
            return store.cases(self.run_id)


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult(Result):
    """What a sweep returns (``api.run``, ``train``, ``input_pipeline``, ``loadgen``, ``interconnect``, ``sweep``).

    Attributes:
        records: every case row this call stored (not the detail rows: epochs, ranks).
        notes: one-line warnings for the user (a checkpoint refused on resume, ...).
        resumed: per batch size of a case continued mid-way (a convergence run), the epochs it had done.
        already_complete: ``resume`` found no unfinished run but a complete one of the same settings: nothing ran.
        resume_new: ``resume`` found no run of the same settings at all: a new run was started.
        stop_reason: why the sweep stopped before its end other than Ctrl-C/SIGTERM (one line), or None.
        stopped_in: where an interrupted sweep was when it stopped (the running case, its stage and for how long),
            or None.
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    resumed: dict[int, int] = field(default_factory=dict)
    already_complete: bool = False
    resume_new: bool = False
    stop_reason: str | None = None
    stopped_in: str | None = None

    @classmethod
    def of(cls, outcome, store, **more) -> RunResult | None:
        """The result of a loop's :class:`accelbench.sweep.loop.Outcome` stored in ``store`` (None stays None: a
        rank other than 0 of a user's torchrun job)."""
        if outcome is None:
            return None
        return cls(
            run_id=outcome.run_id,
            store_path=Path(store.path),
            records=list(outcome.records),
            statuses=[r["status"] for r in outcome.records],
            interrupted=outcome.interrupted,
            skipped_done=outcome.skipped_done,
            notes=list(outcome.notes),
            resumed=dict(outcome.resumed),
            already_complete=outcome.already_complete,
            resume_new=outcome.resume_new,
            stop_reason=outcome.stop_reason,
            stopped_in=outcome.stopped_in,
            **more,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class ProfileResult(RunResult):
    """What ``api.profile`` returns: the sweep's result and the device's ceilings.

    Unpacks as the 3-tuple earlier releases returned: ``out, ceilings, cached = api.profile(...)``.

    Attributes:
        ceilings: the device's measured ceilings (:class:`accelbench.ceilings.measure.Ceilings`).
        ceilings_cached: whether they were read from the store rather than measured now.
    """

    ceilings: Any = None
    ceilings_cached: bool = False

    def __iter__(self):
        return iter((self, self.ceilings, self.ceilings_cached))


@dataclass(frozen=True, kw_only=True, slots=True)
class StudyResult(Result):
    """What ``api.scale`` and ``api.concurrent`` return.

    Attributes:
        rows: the run's rows for its table (aggregate rows of a scaling study, every process count; merged and
            summary rows of a concurrent one).
        stopped_in: where an interrupted ``concurrent`` study's jobs were when it stopped (each job's running case
            and stage), or None.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    stopped_in: str | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The rows (the name sweeps use)."""
        return self.rows

    @classmethod
    def of(cls, outcome, store) -> StudyResult:
        """The result of a :class:`accelbench.studies.scale.StudyOutcome` stored in ``store``."""
        return cls(
            run_id=outcome.run_id,
            store_path=Path(store.path),
            rows=list(outcome.rows),
            statuses=list(outcome.statuses),
            interrupted=outcome.interrupted,
            skipped_done=outcome.skipped_done,
            stopped_in=outcome.stopped_in,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class TuneResult(Result):
    """What ``api.tune`` returns: the trials, the Pareto front, the winner with its verdicts, and the lines
    ``accelbench tune`` prints (stored on the winner's row as ``tune_summary``, which the HTML report shows).

    Attributes:
        spec, settings: the tune's base spec and :class:`accelbench.studies.tune_search.TuneSettings`.
        trials: every trial row in the order it ran (stored or read back); ``records`` is the same.
        pareto: the Pareto front of the acceptable trials (throughput vs p99 latency).
        winner, runner_up, baseline: the pooled rows of the final rounds (None when no trial finished).
        verdict, gain: :class:`accelbench.core.compare.MetricResult` of the winner against the runner-up and
            against the default configuration (None when not measured).
        spent_s: wall seconds the tune took (its budget is ``settings.budget_s``).
        pruned: configurations dropped in the screening (slower at every batch tried).
        notes: one-line notes (configurations not tried within the budget, ...).
        summary: the winner, verdict and gain lines (``no winner: ...`` without one).
        explain: what got the winner there, one line per axis (``mode compile-freeze vs compile: x1.17 ...``).
        command: the winner as a runnable ``accelbench run ...`` (``train``) command, or None.
    """

    spec: Any = None
    settings: Any = None
    trials: list[dict[str, Any]] = field(default_factory=list)
    pareto: list[dict[str, Any]] = field(default_factory=list)
    winner: dict[str, Any] | None = None
    runner_up: dict[str, Any] | None = None
    baseline: dict[str, Any] | None = None
    verdict: Any = None
    gain: Any = None
    spent_s: float = 0.0
    pruned: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    summary: list[str] = field(default_factory=list)
    explain: list[str] = field(default_factory=list)
    command: str | None = None

    @property
    def records(self) -> list[dict[str, Any]]:
        """The trials (the name sweeps use)."""
        return self.trials

    @property
    def report_lines(self) -> list[str]:
        """What the HTML report's "Winner" block shows (stored as the winner's ``tune_summary``): the summary,
        the notes, what got it there and the command."""
        return [
            *self.summary,
            *self.notes,
            *("what got it there: " + w for w in self.explain),
            *([f"run it: {self.command}"] if self.command else []),
        ]

    def json_section(self) -> dict[str, Any]:
        """The ``tune`` section of the run's JSON (``accelbench tune --json``): settings, winner, runner-up,
        baseline, command, seconds spent, pruned configurations, notes, Pareto front, explanations, verdicts."""
        import dataclasses

        return {
            "settings": self.settings.to_dict(),
            "winner": self.winner,
            "runner_up": self.runner_up,
            "baseline": self.baseline,
            "command": self.command,
            "spent_s": self.spent_s,
            "pruned": self.pruned,
            "notes": self.notes,
            "pareto": self.pareto,
            "explain": self.explain,
            "verdict": dataclasses.asdict(self.verdict) if self.verdict else None,
            "gain": dataclasses.asdict(self.gain) if self.gain else None,
        }

    def toml_text(self) -> str | None:
        """The winner as a TOML file ``accelbench run -c`` reads (``train -c`` for a training step), headed by a
        comment with the summary; None without a winner."""
        from accelbench.studies import tune_final

        if self.winner is None:
            return None
        comment = f"accelbench tune run {self.run_id} ({self.settings.objective}): " + "\n".join(self.summary)
        return tune_final.toml_text(self.spec, self.winner, comment)

    @classmethod
    def of(cls, outcome, spec, settings, store) -> TuneResult:
        """The result of :func:`accelbench.studies.tune.run_tune`'s outcome: its summary, explanations and
        command made here, once."""
        from accelbench.report.tune import summary_lines
        from accelbench.studies.tune_final import command
        from accelbench.studies.tune_search import explain, explain_axes

        w = outcome.winner
        why = explain(outcome.trials, w, settings.objective, explain_axes(settings.workload)) if w else []
        return cls(
            run_id=outcome.run_id,
            store_path=Path(store.path),
            interrupted=outcome.interrupted,
            skipped_done=outcome.skipped_done,
            statuses=list(outcome.statuses),
            spec=spec,
            settings=settings,
            trials=list(outcome.trials),
            pareto=list(outcome.pareto),
            winner=w,
            runner_up=outcome.runner_up,
            baseline=outcome.baseline,
            verdict=outcome.verdict,
            gain=outcome.gain,
            spent_s=outcome.spent_s,
            pruned=list(outcome.pruned),
            notes=list(outcome.notes),
            summary=summary_lines(outcome, settings.objective),
            explain=list(why),
            command=command(spec, w) if w else None,
        )
