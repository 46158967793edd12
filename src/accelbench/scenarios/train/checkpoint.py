"""Per-epoch training checkpoints that cannot run code when read back.

A checkpoint holds everything a resumed run needs to continue to the same state: model, optimizer
and GradScaler state (``TrainStep.state_dict``), the number of finished epochs, the per-epoch
records so far, and the torch CPU/CUDA RNG states. The learning rate is a pure function of the step
(:mod:`accelbench.scenarios.train.schedule`) and the data order and augmentation are functions of
``(seed, epoch)`` (:mod:`accelbench.scenarios.train.augment`), so neither needs saved state.

Safety: only tensors and plain data are written (the history is converted to Python int, float, str,
bool, None, lists and dicts by :func:`plain`), and files are read with ``torch.load(weights_only=True)``,
whose unpickler builds nothing but tensors, state-dict containers and plain values: a crafted file is
refused before any of its code runs (torch docs, "torch.load", weights_only). The globals a checkpoint
needs (``collections.OrderedDict``, ``torch._utils._rebuild_tensor_v2``, storage types) are in the
allowlist of every torch since 2.4.

Files: ``<folder>/<spec_hash>-run<run_id>-bs<batch_size>-epoch<NNNN>.pt``, one per epoch, each written to
a temporary file, fsynced and renamed (atomic on POSIX); the last :data:`KEEP` stay, so a newest file that
is truncated or refused still leaves the one before it. :func:`resume` picks the newest good one.
"""

from __future__ import annotations

import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = 2  # 1: one file per (run, batch size), read with weights_only=False
KEEP = 2  # checkpoints kept per (run, batch size)
_PLAIN = (bool, int, float, str, type(None))
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# How the weights-only unpickler words a refusal (a global, opcode or call it does not allow); its other
# errors ("Failed to load pickle data", EOF) mean damaged bytes (torch/_weights_only_unpickler.py).
_REFUSAL = re.compile(r"Unsupported|not an allowed|Trying to|Can only|is blocked")


class CheckpointError(Exception):
    """A checkpoint that cannot be used: refused by the safe loader, truncated or corrupt, or not this run's.

    Attributes:
        path: the file; reason: why, e.g. ``refused (not a tensors-only file: ...)``.
    """

    def __init__(self, path: str | Path | None, reason: str):
        self.path, self.reason = path, reason
        super().__init__(f"checkpoint {path} {reason}")


@dataclass
class Resumed:
    """What :func:`resume` found: the state restored (None: none was good) and the files it rejected."""

    state: dict[str, Any] | None = None
    path: Path | None = None
    rejected: list[CheckpointError] = field(default_factory=list)


def _prefix(spec_hash: str, run_id: int, batch_size: int) -> str:
    return f"{spec_hash}-run{run_id}-bs{batch_size}"


def checkpoint_path(folder: str | Path, spec_hash: str, run_id: int, batch_size: int, epoch: int) -> Path:
    """``<folder>/<spec_hash>-run<run_id>-bs<batch_size>-epoch<NNNN>.pt``: the state after ``epoch`` epochs."""
    return Path(folder) / f"{_prefix(spec_hash, run_id, batch_size)}-epoch{epoch:04d}.pt"


def checkpoints(folder: str | Path, spec_hash: str, run_id: int, batch_size: int) -> list[tuple[int, Path]]:
    """``(epoch, path)`` of every checkpoint of this run and batch size, newest first (by the epoch in the name)."""
    name = re.compile(re.escape(_prefix(spec_hash, run_id, batch_size)) + r"-epoch(\d+)\.pt")
    found = []
    for p in Path(folder).glob(f"{_prefix(spec_hash, run_id, batch_size)}-epoch*.pt"):
        m = name.fullmatch(p.name)
        if m:
            found.append((int(m[1]), p))
    return sorted(found, reverse=True)


def plain(value: Any) -> Any:
    """``value`` as plain Python data (None, bool, int, float, str, list, dict) that ``weights_only`` accepts.

    numpy and 0-d torch scalars become Python numbers (``numpy.float64`` subclasses ``float`` but pickles as a
    numpy global, which the safe loader refuses); arrays and tensors become lists; tuples become lists; any
    other object becomes its ``str``, as the results store writes it.
    """
    if type(value) in _PLAIN:
        return value
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy / torch scalars and arrays
        return plain(value.tolist())
    for kind in (bool, int, float, str):  # other subclasses of the plain types (enum.IntEnum, ...)
        if isinstance(value, kind):
            return kind(value)
    return str(value)


def save(
    folder: str | Path, *, step, epoch: int, history: list[dict], spec_hash: str, run_id: int, batch_size: int
) -> Path:
    """Write the state after ``epoch`` epochs, then delete this run's checkpoints older than the last :data:`KEEP`.

    Returns:
        The checkpoint's path.
    Raises:
        OSError: the folder cannot be written.
    """
    import torch

    path = checkpoint_path(folder, spec_hash, run_id, batch_size, epoch)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT,
        "spec_hash": spec_hash,
        "epoch": epoch,
        "history": plain(history),
        "step": step.state_dict(),
        "rng_cpu": torch.get_rng_state(),
        "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())  # the rename must not reach the disk before the data (a crash would leave 0 bytes)
    os.replace(tmp, path)
    for old, p in checkpoints(folder, spec_hash, run_id, batch_size):
        if old <= epoch - KEEP:
            p.unlink(missing_ok=True)
    return path


