"""One loadgen case, end to end: build, calibrate, run LoadGen's test(s) under telemetry, read the logs.

Called by :meth:`accelbench.scenarios.loadgen.scenario.Loadgen.measure` (module docstring there).
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import OK
from accelbench.core.signals import handlers


@dataclass
class Prepared:
    """What every test of a case shares: LoadGen, the runner, the QSL handle, the labels, the settings."""

    lg: Any
    runner: Any
    qsl: Any
    library: Any
    labels: Any
    case: Any
    spec: Any
    rank: Any
    info: dict[str, Any]


def prepare_case(lg, case, spec, inputs, rank) -> Prepared:
    """Model in its precision and backend, built for the SUT's batch sizes; the QSL; the forward timed."""
    import torch

    from accelbench import backends, precisions
    from accelbench.data.evaluation import eval_inputs
    from accelbench.models import create_model
    from accelbench.scenarios.loadgen.sut import Runner, SampleLibrary, batch_sizes_built

    dev = rank.device
    torch.manual_seed(spec.seed)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
    loaded = create_model(case.model)
    info = loaded.info
    cl = precisions.channels_last_for(case.channels_last, case.precision, loaded.module, dev)
    module = precisions.prepare(case.precision, loaded.module, dev)
    if cl:
        module = module.to(memory_format=torch.channels_last)
    size = case.image_size or info.image_size
    ev = eval_inputs(info, spec.settings, inputs, size)  # the user's label space, labels file, transform
    info, raw = ev.info, ev.raw
    images = ev.x_all[: case.images].to(precisions.input_dtype(case.precision))
    if cl:
        images = images.contiguous(memory_format=torch.channels_last)
    labelled = ev.labels is not None
    backend = backends.get(case.mode)
    context = lambda: precisions.context(case.precision, dev)  # noqa: E731
    runner = Runner({}, backend.static_shapes, images, cl, context)
    examples = [
        runner.gather(list(range(b)) if b <= images.shape[0] else [i % images.shape[0] for i in range(b)])
        for b in batch_sizes_built(case.extras.loadgen_scenario, case.batch_size)
    ]
    with context():
        runner.forwards, build_s = backend.build_sizes(module, examples, dev)
    runner.sizes = sorted(runner.forwards)
    runner.calibrate(dev, reps=max(3, spec.warmup_batches))
    library = SampleLibrary(images)
    labels = ev.labels[: images.shape[0]].tolist() if labelled else None
    cols = {
        "weights": info.weights,
        "pretrained": info.pretrained,
        "image_size": size,
        "channels_last": cl,
        "data_description": raw.description,
        "compile_s": build_s if backend.static_shapes else None,
        "qsl_samples": library.count,
        "batch_sizes_built": ",".join(map(str, runner.sizes)),
        "forward_ms_at_batch": 1e3 * runner.model_s[runner.sizes[-1]],
        **ev.columns(),
    }
    return Prepared(lg, runner, library.construct(lg), library, labels, case, spec, rank, cols)


@contextmanager
def signals_deferred():
    """Ctrl-C and SIGTERM during the block are raised as KeyboardInterrupt at its end; a second one ends the
    process at once (exit 130; every finished case is already stored).

    LoadGen calls the SUT's issue callback from the thread that started the test. That is the main thread,
    where Python runs its signal handlers: a KeyboardInterrupt raised inside the callback would unwind
    through LoadGen's C++ (which expects no exception) and crash the process later (seen as a segfault).
    LoadGen has no call to abort a test, so the test in progress runs to its end first.
    """
    got: list[int] = []

    def defer(sig, frame):
        if got:
            import os

            from accelbench.core.errors import EXIT_INTERRUPTED

            os._exit(EXIT_INTERRUPTED)
        got.append(sig)
        sys.stderr.write("stopping after the LoadGen test in progress (it cannot be aborted); again to quit now\n")

    with handlers(defer):
        yield
    if got:
        raise KeyboardInterrupt


def run_test(p: Prepared, plan, folder: Path) -> tuple[dict[str, Any], Any]:
    """One LoadGen test of ``plan`` under the telemetry monitor; ``(columns, monitor)``.

    Raises:
        whatever the model raised inside the SUT (an OOM becomes the case's ``oom`` row).
    """
    from accelbench.scenarios.base import case_monitor
    from accelbench.scenarios.loadgen.results import read_detail, result_columns
    from accelbench.scenarios.loadgen.settings import build_settings, log_settings
    from accelbench.scenarios.loadgen.sut import SUT

    lg, s = p.lg, p.spec.settings
    sut = SUT(lg, p.runner, p.case.batch_size, s.batch_timeout_us / 1e6 if plan.scenario == "Server" else 0.0)
    try:
        settings, logs = build_settings(lg, plan), log_settings(lg, folder)
        handle = sut.construct()
        try:
            with case_monitor(p.spec, p.case, p.rank.device, p.rank.pids()) as mon:
                t0 = time.perf_counter()
                with signals_deferred():
                    lg.StartTestWithLogSettings(handle, p.qsl, settings, logs)
                wall_s = time.perf_counter() - t0
        finally:
            lg.DestroySUT(handle)
    finally:
        sut.close()
    if sut.error is not None:
        raise sut.error
    cols = {
        **result_columns(read_detail(folder / "mlperf_log_detail.txt"), wall_s),
        **sut.columns(wall_s),
        "timed_wall_s": wall_s,
        "loadgen_log_dir": str(folder),
    }
    return cols, mon


