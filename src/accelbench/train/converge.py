"""Training from scratch to accuracy: ``run_convergence(spec, store)`` trains one model per batch size.

Per batch size: random weights (seed ``spec.seed``), the classifier sized to the data's classes, SGD
(or AdamW) with the peak learning rate scaled linearly with the batch size, a warm-up + cosine (or
step) schedule per step, random crop with padding + horizontal flip. After every epoch the model is
evaluated on ``eval_data`` (default all 10,000 CIFAR-10 test images), a checkpoint is written, then
the epoch's row is stored (workload ``convergence``, ``row_type`` ``epoch``). After the last epoch a
``summary`` row holds the time to accuracy (DAWNBench's metric, Coleman et al. 2017: wall time until
the first evaluation at or above the target, evaluation time included; ``time_to_target_train_s``
leaves evaluation out). A failure (OOM, divergence, any error) is a summary row with its status and
the next batch size runs. ``resume=True`` continues a killed run from each batch size's newest good
checkpoint (:mod:`accelbench.train.checkpoint`: read without running code; a bad one never ends the run).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from accelbench.measure import ERROR, OK, OOM, cleanup, is_oom, one_line, resolve_device
from accelbench.train import checkpoint as ckpt
from accelbench.train.augment import epoch_plan, scaled_pad
from accelbench.train.spec import ConvergeSpec

KIND = "convergence"
INPUT_BOUND_WAIT_FRACTION = 0.10  # epochs whose host waited on the loader longer than this are input-bound


@dataclass
class ConvergeOutcome:
    """``run_id``, the epoch and summary records stored by this call, and whether Ctrl-C stopped it.

    ``notes``: one line per batch size whose newest checkpoint could not be used on resume (which file and
    why, and the epoch it resumed from), for the caller to show; the library prints nothing.
    """

    run_id: int
    epochs: list[dict[str, Any]] = field(default_factory=list)
    summaries: list[dict[str, Any]] = field(default_factory=list)
    interrupted: bool = False
    resumed: dict[int, int] = field(default_factory=dict)  # batch size -> epochs already done
    notes: list[str] = field(default_factory=list)


@dataclass
class _Data:
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
            return {"epochs_to_target": row["epoch"], "time_to_target_s": row["elapsed_s"],
                    "time_to_target_train_s": row["elapsed_train_s"]}
    return {"epochs_to_target": None, "time_to_target_s": None, "time_to_target_train_s": None}


def _prepare_data(spec: ConvergeSpec, device, image_size: int) -> _Data:
    from accelbench.data import load_images
    from accelbench.train.datasets import load_encoded, resident_from_encoded
    from accelbench.train.evaluate import resident_images

    enc = load_encoded(spec.data, spec.train_images, skip_bad=spec.skip_bad_images)
    resident = resident_from_encoded(enc, image_size, device) if spec.placement == "resident" else None
    ev = load_images(spec.eval_data, spec.eval_images or 10**9, skip_bad=spec.skip_bad_images)
    if ev.classes != enc.classes:
        from accelbench.errors import DataError

        raise DataError(f"eval data classes {ev.classes} differ from training classes {enc.classes}")
    return _Data(enc, resident, resident_images(ev.images, image_size, device), ev.labels.to(device),
                 image_size, len(enc.classes))


def _batches(spec: ConvergeSpec, data: _Data, plan, bs: int, device):
    """Yield uint8 image batches and labels on ``device`` (resident set, or a DataLoader per epoch)."""
    if data.resident is not None:
        yield from data.resident.batches(plan, bs)
        return
    from accelbench.train.datasets import DecodeDataset, make_loader

    pin = device.type == "cuda"
    for xb, yb in make_loader(DecodeDataset(data.encoded, data.image_size, plan), plan.order, bs, spec.workers, pin):
        yield xb.to(device, non_blocking=True), yb.to(device, non_blocking=True)


def _train_epoch(step, spec: ConvergeSpec, data: _Data, bs: int, epoch: int, mean, std, device) -> tuple[dict, list[float]]:
    """One pass over the training set. Returns the epoch's training metrics and per-step times (ms)."""
    import torch

    from accelbench.train.datasets import normalize
    from accelbench.train.schedule import lr_at

    n = len(data.encoded.blobs)
    per_epoch = n // bs
    total, warm = per_epoch * spec.epochs, round(spec.warmup_epochs * per_epoch)
    plan = epoch_plan(n, spec.seed, epoch, scaled_pad(spec.pad, data.image_size))
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
        lr = lr_at(epoch * per_epoch + k, total, spec.lr_for(bs), warm, spec.schedule)
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
    return {"train_loss": loss_sum.item() / seen, "train_top1": correct.item() / seen, "lr_last": lr,
            "steps": per_epoch, "train_samples": seen, "epoch_wall_s": wall, "epoch_compute_s": sum(step_ms) / 1e3,
            "epoch_gpu_s": sum(step_ms) / 1e3 if cuda else None, "samples_per_s": seen / wall,
            "data_wait_s": wait_s, "data_wait_fraction": wait_s / wall,
            "input_bound": wait_s / wall > INPUT_BOUND_WAIT_FRACTION}, step_ms


