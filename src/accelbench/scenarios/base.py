"""The scenario base class and the registry (:data:`SCENARIOS`); each scenario is a module beside this one."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.core.config import pick, put
from accelbench.core.errors import ConfigError
from accelbench.core.spec import Case, Extras, Settings, Spec, grid
from accelbench.models.base import IMAGE

if TYPE_CHECKING:
    import torch

    from accelbench.core.rank import Rank
    from accelbench.store import Store
    from accelbench.telemetry import Monitor, ProcessMonitor

# A measurement: the case's row (column -> value) and its raw series (series name -> samples, e.g. ``latency_ms``).
Measurement = tuple[dict[str, Any], dict[str, list[float]]]


class CaseSink(Protocol):
    """What a scenario's :meth:`Scenario.measure` can do besides returning its row: store a detail row now (an
    epoch, a message size, a Server search probe). The inline launcher's sink (one process, rows stored at once:
    :class:`accelbench.launchers.inline.RowSink`) also resumes a case that stopped mid-way (:class:`ResumingSink`);
    a torchrun rank's (:class:`accelbench.launchers.torchrun.worker.RankSink`) hands the rows on with the case."""

    @property
    def run_id(self) -> int | None: ...  # the run the rows go to (None on a torchrun rank)

    @property
    def resumed(self) -> bool: ...  # the run was reopened by ``--resume``

    def add(self, rec: dict[str, Any], series: dict[str, list[float]] | None = None, derived: Any = None) -> Any: ...


class ResumingSink(CaseSink, Protocol):
    """A sink of a reopened run: a case continues where an earlier call stopped (a convergence run's epochs)."""

    def delete(self, keys: list[str]) -> int: ...  # drop stored rows that will be measured again

    def done_keys(self) -> set[str]: ...

    def note(self, text: str) -> None: ...  # a one-line note for the user

    def continued(self, batch_size: int, done: int) -> None: ...  # ``done`` units (epochs) stored before


