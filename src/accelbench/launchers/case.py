"""One case, the same on every launcher: the one process (:mod:`accelbench.launchers.inline`) and each rank of a
torchrun job (:mod:`accelbench.launchers.torchrun.worker`) run it through :func:`run_case`.

:func:`run_case` builds the case's row (its identity columns; under torchrun, the distributed workload), answers
``unsupported`` for a combination that cannot run here, applies the settings a case runs under and records the
value in force (cuDNN autotuning: the spec's ``cudnn_benchmark``, else what the scenario declares,
:meth:`accelbench.scenarios.Scenario.cudnn_benchmark`), and runs the measurement guarded (:func:`guarded`): a
failure becomes the row's ``status`` (``oom``, ``error``, ``unsupported``) and one-line ``error``, and the device is
cleaned up (:func:`cleanup`) for the next case. In one process that row is the result; on a rank, a failure also
ends the job: ``failed`` notes the row, and the exception goes on to torchrun, which stops every rank.
Only KeyboardInterrupt (Ctrl-C, SIGTERM) and :class:`accelbench.core.errors.StopSweep` (the store cannot be
written) get through in one process: they end the sweep, not the case.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from accelbench.core.device import cudnn_benchmark, sync_if_context
from accelbench.core.errors import ERROR, OK, OOM, UNSUPPORTED, CaseFailed, StopSweep, Unsupported, is_oom, one_line


def cleanup(device, reset_compiled: bool = True) -> None:
    """Free what a finished or failed case left: Python garbage, the CUDA cache, compiled graphs (unless
    ``reset_compiled`` is False: a scenario that keeps one compiled model across cases resets it itself)."""
    import torch

    gc.collect()
    if (
        reset_compiled and "torch._dynamo" in sys.modules
    ):  # only a compiled case needs it; importing dynamo costs seconds
        try:
            torch._dynamo.reset()
        except Exception:  # a reset that fails leaves nothing worse than before
            pass
    if sync_if_context(device):  # the torchrun parent holds no CUDA context and must not create one
        torch.cuda.empty_cache()


@contextmanager
def setup_frozen():
    """Keep what is alive before the first case (imported modules, the decoded images, the store) out of the full
    collection :func:`cleanup` runs after every case: ``gc.freeze()`` (Python docs, "gc.freeze"), undone at the
    end. Each collection then walks only what the cases made (with torch imported, a measurable saving per case on a
    small CPU); what it frees is the same, but for reference cycles among the frozen objects themselves, which
    wait for the end of the sweep. Nested (a study's sweeps): the outermost freezes."""
    if gc.get_freeze_count():
        yield
        return
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def guarded(
    rec: dict[str, Any],
    measure: Callable[[], tuple[dict, dict]],
    device,
    failed: Callable[[dict], None] | None = None,
    reset_compiled: bool = True,
) -> tuple[dict, dict]:
    """Run ``measure() -> (metrics, series)`` for a case whose identity columns are ``rec``.

    Every failure becomes data: ``status`` ``oom`` (an allocation failure, also wrapped) or ``error`` with a
    one-line reason (``unsupported`` with its columns for :class:`accelbench.core.errors.Unsupported`); the
    device is cleaned up either way so later cases are not poisoned. A ``sys.exit`` in the model's code is the
    case's ``error`` too (it never ends accelbench). Only KeyboardInterrupt and StopSweep propagate, and, when
    ``failed`` is given (a torchrun rank), every failure after ``failed(row)`` (a ``sys.exit`` as RuntimeError).
    Adds ``case_wall_s``.

    Returns:
        ``(record, raw_series)``.
    """
    t0 = time.perf_counter()
    try:
        measured, series = measure()
        rec.update(measured or {}, status=OK, error=None)
    except (KeyboardInterrupt, StopSweep):
        raise
    except (Unsupported, CaseFailed) as exc:  # what it measured anyway stays in the row
        rec.update(exc.columns, status=UNSUPPORTED if isinstance(exc, Unsupported) else ERROR, error=exc.reason)
        series = {}
        if failed is not None:
            failed(rec)
            raise
    except (Exception, SystemExit) as exc:  # every failure is data: a row with a one-line reason
        rec.update(status=OOM if is_oom(exc) else ERROR, error=_reason(exc))
        series = {}
        if failed is not None:  # a rank: the failure ends the job (torchrun stops every rank)
            failed(rec)
            if isinstance(exc, SystemExit):  # never a rank that "succeeded"
                raise RuntimeError(rec["error"]) from None
            raise
        del exc
    finally:
        cleanup(device, reset_compiled)
    rec["case_wall_s"] = time.perf_counter() - t0
    return rec, series


def run_case(
    scenario, case, spec, state, rank, sink, failed: Callable[[dict], None] | None = None
) -> tuple[dict, dict]:
    """One case on ``rank`` (:class:`accelbench.core.rank.Rank`, or a torchrun rank's context): an ``unsupported``
    row, or the scenario's measurement guarded, with the settings it ran under (see the module docstring).

    Args:
        failed: on a torchrun rank, called with the failure row before the failure propagates (None: the row is
            the result).
    Returns:
        ``(record, raw_series)``. Never raises without ``failed``, except KeyboardInterrupt and StopSweep.
    """
    rec = scenario.base_record(case, rank.device)
    if rank.distributed:
        rec["workload"] = scenario.dist_workload or scenario.workload
    reason = scenario.unsupported_reason(case, rank.device)
    if reason:
        rec.update(status=UNSUPPORTED, error=reason)
        if failed is not None:
            failed(rec)
            raise Unsupported(reason)
        return rec, {}
    with cudnn_benchmark(scenario.cudnn_benchmark(case, spec)) as on:
        rec["cudnn_benchmark"] = on
        return guarded(
            rec,
            lambda: scenario.measure(case, spec, state, rank, sink),
            rank.device,
            failed,
            reset_compiled=not getattr(scenario, "keeps_compiled", False),
        )


def _reason(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit: the model's code called sys.exit({exc.code!r})"
    return one_line(exc)