def _build_step(spec: ConvergeSpec, bs: int, n_classes: int, device):
    import torch

    from accelbench.measure import channels_last_for
    from accelbench.models import create_model
    from accelbench.train.datasets import set_num_classes
    from accelbench.train.step import StepConfig, build_step

    torch.manual_seed(spec.seed)
    loaded = create_model(spec.model, pretrained=False)
    module = set_num_classes(loaded.module, n_classes)
    cl = channels_last_for(spec, module, device)
    cfg = StepConfig(precision=spec.precision, mode=spec.mode, optimizer=spec.optimizer, lr=spec.lr_for(bs),
                     momentum=spec.momentum, weight_decay=spec.weight_decay, nesterov=spec.nesterov, channels_last=cl)
    return build_step(module, cfg, device), loaded.info


def _base(spec: ConvergeSpec, bs: int, device, det: dict) -> dict[str, Any]:
    return {"workload": KIND, "model": spec.model, "batch_size": bs, "lr_peak": spec.lr_for(bs),
            "precision": spec.precision, "mode": spec.mode, "optimizer": spec.optimizer, "schedule": spec.schedule,
            "placement": spec.placement, "workers": spec.workers if spec.placement == "loader" else None,
            "data": spec.data, "eval_data": spec.eval_data, "device": str(device), "epochs": spec.epochs, **det}


def _epoch_key(spec: ConvergeSpec, bs: int, epoch: int) -> str:
    return f"{spec.model}|bs={bs}|epoch={epoch}"


def _resume_note(bs: int, found: ckpt.Resumed, stored: list[int], folder: Path) -> str | None:
    """The one line that says why a batch size does not continue from its newest checkpoint, or None."""
    why = "; ".join(str(e) for e in found.rejected)
    if found.state is not None:
        return f"{why}; resuming bs={bs} from {found.path} (epoch {found.state['epoch']})" if why else None
    if why:
        return f"{why}; no good checkpoint left: bs={bs} restarts from epoch 0"
    if stored:
        return (f"no checkpoint of bs={bs} in {folder} for its stored epochs {stored[0]}-{stored[-1]}: "
                f"bs={bs} restarts from epoch 0")
    return None


def _resume(spec, bs, data, device, store, run_id, folder, out, on_note):
    """Build the step for ``bs`` and continue from its newest good checkpoint (``resume=True``).

    Epoch rows of epochs that will be trained again are deleted first (the store keeps one row per case key),
    and rows a kill left out (between checkpoint and row) are stored from the checkpoint's history.
    Returns:
        ``(step, model info, history)``: the history of the epochs already done (empty: start from epoch 0).
    """
    step, info = _build_step(spec, bs, data.n_classes, device)
    found = ckpt.resume(folder, spec.spec_hash(), run_id, bs, step)
    if found.state is None and found.rejected:  # a rejected state may be half loaded into the step
        step, info = _build_step(spec, bs, data.n_classes, device)
    history: list[dict] = found.state["history"] if found.state else []
    done = store.done_keys(run_id)
    stored = [e for e in range(1, spec.epochs + 1) if _epoch_key(spec, bs, e) in done]
    store.delete_cases(run_id, [_epoch_key(spec, bs, e) for e in stored if e > len(history)])
    for row in history:
        if row["case_key"] not in done:
            store.add_case(run_id, {k: v for k, v in row.items() if k != "case_id"})
    note = _resume_note(bs, found, stored, folder)
    if note:
        out.notes.append(note)
        if on_note:
            on_note(note)
    if history:
        out.resumed[bs] = len(history)
    return step, info, history


