"""The library API: one function per command, what the CLI and notebooks call.

::

    from accelbench import api
    from accelbench.store import Store

    spec = api.spec("inference", {"model": "resnet50", "batch_sizes": "1,64"})
    out = api.run(spec, Store("a.db"))                 # accelbench run
    out = api.run(spec, Store("a.db"), gpus=2)         # accelbench run --gpus 2
    df = out.to_dataframe()                           # pandas DataFrame, one row per case

Every sweep goes through :func:`accelbench.sweep.loop.run` (one loop: resume, OOM boundary, failure rows,
interrupts, derived columns, the lease), in this process or under torchrun. Every command returns a typed, frozen
result (:mod:`accelbench.api.results`): the run id, the store, how it ended, the rows, ``to_dataframe()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelbench.api.reading import compare, export_json, export_parquet, history, import_run, report
from accelbench.api.results import ProfileResult, Result, RunResult, StudyResult, TuneResult
from accelbench.api.serving import serve

__all__ = [
    "Result",
    "RunResult",
    "ProfileResult",
    "StudyResult",
    "TuneResult",
    "spec",
    "launcher",
    "check",
    "sweep",
    "run",
    "train",
    "generate",
    "serve",
    "profile",
    "input_pipeline",
    "loadgen",
    "interconnect",
    "scale",
    "concurrent",
    "tune",
    "compare",
    "report",
    "history",
    "export_json",
    "export_parquet",
    "import_run",
    "cuda_available",
]


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def spec(scenario: str, *layers: dict[str, Any], cuda: bool | None = None):
    """Build a :class:`accelbench.core.spec.Spec` of ``scenario``: its defaults for the device kind, then each
    layer (a TOML table, flags; later wins, None skipped).

    Args:
        scenario: ``inference``, ``train_step``, ``converge``, ``profile``, ``input_pipeline``, ``interconnect``,
            ``loadgen``.
        cuda: GPU defaults (default: the spec's ``device``, else whether a GPU is visible).
    Raises:
        ConfigError: an unknown scenario or field, or an invalid value; a field given by one of the scenario's own
            aliases (loadgen's ``max_batch`` for ``batch_sizes``) is named as it was given.
    """
    from accelbench import scenarios
    from accelbench.core.errors import ConfigError
    from accelbench.core.spec import build_spec

    if cuda is None:
        device = next(
            (lay.get("device") for lay in reversed(layers) if isinstance(lay, dict) and lay.get("device")), "auto"
        )
        cuda = device != "cpu" and cuda_available()
    sc = scenarios.get(scenario)
    try:
        return build_spec(sc, *layers, cuda=cuda)
    except ConfigError as exc:
        given = _given_name(sc, layers, exc.field)
        if given == exc.field:
            raise
        raise ConfigError(given, exc.value, exc.allowed) from None


def _given_name(scenario, layers: tuple, field: str) -> str:
    """How the last layer that set ``field`` spelled it: one of ``scenario``'s own aliases of it, or ``field``."""
    own = {k for k, v in getattr(scenario, "aliases", {}).items() if v == field}
    for layer in reversed(layers):
        for key, value in layer.items() if isinstance(layer, dict) else ():
            name = key.replace("-", "_") if isinstance(key, str) else key
            if value is not None and name in own | {field}:
                return name
    return field


def launcher(gpus: int | None = None, opts=None):
    """The launcher for ``gpus`` processes: None runs in this process, a number through torchrun.

    Args:
        opts: :class:`accelbench.launchers.torchrun.job.DistOptions` (``gpus`` replaced when given).
    """
    from accelbench.launchers import INLINE

    if gpus is None and opts is None:
        return INLINE
    import dataclasses

    from accelbench.launchers.torchrun import Torchrun
    from accelbench.launchers.torchrun.job import DistOptions

    opts = opts or DistOptions()
    return Torchrun(dataclasses.replace(opts, gpus=gpus) if gpus is not None else opts)


def check(spec, *, gpus: int | None = None, opts=None, outputs=()) -> None:
    """Everything that can refuse ``spec`` before anything is created (:func:`accelbench.sweep.loop.check`): the
    device, the models (resolved, not built), the data (readable), the scenario on this launch, and each of
    ``outputs`` (files to write after the run: :func:`accelbench.core.outputs.check_writable`). A command calls it
    before it creates its store and prints its header.

    Raises:
        ConfigError, UnknownModelError, MissingDependencyError, DataError, OutputError: one line each.
    """
    from accelbench import scenarios
    from accelbench.core.outputs import check_writable
    from accelbench.sweep import loop

    loop.check(scenarios.get(spec.scenario), spec, launcher(gpus, opts))
    for path in outputs:
        if path is not None:
            check_writable(path)


def sweep(
    spec,
    store,
    *,
    gpus: int | None = None,
    opts=None,
    resume: bool = False,
    on_case: Callable | None = None,
    on_row: Callable | None = None,
    name: str | None = None,
    tags=None,
) -> RunResult | None:
    """Run ``spec``'s scenario over its cases and store every row (the loop; see the module docstring).

    Under a user's torchrun or srun (rank variables set), this process runs as one rank and rank 0 stores.

    Args:
        gpus: run data parallel on this many processes (GPUs; CPU processes without GPUs) through torchrun.
        opts: further launch options (:class:`accelbench.launchers.torchrun.job.DistOptions`).
        resume: continue the newest unfinished run of the same spec and launch.
        on_case: progress ``(index, total, case, record_or_None)``; on_row: each detail row (an epoch) stored.
        name: the run's name (``compare --baseline NAME`` finds it); tags: ``{"key": "value"}`` or ``["key=value"]``.
    Returns:
        :class:`accelbench.api.results.RunResult` (None on a rank other than 0 of a user's job).
    Raises:
        ConfigError: a bad name or tag (before anything runs).
    """
    from accelbench import scenarios
    from accelbench.core.runlabel import run_label
    from accelbench.launchers.torchrun.ranks import rank_info
    from accelbench.sweep import loop

    scenario = scenarios.get(spec.scenario)
    label = run_label(name, tags)
    info = rank_info()
    if info is not None and scenario.dist_kind:
        from accelbench.sweep.here import run_here

        return RunResult.of(run_here(scenario, spec, store.path, info, opts, on_case=on_case, label=label), store)
    return RunResult.of(
        loop.run(
            scenario,
            spec,
            store,
            launcher=launcher(gpus, opts),
            resume=resume,
            on_case=on_case,
            on_row=on_row,
            label=label,
        ),
        store,
    )


def run(spec, store, **kw) -> RunResult:
    """``accelbench run``: the inference sweep (``spec.scenario == "inference"``); keywords as :func:`sweep`."""
    return sweep(spec, store, **kw)


def train(spec, store, **kw) -> RunResult:
    """``accelbench train``: training-step throughput (``train_step``) or, for a ``converge`` spec, training to
    accuracy (epoch rows as they end: ``on_row``); keywords as :func:`sweep`."""
    return sweep(spec, store, **kw)


def generate(spec, store, **kw) -> RunResult:
    """``accelbench generate``: language-model prefill and decode (``spec.scenario == "generate"``); keywords as
    :func:`sweep`."""
    return sweep(spec, store, **kw)


def profile(spec, store, **kw) -> ProfileResult:
    """``accelbench profile``: the sweep's result with the device's ceilings, measured (or found in the store)
    before the cases run; keywords as :func:`sweep`.

    Returns:
        :class:`accelbench.api.results.ProfileResult` (it unpacks as ``(result, ceilings, ceilings_were_cached)``,
        as earlier releases returned).
    """
    import dataclasses

    from accelbench import scenarios
    from accelbench.api.charting import charting
    from accelbench.ceilings.cache import get_ceilings
    from accelbench.core.device import resolve_device

    device = resolve_device(spec.device)
    scenarios.get("profile").check(spec)  # a typo is one line before minutes of ceiling measurements
    ceilings, cached = get_ceilings(store, device, spec.settings.remeasure_ceilings)
    if spec.settings.chart_dir:
        kw["on_case"] = charting(store, ceilings, spec.settings.chart_dir, kw.get("on_case"))
    out = sweep(spec, store, **kw)
    if out is None:  # a rank other than 0 of a user's job
        return None
    fields = {f.name: getattr(out, f.name) for f in dataclasses.fields(out)}
    return ProfileResult(**fields, ceilings=ceilings, ceilings_cached=cached)


def input_pipeline(spec, store, **kw) -> RunResult:
    """``accelbench input-pipeline``: loader, resident and storage rates (``input_pipeline`` spec)."""
    return sweep(spec, store, **kw)


def loadgen(spec, store, **kw) -> RunResult:
    """``accelbench loadgen``: MLPerf's SingleStream, MultiStream, Server and Offline through LoadGen
    (``loadgen`` spec); keywords as :func:`sweep`. Needs ``pip install 'accelbench[loadgen]'``."""
    return sweep(spec, store, **kw)


def interconnect(spec, store, opts) -> RunResult:
    """``accelbench interconnect``: collectives and GPU pair copies on ``opts.gpus`` ranks."""
    return sweep(spec, store, opts=opts)


def scale(spec, store, counts: list[int], opts=None, *, resume: bool = False, on_case=None) -> StudyResult:
    """``accelbench scale``: ``spec`` on each process count; see :func:`accelbench.studies.scale.run_scale`."""
    from accelbench import scenarios
    from accelbench.launchers.torchrun.job import DistOptions
    from accelbench.studies.scale import run_scale

    return StudyResult.of(
        run_scale(
            scenarios.get(spec.scenario), spec, store, opts or DistOptions(), counts, resume=resume, on_case=on_case
        ),
        store,
    )


def concurrent(
    specs: list, gpus_per_job: int, store, opts=None, *, sequential_gpus: int | None = None, resume: bool = False
) -> StudyResult:
    """``accelbench concurrent``: the specs as jobs at once on disjoint GPU sets, then one after another;
    see :func:`accelbench.studies.concurrent.run_concurrent`."""
    from accelbench import scenarios
    from accelbench.launchers.torchrun.job import DistOptions
    from accelbench.studies.concurrent import ConcurrentJob, run_concurrent

    jobs = [ConcurrentJob(scenario=scenarios.get(s.scenario), spec=s, gpus=gpus_per_job) for s in specs]
    return StudyResult.of(run_concurrent(jobs, store, opts or DistOptions(), sequential_gpus, resume=resume), store)


def tune(
    spec, store, settings, *, resume: bool = False, on_trial: Callable | None = None, name: str | None = None, tags=None
) -> TuneResult:
    """``accelbench tune``: search precisions x backends x batch sizes of ``spec``'s model (an inference spec;
    a ``train_step`` spec with ``settings.workload="train"``: the training step, fused vs foreach optimizer
    kernels too) for ``settings.objective`` within ``settings.budget_s``; see
    :func:`accelbench.studies.tune.run_tune`.

    Args:
        settings: :class:`accelbench.studies.tune_search.TuneSettings` (workload, objective, constraints, space,
            budget).
        name, tags: the run's name and tags (as :func:`sweep`).
    Returns:
        :class:`accelbench.api.results.TuneResult` (the winner, its verdicts, the Pareto front, every trial, and the
        lines ``accelbench tune`` prints). The winner's row stores those lines (``tune_summary``): the run's HTML
        report shows them.
    """
    from accelbench.core.runlabel import run_label
    from accelbench.studies.tune import run_tune

    label = run_label(name, tags)
    out = TuneResult.of(
        run_tune(spec, settings, store, resume=resume, on_trial=on_trial, named=label), spec, settings, store
    )
    if out.winner is not None and out.winner.get("case_id") is not None:
        store.update_case(int(out.winner["case_id"]), {"tune_summary": "\n".join(out.report_lines)})
    return out