class Scenario:
    """Base class; a scenario overrides what differs.

    Attributes:
        name: the scenario's name (``Spec.scenario``).
        kind: ``runs.kind`` when it runs in one process; dist_kind: under torchrun (None: it cannot).
        workload: the rows' ``workload`` column; dist_workload: under torchrun.
        settings_type / extras_type: its :class:`Settings` and per-case :class:`Extras` dataclasses.
        aliases: extra spellings of fields in TOML and flags.
        rejects: shared fields the scenario does not use (set, they are a one-line error, not ignored).
        image_inputs: it takes the shared image-input and timing fields (:data:`accelbench.core.spec.IMAGE_FIELDS`:
            memory format, images, data, input size, bad files, warm-up and timed window, cuDNN autotuning); without
            them, they are refused as a group and its rows carry no ``channels_last_setting``.
        derived_keys: keyword arguments of :func:`accelbench.sweep.derived.derived_columns` for its rows.
        training: precisions and backends are checked for training (a case that cannot train is ``unsupported``).
        backend_workload: the workload its cases ask of a backend (:attr:`accelbench.backends.Backend.workloads`):
            ``train`` for a training scenario, else ``inference``; a later scenario names its own.
        quantizes: it quantizes the model for the int8/fp8 precisions (elsewhere they are ``unsupported``, never
            run silently in fp32).
        rank_rows: under torchrun, store a row per rank and an aggregate row (else rank 0's rows are the case's).
        requires: pip distributions every run of it needs -> why (the install check before a run names it).
        cudnn_benchmark_default: cuDNN autotuning for its cases when the spec leaves ``cudnn_benchmark`` unset (None:
            torch's own, off); a scenario that must decide otherwise overrides :meth:`cudnn_benchmark`.
        gpu_defaults / cpu_defaults: the spec's defaults on a GPU / CPU.
        model_kind: the kind of model its cases take (:data:`accelbench.models.base.KINDS`): a model of another
            kind is refused before anything runs; a scenario whose kind depends on its settings overrides
            :meth:`takes`.
        command: the command that runs it, as its refusals name it.
    """

    name = ""
    kind = ""
    dist_kind: str | None = None
    workload = ""
    dist_workload: str | None = None
    settings_type: type[Settings] = Settings
    extras_type: type[Extras] = Extras
    aliases: dict[str, str] = {}
    rejects: tuple[str, ...] = ()
    image_inputs = True
    derived_keys: dict[str, Any] = {}
    training = False
    quantizes = False
    rank_rows = True
    uses_models = True
    requires: dict[str, str] = {}
    cudnn_benchmark_default: bool | None = None
    gpu_defaults: dict[str, Any] = {}
    cpu_defaults: dict[str, Any] = {}
    model_kind: str | None = IMAGE
    command = ""

    @property
    def backend_workload(self) -> str:
        return "train" if self.training else "inference"

    # planning --------------------------------------------------------------------------------------
    def defaults(self, cuda: bool) -> dict[str, Any]:
        return dict(self.gpu_defaults if cuda else self.cpu_defaults)

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        """Adjust merged fields before the spec is built (e.g. one value where the scenario takes one)."""
        return merged

    def validate(self, spec: Spec) -> None:
        """Scenario rules beyond the shared types: models, batch sizes, allowed precisions and backends.

        Raises:
            ConfigError: naming the field and what is allowed.
        """
        from accelbench import backends, precisions
        from accelbench.core.config import check_choices

        if self.uses_models:
            if not spec.models:
                raise ConfigError("model", spec.models, "one or more model names")
            if not spec.batch_sizes:
                raise ConfigError("batch_sizes", spec.batch_sizes, "positive integers, e.g. 1,8,32")
            # every name that exists is accepted: one that cannot run in this scenario (fp16 training) or on this
            # device is an ``unsupported`` row with the reason, as a combination that cannot run always is
            check_choices("precision", spec.precisions, precisions.names())
            check_choices("mode", spec.modes, backends.names())

    def extras(self, spec: Spec) -> Extras:
        """The per-case fields every case of ``spec`` gets."""
        return self.extras_type()

    def cases(self, spec: Spec, device: str) -> list[Case]:
        """The cases of ``spec`` on ``device`` (default: the model x precision x mode x batch size grid)."""
        return grid(spec, device, self.extras(spec))

    def check(self, spec: Spec) -> None:
        """Before a run is opened: the models resolve (without being built) and the data is readable.

        Raises:
            UnknownModelError, MissingDependencyError, DataError: one line each.
        """
        from accelbench.data import check_data

        self.check_models(spec)
        check_data(spec.data, spec.skip_bad_images)

    def takes(self, spec: Spec) -> str | None:
        """The kind of model the cases of ``spec`` take: :attr:`model_kind`."""
        return self.model_kind

    def check_models(self, spec: Spec) -> None:
        """Each model resolves (not built) and is of the kind :meth:`takes` names.

        Raises:
            ModelKindError: a model of another kind, one line naming the command that measures it.
            UnknownModelError, MissingDependencyError: one line each.
        """
        from accelbench.models import check_model

        for name in spec.models:
            check_model(name, self.takes(spec), self.command or f"the {self.name} scenario")

    def unsupported_reason(self, case: Case, device: torch.device) -> str | None:
        """Why ``case`` cannot run on ``device``: its precision's or its backend's reason, or None."""
        from accelbench import backends, precisions

        if case.precision is None or case.mode is None:  # a case without a model: its scenario's own rules
            return None
        return (
            quant_reason(self, case.precision, self.training)
            or precisions.unsupported_reason(case.precision, device, self.training)
            or backends.mode(case.mode).unsupported_reason(device, self.backend_workload)
        )

    # running ---------------------------------------------------------------------------------------
    def cudnn_benchmark(self, case: Case, spec: Spec) -> bool | None:
        """``torch.backends.cudnn.benchmark`` for ``case`` (None: left as torch has it, off): the spec's
        ``cudnn_benchmark`` when set, else :attr:`cudnn_benchmark_default`. The case runner
        (:func:`accelbench.launchers.case.run_case`) sets it around the measurement and stores the value in force."""
        return spec.cudnn_benchmark if spec.cudnn_benchmark is not None else self.cudnn_benchmark_default

    def prepare(self, spec: Spec, device: torch.device, store: Store | None) -> Any:
        """Per-sweep state handed to every case as ``measure``'s ``state`` (default: the images, decoded once, here
        and now). ``store``: the run's store (None on a torchrun rank)."""
        from accelbench.data.batches import Inputs

        inputs = Inputs.for_spec(spec, device)
        inputs.raw_images()
        return inputs

    def base_record(self, case: Case, device: torch.device) -> dict[str, Any]:
        """The identity columns of a case's row."""
        import dataclasses

        rec = {
            "case_key": case.key,
            "workload": self.workload,
            "model": case.model,
            "batch_size": case.batch_size,
            "precision": case.precision,
            "mode": case.mode,
            **({"channels_last_setting": case.channels_last} if self.image_inputs else {}),
            "device": str(device),
            "data": case.data,
            "images": case.images,
            "started_at": time.time(),
        }
        rec.update(dataclasses.asdict(case.extras))
        if case.mode is not None:
            from accelbench import backends

            rec.update(backends.mode(case.mode).options())  # compile_mode, freezing
        return rec

    def measure(self, case: Case, spec: Spec, state: Any, rank: Rank, sink: CaseSink) -> Measurement:
        """Measure one case; return ``(record, raw series)``. Raise on failure (the case runner makes it a row).

        Args:
            case: the case (one of :meth:`cases`); spec: the sweep's spec.
            state: what :meth:`prepare` returned, once per sweep (per rank under torchrun).
            rank: where it runs: one process (:class:`accelbench.core.rank.Rank`) or a torchrun rank (its subclass
                :class:`accelbench.launchers.torchrun.context.RankContext`).
            sink: where detail rows go as they happen (:class:`CaseSink`).
        """
        raise NotImplementedError

    def oom_group(self, case: Case) -> tuple[Any, ...] | None:
        """Cases that share an OOM boundary (larger batch sizes are skipped after an OOM), or None."""
        return (case.model, case.precision, case.mode, case.channels_last)

    def after_store(self, store: Store, case_id: int, rec: dict[str, Any], extra: dict[str, Any]) -> None:
        """Store what goes to extension tables (``extra``: the record's ``_``-prefixed keys)."""

    def export_extra(self, store: Store, run_id: int, doc: dict[str, Any]) -> None:
        """Add what the scenario keeps in extension tables to a run's JSON document."""

    def import_extra(self, store: Store, run_id: int, doc: dict[str, Any], case_ids: dict[str, int]) -> None:
        """Store what :meth:`export_extra` added to an imported run's document (``case_ids``: case key -> the
        imported run's case id)."""


