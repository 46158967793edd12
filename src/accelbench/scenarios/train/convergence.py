"""Training from scratch to accuracy: the mechanics of the ``converge`` scenario
(:mod:`accelbench.scenarios.train.converge`), one model per batch size.

Per batch size: random weights (seed ``spec.seed``), the classifier sized to the data's classes, SGD
(or AdamW) with the peak learning rate scaled linearly with the batch size, a warm-up + cosine (or
step) schedule per step, random crop with padding + horizontal flip. After every epoch the model is
evaluated on ``eval_data`` (default all 10,000 CIFAR-10 test images), a checkpoint is written, then
the epoch's row is stored (workload ``convergence``, ``row_type`` ``epoch``). After the last epoch a
``summary`` row holds the time to accuracy (DAWNBench's metric, Coleman et al. 2017: wall time until
the first evaluation at or above the target, evaluation time included; ``time_to_target_train_s``
leaves evaluation out). A failure (OOM, divergence, any error) is a summary row with its status and
the next batch size runs. A resumed run continues each batch size from its newest good checkpoint
(:mod:`accelbench.scenarios.train.checkpoint`: read without running code; a bad one never ends the run).

``spec`` below is the converge scenario's :class:`accelbench.core.spec.Spec`: one model, one precision and
one mode; the training settings are ``spec.settings`` (:class:`accelbench.scenarios.train.converge.ConvergeSettings`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import OK, ConfigError
from accelbench.scenarios.train import checkpoint as ckpt
from accelbench.scenarios.train.augment import epoch_plan, scaled_pad

INPUT_BOUND_WAIT_FRACTION = 0.10  # epochs whose host waited on the loader longer than this are input-bound


@dataclass
class ConvergeData:
    """Training and evaluation data for a run, prepared once."""

    encoded: Any
    resident: Any
    eval_images: Any
    eval_labels: Any
    image_size: int
    n_classes: int


def time_to_target(history: list[dict], target: float | None) -> dict[str, Any]:
    """First epoch whose ``eval_top1`` >= ``target``: ``epochs_to_target``, ``time_to_target_s``
    (cumulative ``elapsed_s``), ``time_to_target_train_s`` (cumulative ``elapsed_train_s``); Nones if never."""
    for row in history:
        if target is not None and row["eval_top1"] >= target:
            return {
                "epochs_to_target": row["epoch"],
                "time_to_target_s": row["elapsed_s"],
                "time_to_target_train_s": row["elapsed_train_s"],
            }
    return {"epochs_to_target": None, "time_to_target_s": None, "time_to_target_train_s": None}


def lr_for(settings, batch_size: int) -> float:
    """Peak learning rate for ``batch_size`` by the linear scaling rule (Goyal et al. 2017, "Accurate, Large
    Minibatch SGD"): ``base_lr * batch_size / base_batch_size``."""
    return settings.base_lr * batch_size / settings.base_batch_size


def prepare_data(spec, device, image_size: int) -> ConvergeData:
    """Load the training set (encoded; resident on the device with ``placement = resident``) and the
    evaluation set (decoded, resized, on the device), once per run.

    Raises:
        DataError: unreadable data, or evaluation classes that differ from the training classes.
    """
    from accelbench.data import load_images
    from accelbench.scenarios.train.datasets import load_encoded, resident_from_encoded
    from accelbench.scenarios.train.evaluate import resident_images

    s = spec.settings
    enc = load_encoded(spec.data, spec.images, skip_bad=spec.skip_bad_images)
    resident = resident_from_encoded(enc, image_size, device) if s.placement == "resident" else None
    ev = load_images(s.eval_data, s.eval_images or 10**9, skip_bad=spec.skip_bad_images)
    if ev.classes != enc.classes:
        from accelbench.core.errors import DataError

        raise DataError(f"eval data classes {ev.classes} differ from training classes {enc.classes}")
    return ConvergeData(
        enc,
        resident,
        resident_images(ev.images, image_size, device),
        ev.labels.to(device),
        image_size,
        len(enc.classes),
    )


def _batches(spec, data: ConvergeData, plan, bs: int, device):
    """Yield uint8 image batches and labels on ``device`` (resident set, or a DataLoader per epoch)."""
    if data.resident is not None:
        yield from data.resident.batches(plan, bs)
        return
    from accelbench.scenarios.train.datasets import DecodeDataset, make_loader

    pin = device.type == "cuda"
    for xb, yb in make_loader(
        DecodeDataset(data.encoded, data.image_size, plan), plan.order, bs, spec.settings.workers, pin
    ):
        yield xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)