def _run_epoch(step, info, spec, data, bs, epoch: int, history: list[dict], device, det) -> tuple[dict, dict]:
    """Train and evaluate epoch ``epoch`` (0-based). Returns its row and its raw series (step times, telemetry)."""
    import torch

    from accelbench.telemetry import monitor
    from accelbench.train.evaluate import evaluate

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    with monitor(device) as mon:
        tr, step_ms = _train_epoch(step, spec, data, bs, epoch, info.mean, info.std, device)
    if not math.isfinite(tr["train_loss"]):
        raise FloatingPointError(f"training diverged: loss {tr['train_loss']} in epoch {epoch + 1}")
    e0 = time.perf_counter()
    ev = evaluate(step.module, data.eval_images, data.eval_labels, mean=info.mean, std=info.std,
                  precision=spec.precision, channels_last=step.config.channels_last, batch_size=spec.eval_batch_size)
    eval_s = time.perf_counter() - e0
    prev = history[-1] if history else {"elapsed_s": 0.0, "elapsed_train_s": 0.0}
    row = {**_base(spec, bs, device, det), "case_key": _epoch_key(spec, bs, epoch + 1), "row_type": "epoch",
           "status": OK, "error": None, "epoch": epoch + 1, **tr, **ev, "eval_wall_s": eval_s,
           "elapsed_train_s": prev["elapsed_train_s"] + tr["epoch_wall_s"],
           "elapsed_s": prev["elapsed_s"] + tr["epoch_wall_s"] + eval_s,
           "compile_s": step.compile_s if epoch == 0 else None, "image_size": data.image_size,
           "channels_last": step.config.channels_last, **mon.record()}
    if device.type == "cuda":
        row["peak_mem_bytes"] = torch.cuda.max_memory_allocated(device)
    return row, {"step_time_ms": step_ms, **mon.series()}


def _train_batch_size(spec, bs, data, device, det, store, run_id, folder, resume, out, on_epoch, on_note) -> dict:
    """Train (or continue) one batch size; store epoch rows; return the summary record's fields."""
    if resume:
        step, info, history = _resume(spec, bs, data, device, store, run_id, folder, out, on_note)
    else:
        (step, info), history = _build_step(spec, bs, data.n_classes, device), []
    if not history:  # files of an earlier store's run with the same id must never be resumed from
        ckpt.clear(folder, spec.spec_hash(), run_id, bs)
    for epoch in range(len(history), spec.epochs):
        row, series = _run_epoch(step, info, spec, data, bs, epoch, history, device, det)
        history.append(row)
        # checkpoint before the row: a kill in between leaves a checkpoint whose history stores the row on resume
        ckpt.save(folder, step=step, epoch=epoch + 1, history=history, spec_hash=spec.spec_hash(), run_id=run_id,
                  batch_size=bs)
        row["case_id"] = store.add_case(run_id, row, series)
        out.epochs.append(row)
        if on_epoch:
            on_epoch(bs, row)
    return _summary_fields(history, spec)


def _summary_fields(history: list[dict], spec: ConvergeSpec) -> dict[str, Any]:
    best = max(history, key=lambda r: r["eval_top1"])
    last = history[-1]
    return {"epochs_done": last["epoch"], "final_eval_top1": last["eval_top1"], "final_eval_top5": last["eval_top5"],
            "final_train_loss": last["train_loss"], "best_eval_top1": best["eval_top1"], "best_epoch": best["epoch"],
            "target_top1": spec.target_top1, **time_to_target(history, spec.target_top1),
            "total_wall_s": last["elapsed_s"], "total_train_s": last["elapsed_train_s"],
            "samples_per_s_mean": sum(r["train_samples"] for r in history) / last["elapsed_train_s"],
            "input_bound_epochs": sum(bool(r["input_bound"]) for r in history)}