def clear(folder: str | Path, spec_hash: str, run_id: int, batch_size: int) -> None:
    """Delete every checkpoint of this run and batch size (a batch size that starts from epoch 0: files left by
    an earlier store whose run had the same id must not be resumed from later)."""
    for _, p in checkpoints(folder, spec_hash, run_id, batch_size):
        p.unlink(missing_ok=True)


def _first_sentence(text: str) -> str:
    return " ".join(_ANSI.sub("", text).split()).split(". ")[0].rstrip(".")[:200]


def _unpickler_reason(exc: BaseException) -> str:
    """The sentence of torch's weights-only error that says what went wrong (its whole text is a page long)."""
    _, found, after = str(exc).partition("WeightsUnpickler error:")
    return _first_sentence(after if found else str(exc)) or type(exc).__name__


def _check(state: Any, path: Path, spec_hash: str, epoch: int | None) -> dict[str, Any]:
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(path, f"is not an accelbench checkpoint of format {FORMAT}")
    if state.get("spec_hash") != spec_hash:
        raise CheckpointError(path, f"belongs to another spec ({state.get('spec_hash')}, not {spec_hash})")
    history = state.get("history")
    if not isinstance(history, list) or not isinstance(state.get("epoch"), int) or len(history) != state["epoch"]:
        raise CheckpointError(path, "is inconsistent (its history does not match its epoch count)")
    if epoch is not None and state["epoch"] != epoch:
        raise CheckpointError(path, f"holds epoch {state['epoch']}, not the epoch {epoch} of its name")
    if not isinstance(state.get("step"), dict) or "model" not in state["step"]:
        raise CheckpointError(path, "has no model state")
    return state


def load(path: str | Path, spec_hash: str, epoch: int | None = None) -> dict[str, Any]:
    """Read a checkpoint with ``torch.load(weights_only=True)``: nothing in the file can run code.

    Args:
        path: the file; spec_hash: the run's spec digest it must carry; epoch: the epoch it must hold (None: any).
    Returns:
        The state dict (tensors on the CPU).
    Raises:
        CheckpointError: refused by the safe loader (the file needs globals other than tensors and plain data),
            truncated or corrupt, or not a checkpoint of this spec and epoch.
    """
    import pickle

    import torch

    path = Path(path)
    try:
        with warnings.catch_warnings():  # torch warns about foreign pickle protocols: the error says enough
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        why = _unpickler_reason(exc)
        if _REFUSAL.search(why):
            raise CheckpointError(path, f"refused (not a tensors-only file: {why})") from None
        raise CheckpointError(path, f"unreadable (truncated or corrupt: {why})") from None
    except Exception as exc:  # zip reader RuntimeError, EOFError, OSError, ...: the bytes are damaged
        why = _first_sentence(str(exc))
        raise CheckpointError(
            path, f"unreadable (truncated or corrupt: {type(exc).__name__}{': ' + why if why else ''})"
        ) from None
    return _check(state, path, spec_hash, epoch)


def restore(state: dict[str, Any], step, path: str | Path | None = None) -> None:
    """Load model/optimizer/scaler state into ``step`` and restore the RNG states.

    Raises:
        CheckpointError: the state does not fit ``step`` (other shapes or keys); ``step`` may then hold part
            of it: restore another state or build a new step.
    """
    import torch

    try:
        step.load_state_dict(state["step"])
        torch.set_rng_state(state["rng_cpu"])
        if state.get("rng_cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
    except (RuntimeError, KeyError, ValueError, TypeError) as exc:
        why = f"{type(exc).__name__}: {_first_sentence(str(exc))}"
        raise CheckpointError(path, f"does not fit the model ({why})") from None


def set_aside(path: Path) -> None:
    """Rename a rejected checkpoint to ``<name>.bad``: kept for inspection, never read or pruned again."""
    try:
        os.replace(path, path.with_name(path.name + ".bad"))
    except OSError:
        pass  # it is refused again on the next resume, with the same line


def resume(folder: str | Path, spec_hash: str, run_id: int, batch_size: int, step) -> Resumed:
    """Restore the newest good checkpoint of this run and batch size into ``step``.

    Checkpoints are tried newest first; each one refused, unreadable or not fitting is set aside
    (:func:`set_aside`) and listed in ``rejected``. ``state`` is None when none was good: after a rejected one,
    ``step`` may hold part of its state, so build a new step before training from epoch 0.
    """
    out = Resumed()
    for epoch, path in checkpoints(folder, spec_hash, run_id, batch_size):
        try:
            state = load(path, spec_hash, epoch)
            restore(state, step, path)
        except CheckpointError as exc:
            out.rejected.append(exc)
            set_aside(path)
            continue
        out.state, out.path = state, path
        return out
    return out
