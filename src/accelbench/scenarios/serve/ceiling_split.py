"""The in-process ceiling of a model split over several GPUs (``--ceiling-gpus N``, N > 1): a model larger than one
GPU (a 70B model's 141 GB of bf16 weights) has its ceiling taken by ``accelbench generate --gpus N --parallel tp``
(:mod:`accelbench.scenarios.generate`, :mod:`accelbench.models.tensor_parallel`) run as its own command.

One command a model, after its last level: every distinct ceiling batch (``-b 1,4,16``), the served precision, the
ceiling's engine (``--modes``), the run's mean prompt and output lengths, ``ceiling.REPEATS`` timed generations a
batch, ``--idle-s 0``, no perplexity, into a store in a temporary folder (removed after). Rank 0's row of each batch
gives the ceiling: its TPOT p50 (the generate row's latency p50, :func:`accelbench.core.parallel.latency_p50`) and
its ``output_tokens_per_s`` (the whole job's, ``batch x new tokens / mean end-to-end``: the one-device ceiling's
formula), with ``tp_degree`` = N.

A process of its own, not ranks of this one: ``torchrun`` starts the ranks (each a fresh interpreter holding its
shard), and the serve process holds no process group, so nothing of the served run's state is shared with them.

Refused before anything starts (a note on every batch): a degree that does not divide the model's attention and
key-value heads, more GPUs than are visible, a precision the split does not run (torchao's fp8), a device that is
neither CUDA nor a CPU. The generate command's own per-GPU memory preflight refuses a split that does not fit (exit
2: its one-line error is the note), and a batch's failed row (out of memory, an unsupported case) is that batch's
note: a split ceiling never fails a level, as the one-device ceiling does not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from accelbench.scenarios.serve.ceiling import REPEATS, Ceiling

SRC = Path(__file__).resolve().parents[3]  # the folder holding this accelbench package (src/ in a checkout)


def command(
    model: str,
    batches: list[int],
    prompt_len: int,
    new_tokens: int,
    *,
    mode: str,
    gpus: int,
    precision: str,
    device_type: str,
    seed: int,
    db: str,
) -> list[str]:
    """The ``accelbench generate`` argv of a split ceiling (module docstring); ``device_type``: ``cuda`` or
    ``cpu`` (gloo ranks). Perplexity is not measured: the ceiling asks only for speed."""
    return [
        sys.executable,
        "-m",
        "accelbench",
        "generate",
        "-m",
        model,
        "-b",
        ",".join(str(b) for b in sorted(set(batches))),
        "--precisions",
        precision,
        "--modes",
        mode,
        "--prompt-lens",
        str(prompt_len),
        "--new-tokens",
        str(new_tokens),
        "--repeats",
        str(REPEATS),
        "--idle-s",
        "0",
        "--no-perplexity",
        "--seed",
        str(seed),
        "--device",
        device_type,
        "--gpus",
        str(gpus),
        "--parallel",
        "tp",
        "--db",
        db,
    ]


def refusal(shape, gpus: int, device) -> str | None:
    """Why ``gpus`` cannot take a split ceiling of a model of ``shape`` on ``device`` (a torch.device), decided before anything starts (module docstring), or None. ``shape``: an
    :class:`~accelbench.core.lm_analytic.Shape`, None when unknown (not checked here; the command checks it). The
    reasons are the generate command's own (:meth:`~accelbench.core.parallel_dims.ParallelDims.tp_reason`,
    :func:`accelbench.backends.generation.tp_reason`)."""
    from accelbench.backends.generation import tp_reason
    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.scenarios.serve.roof import served_precision

    if device.type not in ("cuda", "cpu"):
        return f"a split ceiling runs on CUDA GPUs or CPU ranks, not {device.type}"
    if device.type == "cuda":
        import torch

        if gpus > torch.cuda.device_count():
            return f"--ceiling-gpus {gpus}: {torch.cuda.device_count()} GPUs visible"
    why = tp_reason(served_precision(device))
    if why is None and shape is not None:
        why = ParallelDims(tp=gpus).tp_reason(shape.heads, shape.kv_heads)
    return why


def measure_split(
    model: str,
    batches: list[int],
    prompt_len: int,
    new_tokens: int,
    *,
    mode: str,
    gpus: int,
    shape,
    device,
    seed: int,
) -> dict[int, Ceiling]:
    """The ceiling of ``model`` split over ``gpus`` GPUs (tensor parallel) at each of ``batches``, from one
    ``accelbench generate --gpus N --parallel tp`` command (module docstring); each :class:`Ceiling` has
    ``tp_degree=gpus``. ``prompt_len``/``new_tokens``: tokens; ``device``: the serve run's torch.device (its kind
    picks the ranks' devices); ``shape``: the model's :class:`~accelbench.core.lm_analytic.Shape` or None.

    Raises:
        Nothing for a split that cannot be taken: every batch without figures gets a one-line note instead.
    """
    import tempfile

    from accelbench.scenarios.serve.roof import served_precision

    todo = sorted(set(batches))
    why = refusal(shape, gpus, device)
    if why is not None:
        return _notes(todo, gpus, why)
    with tempfile.TemporaryDirectory(prefix="accelbench-ceiling-") as tmp:
        db = str(Path(tmp) / "ceiling.db")
        argv = command(
            model,
            todo,
            prompt_len,
            new_tokens,
            mode=mode,
            gpus=gpus,
            precision=served_precision(device),
            device_type=device.type,
            seed=seed,
            db=db,
        )
        try:
            # the caller's folder: a checkpoint given as a relative path (-m hf:./ckpt) is found there too
            done = subprocess.run(argv, capture_output=True, text=True, env=child_env())
        except OSError as exc:  # no interpreter to start: the ceiling is beside the levels, never a failed row
            return _notes(todo, gpus, f"{type(exc).__name__}: {exc}")
        found = read(db, gpus) if Path(db).is_file() else {}
    missing = [b for b in todo if b not in found]
    if missing:
        found.update(_notes(missing, gpus, failure(done.returncode, done.stderr)))
    return found


def read(db: str, gpus: int) -> dict[int, Ceiling]:
    """The :class:`Ceiling` of each batch the generate command at ``db`` stored a row for: its TPOT p50 and output
    tokens/s when the row is ``ok``, else a note with the row's status and error."""
    from accelbench.core import kinds
    from accelbench.core.errors import OK
    from accelbench.core.parallel import latency_p50
    from accelbench.store import Store

    out: dict[int, Ceiling] = {}
    with Store(db) as store:
        for row in store.records(workload=kinds.GENERATE):
            b, tpot, rate = int(row["batch_size"]), latency_p50(row), row.get("output_tokens_per_s")
            if row.get("status") == OK and tpot and rate:
                out[b] = Ceiling(batch=b, tpot_p50_ms=float(tpot), output_tokens_per_s=float(rate), tp_degree=gpus)
            else:
                error = " ".join(str(row.get("error") or "no figures").split())
                out[b] = Ceiling(batch=b, note=_note(gpus, f"{row.get('status')}: {error}"), tp_degree=gpus)
    return out


def failure(returncode: int, stderr: str) -> str:
    """One line of why the generate command stored no row: its ``error:`` message (the last, wrapped lines joined),
    else its last line of output, else its exit status."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith(("error:", "internal error:"))]
    if starts:
        return " ".join(lines[starts[-1] :]).removeprefix("error:").strip()
    return lines[-1] if lines else f"accelbench generate exited with status {returncode}"


def child_env() -> dict[str, Any]:
    """The environment of the generate command: this one's, with this accelbench first on ``PYTHONPATH`` (the
    child imports the same code) and a wide terminal (its one-line error is not wrapped)."""
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "1000"}


def _note(gpus: int, why: str) -> str:
    return f"no ceiling over {gpus} GPUs (tp={gpus}): {why}"[:300]


def _notes(batches: list[int], gpus: int, why: str) -> dict[int, Ceiling]:
    note = _note(gpus, why)
    return {b: Ceiling(batch=b, note=note, tp_degree=gpus) for b in batches}