def _train_epoch(step, spec, data: ConvergeData, bs: int, epoch: int, mean, std, device) -> tuple[dict, list[float]]:
    """One pass over the training set. Returns the epoch's training metrics and per-step times (ms)."""
    import torch

    from accelbench.scenarios.train.datasets import normalize
    from accelbench.scenarios.train.schedule import lr_at

    s = spec.settings
    n = len(data.encoded.blobs)
    per_epoch = n // bs
    total, warm = per_epoch * s.epochs, round(s.warmup_epochs * per_epoch)
    plan = epoch_plan(n, spec.seed, epoch, scaled_pad(s.pad, data.image_size))
    cuda = device.type == "cuda"
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    events, host_ms, wait_s, lr = [], [], 0.0, None
    t0 = time.perf_counter()
    it = _batches(spec, data, plan, bs, device)
    for k in range(per_epoch):
        w0 = time.perf_counter()
        xb, yb = next(it)
        if k:  # the first batch includes worker start-up: not counted as waiting
            wait_s += time.perf_counter() - w0
        lr = lr_at(epoch * per_epoch + k, total, lr_for(s, bs), warm, s.schedule)
        step.set_lr(lr)
        x = normalize(xb, mean, std, channels_last=step.config.channels_last)
        ev = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) if cuda else None
        h0 = time.perf_counter()
        if ev:
            ev[0].record()
        loss, logits = step(x, yb)
        if ev:
            ev[1].record()
            events.append(ev)
        else:
            host_ms.append((time.perf_counter() - h0) * 1e3)
        loss_sum += loss.double() * yb.shape[0]
        correct += (logits.argmax(1) == yb).sum()
    it.close()
    if cuda:
        torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    step_ms = [a.elapsed_time(b) for a, b in events] if cuda else host_ms
    seen = per_epoch * bs
    return {
        "train_loss": loss_sum.item() / seen,
        "train_top1": correct.item() / seen,
        "lr_last": lr,
        "steps": per_epoch,
        "train_samples": seen,
        "epoch_wall_s": wall,
        "epoch_compute_s": sum(step_ms) / 1e3,
        "epoch_gpu_s": sum(step_ms) / 1e3 if cuda else None,
        "samples_per_s": seen / wall,
        "data_wait_s": wait_s,
        "data_wait_fraction": wait_s / wall,
        "input_bound": wait_s / wall > INPUT_BOUND_WAIT_FRACTION,
    }, step_ms


def _build_step(spec, bs: int, n_classes: int, device):
    import torch

    from accelbench import precisions
    from accelbench.models import create_model
    from accelbench.scenarios.train.datasets import set_num_classes
    from accelbench.training.step import StepConfig, build_step

    s = spec.settings
    torch.manual_seed(spec.seed)
    loaded = create_model(spec.models[0], pretrained=False)
    module = set_num_classes(loaded.module, n_classes)
    cl = precisions.channels_last_for(spec.channels_last, spec.precisions[0], module, device)
    cfg = StepConfig(
        precision=spec.precisions[0],
        mode=spec.modes[0],
        optimizer=s.optimizer,
        lr=lr_for(s, bs),
        momentum=s.momentum,
        weight_decay=s.weight_decay,
        nesterov=s.nesterov,
        channels_last=cl,
    )
    return build_step(module, cfg, device), loaded.info


def base_fields(spec, bs: int, det: dict) -> dict[str, Any]:
    """Columns every row of a batch size carries (the case's and its epochs')."""
    s = spec.settings
    return {
        "workload": kinds.CONVERGENCE,
        "model": spec.models[0],
        "batch_size": bs,
        "lr_peak": lr_for(s, bs),
        "precision": spec.precisions[0],
        "mode": spec.modes[0],
        "optimizer": s.optimizer,
        "schedule": s.schedule,
        "placement": s.placement,
        "workers": s.workers if s.placement == "loader" else None,
        "data": spec.data,
        "eval_data": s.eval_data,
        "epochs": s.epochs,
        **det,
    }


