"""The library API: one function per command, what the CLI and notebooks call.

::

    from accelbench import api
    from accelbench.store import Store

    spec = api.spec("inference", {"model": "resnet50", "batch_sizes": "1,64"})
    out = api.run(spec, Store("a.db"))                 # accelbench run
    out = api.run(spec, Store("a.db"), gpus=2)         # accelbench run --gpus 2
    df = Store("a.db").cases(out.run_id)              # pandas DataFrame

Every sweep goes through :func:`accelbench.sweep.loop.run` (one loop: resume, OOM boundary, failure rows,
interrupts, derived columns, the lease), in this process or under torchrun.
"""

from __future__ import annotations

from typing import Any, Callable

from accelbench.core.errors import OK
from accelbench.sweep.loop import Outcome


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
        ConfigError: an unknown scenario or field, or an invalid value.
    """
    from accelbench import scenarios
    from accelbench.core.spec import build_spec

    if cuda is None:
        device = next((lay.get("device") for lay in reversed(layers) if isinstance(lay, dict) and lay.get("device")),
                      "auto")
        cuda = device != "cpu" and cuda_available()
    return build_spec(scenarios.get(scenario), *layers, cuda=cuda)


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
    from accelbench.sweep import loop
    from accelbench.core.outputs import check_writable

    loop.check(scenarios.get(spec.scenario), spec, launcher(gpus, opts))
    for path in outputs:
        if path is not None:
            check_writable(path)


def sweep(spec, store, *, gpus: int | None = None, opts=None, resume: bool = False,
          on_case: Callable | None = None, on_row: Callable | None = None) -> Outcome:
    """Run ``spec``'s scenario over its cases and store every row (the loop; see the module docstring).

    Under a user's torchrun or srun (rank variables set), this process runs as one rank and rank 0 stores.

    Args:
        gpus: run data parallel on this many processes (GPUs; CPU processes without GPUs) through torchrun.
        opts: further launch options (:class:`accelbench.launchers.torchrun.job.DistOptions`).
        resume: continue the newest unfinished run of the same spec and launch.
        on_case: progress ``(index, total, case, record_or_None)``; on_row: each detail row (an epoch) stored.
    Returns:
        :class:`accelbench.sweep.loop.Outcome` (None on a rank other than 0 of a user's job).
    """
    from accelbench import scenarios
    from accelbench.sweep import loop
    from accelbench.launchers.torchrun.ranks import rank_info

    scenario = scenarios.get(spec.scenario)
    info = rank_info()
    if info is not None and scenario.dist_kind:
        from accelbench.sweep.here import run_here

        return run_here(scenario, spec, store.path, info, opts, on_case=on_case)
    return loop.run(scenario, spec, store, launcher=launcher(gpus, opts), resume=resume, on_case=on_case,
                    on_row=on_row)


def run(spec, store, **kw) -> Outcome:
    """``accelbench run``: the inference sweep (``spec.scenario == "inference"``); keywords as :func:`sweep`."""
    return sweep(spec, store, **kw)


def train(spec, store, **kw) -> Outcome:
    """``accelbench train``: training-step throughput (``train_step``) or, for a ``converge`` spec, training to
    accuracy (epoch rows as they end: ``on_row``); keywords as :func:`sweep`."""
    return sweep(spec, store, **kw)


def generate(spec, store, **kw) -> Outcome:
    """``accelbench generate``: language-model prefill and decode (``spec.scenario == "generate"``); keywords as
    :func:`sweep`."""
    return sweep(spec, store, **kw)


def profile(spec, store, **kw) -> tuple[Outcome, Any, bool]:
    """``accelbench profile``: returns ``(outcome, ceilings, ceilings_were_cached)``.

    The device's ceilings are measured (or found in the store) before the cases run.
    """
    from accelbench import scenarios
    from accelbench.core.device import resolve_device
    from accelbench.scenarios.profile.scenario import get_ceilings

    device = resolve_device(spec.device)
    scenarios.get("profile").check(spec)  # a typo is one line before minutes of ceiling measurements
    ceilings, cached = get_ceilings(store, device, spec.settings.remeasure_ceilings)
    if spec.settings.chart_dir:
        kw["on_case"] = _charting(store, ceilings, spec.settings.chart_dir, kw.get("on_case"))
    return sweep(spec, store, **kw), ceilings, cached


def _charting(store, ceilings, folder: str, on_case):
    """``on_case`` that first draws the roofline charts of each finished ``ok`` profile case into ``folder`` and
    puts their paths (or ``chart_error``) on its stored row and its record."""
    from pathlib import Path

    from accelbench.report.roofline import case_charts
    from accelbench.scenarios.profile.scenario import slug
    from accelbench.scenarios.profile.storage import kernel_rows

    def finished(i: int, n: int, case, rec) -> None:
        if rec is not None and rec.get("status") == OK and rec.get("case_id") is not None:
            cols = case_charts(rec, kernel_rows(store, rec["case_id"]), ceilings, Path(folder) / slug(case))
            store.update_case(rec["case_id"], cols)
            rec.update(cols)
        if on_case:
            on_case(i, n, case, rec)

    return finished


def input_pipeline(spec, store, **kw) -> Outcome:
    """``accelbench input-pipeline``: loader, resident and storage rates (``input_pipeline`` spec)."""
    return sweep(spec, store, **kw)


def loadgen(spec, store, **kw) -> Outcome:
    """``accelbench loadgen``: MLPerf's SingleStream, MultiStream, Server and Offline through LoadGen
    (``loadgen`` spec); keywords as :func:`sweep`. Needs ``pip install 'accelbench[loadgen]'``."""
    return sweep(spec, store, **kw)


def interconnect(spec, store, opts) -> Outcome:
    """``accelbench interconnect``: collectives and GPU pair copies on ``opts.gpus`` ranks."""
    return sweep(spec, store, opts=opts)


def scale(spec, store, counts: list[int], opts=None, *, resume: bool = False, on_case=None):
    """``accelbench scale``: ``spec`` on each process count; see :func:`accelbench.studies.scale.run_scale`."""
    from accelbench import scenarios
    from accelbench.launchers.torchrun.job import DistOptions
    from accelbench.studies.scale import run_scale

    return run_scale(scenarios.get(spec.scenario), spec, store, opts or DistOptions(), counts, resume=resume,
                     on_case=on_case)


def concurrent(specs: list, gpus_per_job: int, store, opts=None, *, sequential_gpus: int | None = None,
               resume: bool = False):
    """``accelbench concurrent``: the specs as jobs at once on disjoint GPU sets, then one after another;
    see :func:`accelbench.studies.concurrent.run_concurrent`."""
    from accelbench import scenarios
    from accelbench.launchers.torchrun.job import DistOptions
    from accelbench.studies.concurrent import ConcurrentJob, run_concurrent

    jobs = [ConcurrentJob(scenario=scenarios.get(s.scenario), spec=s, gpus=gpus_per_job) for s in specs]
    return run_concurrent(jobs, store, opts or DistOptions(), sequential_gpus, resume=resume)


def tune(spec, store, settings, *, resume: bool = False, on_trial: Callable | None = None):
    """``accelbench tune``: search precisions x backends x batch sizes of ``spec``'s model (an inference spec;
    a ``train_step`` spec with ``settings.workload="train"``: the training step, fused vs foreach optimizer
    kernels too) for ``settings.objective`` within ``settings.budget_s``; see
    :func:`accelbench.studies.tune.run_tune`.

    Args:
        settings: :class:`accelbench.studies.tune_search.TuneSettings` (workload, objective, constraints, space,
            budget).
    Returns:
        :class:`accelbench.studies.tune.TuneOutcome` (the winner, its verdicts, the Pareto front, every trial).
    """
    from accelbench.studies.tune import run_tune

    return run_tune(spec, settings, store, resume=resume, on_trial=on_trial)


def compare(store, a, b, *, margin: float | None = None, ignore: tuple[str, ...] = (), n_boot: int | None = None):
    """``accelbench compare``: run B (or each of several) against run A, case by case.

    Args:
        store: the store that run ids without a path refer to.
        a, b: run references: an id (``12``) or ``PATH:ID`` (a run in another store); ``b`` may be a list.
        margin: equivalence margin of the verdicts (fraction, default 0.02).
        ignore: match fields left out of the case matching (e.g. ``("precision",)`` to compare fp32 with bf16).
        n_boot: bootstrap replicates per side and case (default 2000).
    Returns:
        One :class:`accelbench.core.compare.Comparison` per B.
    Raises:
        AccelbenchError: a run or store that does not exist (one line).
    """
    from accelbench.core import compare as cmp
    from accelbench.store.refs import load_ref

    base = load_ref(store, a)
    kw = {"margin": cmp.MARGIN if margin is None else margin, "ignore": tuple(ignore),
          "n_boot": cmp.N_BOOT if n_boot is None else n_boot}
    return [cmp.compare_runs(base, load_ref(store, r), **kw) for r in (b if isinstance(b, (list, tuple)) else [b])]


def report(store, run_ids: list[int | str] | None = None, *, html=None, markdown=None, compare: tuple | None = None,
           margin: float | None = None) -> dict:
    """``accelbench report``: one self-contained HTML file and/or a markdown file over stored runs.

    Args:
        run_ids: the runs (default: every run in the store): ids in ``store`` or ``PATH:ID`` references to runs of
            other stores (one report over runs measured on different machines).
        html, markdown: paths to write (either or both).
        compare: ``(A, B)`` run references (as :func:`compare`) to compare in the report; without it, two runs
            given in ``run_ids`` whose cases match are compared.
        margin: equivalence margin of the comparison's verdicts (default 0.02).
    Returns:
        The report document (:func:`accelbench.report.document.build`).
    Raises:
        AccelbenchError: a run that does not exist (one line). MissingDependencyError: jinja2 or matplotlib missing.
        OutputError: an output that cannot be written (checked first: exit 2; a write that fails: exit 1).
    """
    from accelbench.core.outputs import check_writable, write_text
    from accelbench.store.refs import open_ref
    from accelbench.report import document

    for path in (html, markdown):  # before minutes of charts
        if path:
            check_writable(path)
    runs = [open_ref(store, ref) for ref in run_ids] if run_ids else None
    store = store if store is not None else runs[0][0]  # every run named by PATH:ID
    comparisons = []
    if compare is not None:
        comparisons = globals()["compare"](store, compare[0], [compare[1]], margin=margin)
    elif run_ids and len(run_ids) == 2:
        found = globals()["compare"](store, str(run_ids[0]), [str(run_ids[1])], margin=margin)
        comparisons = [c for c in found if c.cases]
    doc = document.build(store, None, comparisons, runs=runs)
    if html:
        write_text(html, document.render_html(doc))
    if markdown:
        write_text(markdown, document.render_markdown(doc))
    return doc


def export_json(store, run_id: int, path) -> None:
    """Write a run (spec, environment, results, and its scenario's extension data) as JSON, atomically.

    Raises:
        OutputError: the file cannot be written (the run stays in the store).
    """
    from accelbench import scenarios
    from accelbench.store.export import write_json

    scenario = scenarios.by_kind(store.run(run_id)["kind"])
    write_json(path, store, run_id, scenario.export_extra if scenario else None)