def with_telemetry(cols: dict[str, Any], mon, device) -> dict[str, Any]:
    """``cols`` plus the window's telemetry and memory, and the energy of one query."""
    from accelbench.core.rank import add_telemetry

    rec = dict(cols)
    add_telemetry(rec, mon, device)
    e, q = rec.get("energy_j"), rec.get("queries")
    rec["energy_per_query_j"] = e / q if e is not None and q else None
    return rec


def server_search(p: Prepared, folder: Path, sink) -> tuple[dict[str, Any], Any]:
    """The highest VALID Server QPS; each probe stored as a detail row. Returns the reported test's
    ``(record, series)``: the best VALID probe (or, when none was VALID, the last one)."""
    from accelbench.core.errors import Unsupported
    from accelbench.scenarios.loadgen.search import find_peak_qps
    from accelbench.scenarios.loadgen.settings import MAX_DURATION_FACTOR, plan_for, slowest_server_qps

    s = p.spec.settings
    upper = p.case.batch_size / p.runner.model_s[p.runner.sizes[-1]]
    floor = 0.0 if s.mlperf_rules else slowest_server_qps(s.min_duration_s, s.min_query_count)
    recs: dict[float, tuple[dict, dict]] = {}

    def probe(qps: float):
        cols, mon = run_test(p, plan_for(p.case, p.spec, server_qps=qps), folder / f"qps-{qps:.1f}")
        rec = with_telemetry(cols, mon, p.rank.device)
        recs[qps] = (rec, mon.series())
        sink.add(
            {
                **p.info,
                **rec,
                "case_key": f"{p.case.key}|qps={qps:.6g}",
                "workload": kinds.LOADGEN_PROBE,
                "row_type": "server-probe",
                "model": p.case.model,
                "precision": p.case.precision,
                "mode": p.case.mode,
                "batch_size": p.case.batch_size,
                "status": OK,
                "error": None,
            }
        )
        return rec["result_validity"] == "VALID", qps

    found = find_peak_qps(probe, upper, s.server_search_steps, floor)
    if not found.probes:
        raise Unsupported(
            f"the Server search's first rate, {upper / 2:.3g} queries/s (half the capacity measured "
            f"here), is below {floor:.3g} queries/s: its tests would run past {MAX_DURATION_FACTOR:g}x the "
            f"{s.min_duration_s:g} s minimum duration; not run",
            {**p.info, "server_capacity_qps": upper},
        )
    rec, series = recs[found.best_qps if found.best_qps is not None else found.probes[-1][0]]
    rec = {
        **rec,
        "server_capacity_qps": upper,
        "server_search_probes": len(found.probes),
        "server_lowest_invalid_qps": found.lowest_invalid_qps,
        "server_peak_qps": found.best_qps,
        "server_search_floor_qps": floor if found.floor_reached else None,
    }
    return rec, series


def measure_case(case, spec, inputs, rank, sink, folder: Path) -> tuple[dict[str, Any], dict[str, list]]:
    """The case's row and series (see the module docstring of :mod:`accelbench.scenarios.loadgen.scenario`)."""
    from accelbench.core.errors import Unsupported
    from accelbench.scenarios.loadgen.lib import loadgen
    from accelbench.scenarios.loadgen.results import accuracy
    from accelbench.scenarios.loadgen.settings import infeasible, plan_for

    p = prepare_case(loadgen(), case, spec, inputs, rank)
    s, runner, sc = spec.settings, p.runner, case.extras.loadgen_scenario
    expected = runner.model_s[runner.sizes[-1]]
    estimates = {"expected_latency_s": expected, "expected_qps": case.batch_size / expected}
    try:
        why = infeasible(plan_for(case, spec), runner.model_s, case.batch_size)
        if why:  # before LoadGen starts: an unsupported row with what was measured
            raise Unsupported(why, p.info)
        if sc == "Server" and s.server_target_qps is None:
            rec, series = server_search(p, folder, sink)
        else:
            cols, mon = run_test(p, plan_for(case, spec, **estimates), folder / "performance")
            rec, series = with_telemetry(cols, mon, rank.device), mon.series()
        rec.update(p.info, mlperf_rules=s.mlperf_rules, batch_timeout_us=s.batch_timeout_us if sc == "Server" else None)
        if s.accuracy:
            qps = rec.get("server_target_qps")
            cols, _ = run_test(p, plan_for(case, spec, accuracy=True, server_qps=qps, **estimates), folder / "accuracy")
            if p.labels is not None:
                rec.update(accuracy(folder / "accuracy" / "mlperf_log_accuracy.json", p.labels))
    finally:
        p.lg.DestroyQSL(p.qsl)
    return rec, series