def _determinism(spec: ConvergeSpec) -> dict[str, Any]:
    import torch

    torch.backends.cudnn.deterministic = spec.deterministic
    torch.backends.cudnn.benchmark = not spec.deterministic
    return {"cudnn_deterministic": torch.backends.cudnn.deterministic, "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "seed": spec.seed}


def default_checkpoint_dir(db_path: str | Path) -> Path:
    """``<db folder>/<db stem>-checkpoints`` (``./accelbench-checkpoints`` for an in-memory store)."""
    p = Path(db_path)
    return Path("accelbench-checkpoints") if str(db_path) == ":memory:" else p.with_name(p.stem + "-checkpoints")


def run_convergence(spec: ConvergeSpec, store, resume: bool = False,
                    on_epoch: Callable[[int, dict], None] | None = None,
                    on_note: Callable[[str], None] | None = None) -> ConvergeOutcome:
    """Train ``spec.model`` once per batch size in ``spec.batch_sizes``, storing every epoch as it ends.

    Args:
        spec: the run; store: an open :class:`accelbench.store.Store`.
        resume: continue the newest unfinished run with the same spec from each batch size's newest good
            checkpoint. A checkpoint refused by the safe loader, truncated or corrupt is set aside and the one
            before it is used (none left: the batch size restarts from epoch 0); its stored rows of epochs to
            train again are deleted first.
        on_epoch: called ``(batch_size, epoch_record)`` after each epoch is stored.
        on_note: called with each line of ``ConvergeOutcome.notes`` as it happens.
    Returns:
        :class:`ConvergeOutcome`; ``interrupted`` after Ctrl-C (finished epochs are stored and checkpointed).
    Raises:
        ConfigError / UnknownModelError / DataError: unavailable device, unknown model, unreadable data
            (all found before the run is created). RunBusyError: ``resume`` found the run leased by another
            live process. Training failures become summary rows.
    """
    from accelbench import env as envmod
    from accelbench.models import check_model, create_model

    device = resolve_device(spec.device)
    check_model(spec.model)
    det = _determinism(spec)
    data = _prepare_data(spec, device, spec.image_size or create_model(spec.model, pretrained=False).info.image_size)
    run_id = store.resumable_run(KIND, spec.spec_hash()) if resume else None
    reopened = run_id is not None  # only a reopened run continues from checkpoints: a new one's id may be reused
    if run_id is None:
        run_id = store.begin_run(KIND, spec.to_dict(), spec.spec_hash(), {**envmod.collect(device), **det})
    else:
        store.reopen_run(run_id)
    folder = Path(spec.checkpoint_dir) if spec.checkpoint_dir else default_checkpoint_dir(store.path)
    out = ConvergeOutcome(run_id=run_id)
    try:
        for bs in spec.batch_sizes:
            key = f"{spec.model}|bs={bs}|summary"
            if key in store.done_keys(run_id):
                continue
            rec = {**_base(spec, bs, device, det), "case_key": key, "row_type": "summary", "started_at": time.time()}
            try:
                rec.update(_train_batch_size(spec, bs, data, device, det, store, run_id, folder, reopened, out,
                                             on_epoch, on_note),
                           status=OK, error=None)
            except KeyboardInterrupt:
                raise
            except Exception as exc:  # a failure is a row; the next batch size runs
                rec.update(status=OOM if is_oom(exc) else ERROR, error=one_line(exc))
                del exc
            finally:
                cleanup(device)
            rec["case_id"] = store.add_case(run_id, rec)
            out.summaries.append(rec)
    except KeyboardInterrupt:
        out.interrupted = True
        store.finish_run(run_id, "interrupted")
        return out
    store.finish_run(run_id, "complete")
    return out