def epoch_key(spec, bs: int, epoch: int) -> str:
    return f"{spec.models[0]}|bs={bs}|epoch={epoch}"


def _resume_note(bs: int, found: ckpt.Resumed, stored: list[int], folder: Path) -> str | None:
    """The one line that says why a batch size does not continue from its newest checkpoint, or None."""
    why = "; ".join(str(e) for e in found.rejected)
    if found.state is not None:
        return f"{why}; resuming bs={bs} from {found.path} (epoch {found.state['epoch']})" if why else None
    if why:
        return f"{why}; no good checkpoint left: bs={bs} restarts from epoch 0"
    if stored:
        return (
            f"no checkpoint of bs={bs} in {folder} for its stored epochs {stored[0]}-{stored[-1]}: "
            f"bs={bs} restarts from epoch 0"
        )
    return None


def _resume(spec, bs, data, device, sink, folder):
    """Build the step for ``bs`` and continue from its newest good checkpoint (a reopened run).

    Epoch rows of epochs that will be trained again are deleted first (the store keeps one row per case key),
    and rows a kill left out (between checkpoint and row) are stored from the checkpoint's history.
    Returns:
        ``(step, model info, history)``: the history of the epochs already done (empty: start from epoch 0).
    """
    step, info = _build_step(spec, bs, data.n_classes, device)
    found = ckpt.resume(folder, spec.spec_hash(), sink.run_id, bs, step)
    if found.state is None and found.rejected:  # a rejected state may be half loaded into the step
        step, info = _build_step(spec, bs, data.n_classes, device)
    history: list[dict] = found.state["history"] if found.state else []
    done = sink.done_keys()
    stored = [e for e in range(1, spec.settings.epochs + 1) if epoch_key(spec, bs, e) in done]
    sink.delete([epoch_key(spec, bs, e) for e in stored if e > len(history)])
    for row in history:
        if row["case_key"] not in done:
            sink.add({k: v for k, v in row.items() if k != "case_id"}, derived=EPOCH_DERIVED)
    note = _resume_note(bs, found, stored, folder)
    if note:
        sink.note(note)
    if history:
        sink.continued(bs, len(history))
    return step, info, history


def _run_epoch(step, info, spec, data, bs, epoch: int, history: list[dict], device, det) -> tuple[dict, dict]:
    """Train and evaluate epoch ``epoch`` (0-based). Returns its row and its raw series (step times, telemetry)."""
    import torch

    from accelbench.scenarios.train.evaluate import evaluate
    from accelbench.telemetry import monitor

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with monitor(device, spec.telemetry_period_ms / 1000) as mon:
        tr, step_ms = _train_epoch(step, spec, data, bs, epoch, info.mean, info.std, device)
    if not math.isfinite(tr["train_loss"]):
        raise FloatingPointError(f"training diverged: loss {tr['train_loss']} in epoch {epoch + 1}")
    e0 = time.perf_counter()
    ev = evaluate(
        step.module,
        data.eval_images,
        data.eval_labels,
        mean=info.mean,
        std=info.std,
        precision=spec.precisions[0],
        channels_last=step.config.channels_last,
        batch_size=spec.settings.eval_batch_size,
    )
    eval_s = time.perf_counter() - e0
    prev = history[-1] if history else {"elapsed_s": 0.0, "elapsed_train_s": 0.0}
    row = {
        **base_fields(spec, bs, det),
        "device": str(device),
        "case_key": epoch_key(spec, bs, epoch + 1),
        "row_type": "epoch",
        "status": OK,
        "error": None,
        "epoch": epoch + 1,
        **tr,
        **ev,
        "eval_wall_s": eval_s,
        "elapsed_train_s": prev["elapsed_train_s"] + tr["epoch_wall_s"],
        "elapsed_s": prev["elapsed_s"] + tr["epoch_wall_s"] + eval_s,
        "compile_s": step.compile_s if epoch == 0 else None,
        "image_size": data.image_size,
        "channels_last": step.config.channels_last,
        **mon.record(),
    }
    if device.type == "cuda":
        row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    return row, {"step_time_ms": step_ms, **mon.series()}