def quant_reason(scenario: Scenario, precision: str, training: bool = False) -> str | None:
    """Why ``scenario`` cannot run quantized ``precision`` (it does not quantize), or None."""
    from accelbench import precisions

    if training or not precisions.quant_scheme(precision) or scenario.quantizes:
        return None
    return f"{precision} is measured by accelbench run only (this command does not quantize the model)"


SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Add ``scenario`` to :data:`SCENARIOS` under its name.

    Raises:
        ValueError: another scenario has that name.
    """
    return put(SCENARIOS, scenario.name, scenario, "scenario")


def adopt(name: str, obj: object) -> None:
    """Register what an ``accelbench.scenarios`` entry point names: a :class:`Scenario` subclass or instance."""
    from accelbench.core.plugins import instance

    register(instance(obj, Scenario))


def get(name: str) -> Scenario:
    """The scenario called ``name``.

    Raises:
        ConfigError: no such scenario.
    """
    return pick(SCENARIOS, name, "scenario")


def by_kind(kind: str) -> Scenario | None:
    """The scenario whose runs have ``kind`` (one process or torchrun), or None (a study's run)."""
    return next((s for s in SCENARIOS.values() if kind in (s.kind, s.dist_kind)), None)


def case_monitor(spec: Spec, case: Case, device: torch.device, pids: tuple[int, ...] = ()) -> Monitor | ProcessMonitor:
    """The telemetry monitor around a case's timed window (:func:`accelbench.telemetry.monitor`): the spec's
    period, and the sampler where ``spec.telemetry_isolation`` and the case's backend put it (``auto``: a sampler
    process for a host-bound backend, :func:`accelbench.telemetry.isolation_for`).

    Args:
        pids: the job's other processes on this host (:meth:`accelbench.core.rank.Rank.pids`).
    """
    from accelbench import backends
    from accelbench.core import stage
    from accelbench.telemetry import isolation_for, monitor

    stage.enter("the timed window")
    host_bound = case.mode in backends.names() and backends.mode(case.mode).host_bound
    return monitor(device, spec.telemetry_period_ms / 1000, pids, isolation_for(spec.telemetry_isolation, host_bound))
