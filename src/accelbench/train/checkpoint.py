"""Per-epoch training checkpoints: written atomically, so a kill at any moment leaves the last good one.

A checkpoint holds everything a resumed run needs to continue to the same state: model, optimizer
and GradScaler state (``TrainStep.state_dict``), the number of finished epochs, the per-epoch
records so far, and the torch CPU/CUDA RNG states. The learning rate is a pure function of the step
(:mod:`accelbench.train.schedule`) and the data order and augmentation are functions of
``(seed, epoch)`` (:mod:`accelbench.train.augment`), so neither needs saved state.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FORMAT = 1


def checkpoint_path(folder: str | Path, spec_hash: str, run_id: int, batch_size: int) -> Path:
    """``<folder>/<spec_hash>-run<run_id>-bs<batch_size>.pt``."""
    return Path(folder) / f"{spec_hash}-run{run_id}-bs{batch_size}.pt"


def save(path: str | Path, *, step, epoch: int, history: list[dict], spec_hash: str) -> None:
    """Write the checkpoint to ``path.tmp`` then rename it over ``path`` (atomic on POSIX)."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "format": FORMAT, "spec_hash": spec_hash, "epoch": epoch, "history": history, "step": step.state_dict(),
        "rng_cpu": torch.get_rng_state(),
        "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load(path: str | Path, spec_hash: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it exists and belongs to ``spec_hash``, else None."""
    import torch

    path = Path(path)
    if not path.exists():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("format") != FORMAT or state.get("spec_hash") != spec_hash:
        return None
    return state


def restore(state: dict[str, Any], step) -> None:
    """Load model/optimizer/scaler state into ``step`` and restore the RNG states."""
    import torch

    step.load_state_dict(state["step"])
    torch.set_rng_state(state["rng_cpu"])
    if state.get("rng_cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["rng_cuda"])
