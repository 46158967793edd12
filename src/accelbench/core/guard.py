"""One case, guarded: every failure of a case becomes its row, and the device is cleaned up for the next.

:func:`run_case` runs one case in this process (the inline launcher's step); :func:`guarded` turns what a
measurement raises into a row (``oom``, ``error``, ``unsupported``); :func:`cleanup` frees what a case left.
Only KeyboardInterrupt (Ctrl-C, SIGTERM) and :class:`accelbench.core.errors.StopSweep` (the store cannot be
written) get through: they end the sweep, not the case.
"""

from __future__ import annotations

import gc
import sys
import time
from contextlib import contextmanager
from typing import Any, Callable

from accelbench.core.env import sync_if_context
from accelbench.core.errors import ERROR, OK, OOM, UNSUPPORTED, StopSweep, Unsupported, is_oom, one_line


def cleanup(device, reset_compiled: bool = True) -> None:
    """Free what a finished or failed case left: Python garbage, the CUDA cache, compiled graphs (unless
    ``reset_compiled`` is False: a scenario that keeps one compiled model across cases resets it itself)."""
    import torch

    gc.collect()
    if reset_compiled and "torch._dynamo" in sys.modules:  # only a compiled case needs it; importing dynamo costs seconds
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
    end. Each collection then walks only what the cases made (with torch imported, ~0.17 s less per case on a
    2-core CPU); what it frees is the same, but for reference cycles among the frozen objects themselves, which
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


def guarded(rec: dict[str, Any], measure: Callable[[], tuple[dict, dict]], device,
            reset_compiled: bool = True) -> tuple[dict, dict]:
    """Run ``measure() -> (metrics, series)`` for a case whose identity columns are ``rec``.

    Every failure becomes data: ``status`` ``oom`` (an allocation failure, also wrapped) or ``error`` with a
    one-line reason (``unsupported`` with its columns for :class:`accelbench.core.errors.Unsupported`); the
    device is cleaned up either way so later cases are not poisoned. A ``sys.exit`` in the model's code is the
    case's ``error`` too (it never ends accelbench). Only KeyboardInterrupt and StopSweep propagate. Adds
    ``case_wall_s``.

    Returns:
        ``(record, raw_series)``.
    """
    t0 = time.perf_counter()
    try:
        measured, series = measure()
        rec.update(measured or {}, status=OK, error=None)
    except (KeyboardInterrupt, StopSweep):
        raise
    except Unsupported as exc:  # found unable to run once built; what it measured anyway stays in the row
        rec.update(exc.columns, status=UNSUPPORTED, error=exc.reason)
        series = {}
    except (Exception, SystemExit) as exc:  # every failure is data: a row with a one-line reason
        rec.update(status=OOM if is_oom(exc) else ERROR, error=_reason(exc))
        series = {}
        del exc
    finally:
        cleanup(device, reset_compiled)
    rec["case_wall_s"] = time.perf_counter() - t0
    return rec, series


def run_case(scenario, case, spec, state, rank, sink) -> tuple[dict, dict]:
    """One case in this process: an ``unsupported`` row, or the scenario's measurement guarded.

    Never raises except KeyboardInterrupt.
    """
    rec = scenario.base_record(case, rank.device)
    reason = scenario.unsupported_reason(case, rank.device)
    if reason:
        return {**rec, "status": UNSUPPORTED, "error": reason}, {}
    with cudnn_benchmark(getattr(spec, "cudnn_benchmark", None)) as on:
        rec["cudnn_benchmark"] = on
        return guarded(rec, lambda: scenario.measure(case, spec, state, rank, sink), rank.device,
                       reset_compiled=not getattr(scenario, "keeps_compiled", False))


@contextmanager
def cudnn_benchmark(value: bool | None):
    """``torch.backends.cudnn.benchmark`` set to ``value`` for a case (None: left as it is), restored after;
    yields the value in force (cuDNN times its convolution algorithms per shape and keeps the fastest:
    PyTorch docs, "torch.backends.cudnn.benchmark")."""
    import torch

    before = torch.backends.cudnn.benchmark
    if value is not None:
        torch.backends.cudnn.benchmark = value
    try:
        yield bool(torch.backends.cudnn.benchmark)
    finally:
        torch.backends.cudnn.benchmark = before




def _reason(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit: the model's code called sys.exit({exc.code!r})"
    return one_line(exc)