# Epoch rows: energy and cost per epoch over the samples it trained on.
EPOCH_DERIVED = {
    "samples_key": "train_samples",
    "work_seconds_key": "epoch_wall_s",
    "work_samples_key": "train_samples",
    "spread_key": None,
}


def train_batch_size(spec, bs: int, data: ConvergeData, device, det: dict, sink, folder: Path) -> dict[str, Any]:
    """Train (or continue, in a reopened run) one batch size; store each epoch's row through ``sink`` as it ends.

    Returns:
        The summary row's fields (:func:`summary_fields`).
    Raises:
        FloatingPointError: the loss diverged. Anything the step raises (OOM included).
    """
    if sink.resumed:
        step, info, history = _resume(spec, bs, data, device, sink, folder)
    else:
        (step, info), history = _build_step(spec, bs, data.n_classes, device), []
    if not history:  # files of an earlier store's run with the same id must never be resumed from
        ckpt.clear(folder, spec.spec_hash(), sink.run_id, bs)
    for epoch in range(len(history), spec.settings.epochs):
        row, series = _run_epoch(step, info, spec, data, bs, epoch, history, device, det)
        history.append(row)
        # checkpoint before the row: a kill in between leaves a checkpoint whose history stores the row on resume
        ckpt.save(
            folder,
            step=step,
            epoch=epoch + 1,
            history=history,
            spec_hash=spec.spec_hash(),
            run_id=sink.run_id,
            batch_size=bs,
        )
        sink.add(row, series, derived=EPOCH_DERIVED)
    return summary_fields(history, spec.settings)


def summary_fields(history: list[dict], settings) -> dict[str, Any]:
    """A batch size's result from its epoch rows: final and best accuracy, time to the target accuracy,
    totals, and the energy of all epochs (None unless every epoch has one)."""
    best = max(history, key=lambda r: r["eval_top1"])
    last = history[-1]
    energies = [r.get("energy_j") for r in history]
    return {
        "row_type": "summary",
        "epochs_done": last["epoch"],
        "final_eval_top1": last["eval_top1"],
        "final_eval_top5": last["eval_top5"],
        "final_train_loss": last["train_loss"],
        "best_eval_top1": best["eval_top1"],
        "best_epoch": best["epoch"],
        "target_top1": settings.target_top1,
        **time_to_target(history, settings.target_top1),
        "total_wall_s": last["elapsed_s"],
        "total_train_s": last["elapsed_train_s"],
        "train_samples_total": sum(r["train_samples"] for r in history),
        "samples_per_s_mean": sum(r["train_samples"] for r in history) / last["elapsed_train_s"],
        "input_bound_epochs": sum(bool(r["input_bound"]) for r in history),
        "energy_j": sum(energies) if all(e is not None for e in energies) else None,
        "energy_window_s": sum(r.get("energy_window_s") or 0.0 for r in history) or None,
    }


def one_configuration(merged: dict[str, Any]) -> None:
    """A training-to-target run trains one model in one precision and mode (the sweep's plural spellings are
    accepted with one value each).

    Raises:
        ConfigError: ``models``, ``precisions`` or ``modes`` holds more than one.
    """
    for key in ("models", "precisions", "modes"):
        v = merged.get(key)
        if isinstance(v, tuple) and len(v) != 1:
            raise ConfigError(key[:-1], ",".join(map(str, v)), f"one {key[:-1]} for a training run")


def determinism(settings, seed: int) -> dict[str, Any]:
    """Set cuDNN's determinism; returns the columns recording it (cuDNN's autotuning, off when deterministic, is the
    case runner's: :meth:`accelbench.scenarios.train.converge.Converge.cudnn_benchmark`)."""
    import torch

    torch.backends.cudnn.deterministic = settings.deterministic
    return {"cudnn_deterministic": torch.backends.cudnn.deterministic, "seed": seed}


def default_checkpoint_dir(db_path: str | Path) -> Path:
    """``<db folder>/<db stem>-checkpoints`` (``./accelbench-checkpoints`` for an in-memory store)."""
    p = Path(db_path)
    return Path("accelbench-checkpoints") if str(db_path) == ":memory:" else p.with_name(p.stem + "-checkpoints")
