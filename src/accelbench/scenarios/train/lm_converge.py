"""Training a language model to a held-out perplexity (``accelbench train -m hf:... --epochs N``, the
``converge_lm`` scenario).

One case per batch size (sequences a step). Each trains its model (the checkpoint's weights, or with
``init = random`` fresh random weights of the same configuration, seeded) with the language-model training step
(:mod:`~accelbench.training.lm_step`: AdamW, the precision's autocast, per-layer compile for a compiling
backend) on the shipped text's training part packed into consecutive windows of ``seq_len + 1`` tokens, the windows
shuffled each epoch by a generator seeded with ``(seed, epoch)``; the learning rate is a linear warm-up over
``warmup_steps`` then a cosine to 0 (:func:`accelbench.scenarios.train.schedule.lr_at`). After each epoch the
held-out part (the last 10 % of the text, never trained on) is cut into the same windows and its perplexity is
``exp`` of the mean next-token cross-entropy over every held-out label token. Each epoch is a row as it ends; a summary
row per batch size gives the final and best perplexity and the time to ``target_perplexity`` (the first epoch at or
below it: DAWNBench's time-to-quality, Coleman et al. 2017, with perplexity as the quality). Checkpoints and resume are
the image convergence run's (:mod:`accelbench.scenarios.train.checkpoint`: every epoch, read back with
``weights_only=True``; ``--resume`` continues from the newest good one).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelbench.core import kinds
from accelbench.core.errors import OK, ConfigError
from accelbench.core.options import check_declared
from accelbench.core.options.train_lm import CONVERGE_OPTIONS, OPTIONS
from accelbench.core.spec import Case, Settings
from accelbench.models.base import LM
from accelbench.scenarios.base import Scenario, register
from accelbench.scenarios.train import checkpoint as ckpt

EVAL_BATCH = 16  # held-out windows a forward pass
EPOCH_DERIVED = {"samples_key": "train_tokens", "work_seconds_key": "epoch_wall_s", "work_samples_key": "train_tokens"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ConvergeLMSettings(Settings):
    """Attributes (declared in :mod:`accelbench.core.options.train_lm`):
    epochs: passes over the packed training windows.
    seq_lens: one sequence length in tokens.
    lr, weight_decay: AdamW's peak learning rate and decoupled weight decay.
    warmup_steps: steps of linear learning-rate warm-up before the cosine decay.
    init: ``pretrained`` (the checkpoint's weights) or ``random`` (fresh weights of its configuration).
    train_windows: packed training windows an epoch takes (the first N of the text's stream; None: every one).
    eval_windows: packed held-out windows the perplexity reads (the first N; None: every one).
    target_perplexity: the held-out perplexity whose first reaching gives the time to target (None: none).
    checkpoint_dir: where per-epoch checkpoints go (None: ``<store>-checkpoints`` next to the store).
    """

    volatile = ("checkpoint_dir",)
    epochs: int = 3
    seq_lens: tuple[int, ...] = OPTIONS["seq_lens"].field()
    lr: float = OPTIONS["lr"].field()
    weight_decay: float = OPTIONS["weight_decay"].field()
    warmup_steps: int = CONVERGE_OPTIONS["warmup_steps"].field()
    init: str = CONVERGE_OPTIONS["init"].field()
    train_windows: int | None = CONVERGE_OPTIONS["train_windows"].field()
    eval_windows: int | None = CONVERGE_OPTIONS["eval_windows"].field()
    target_perplexity: float | None = CONVERGE_OPTIONS["target_perplexity"].field()
    checkpoint_dir: str | None = None

    def __post_init__(self) -> None:
        from accelbench.core.config import check_int

        check_declared(self)
        check_int("epochs", self.epochs, 1)
        if len(self.seq_lens) != 1:
            raise ConfigError("seq_len", ",".join(map(str, self.seq_lens)), "one sequence length for a training run")
        if self.checkpoint_dir is not None and (not isinstance(self.checkpoint_dir, str) or not self.checkpoint_dir):
            raise ConfigError("checkpoint_dir", self.checkpoint_dir, "a folder path")


@dataclass
class _State:
    train_ids: Any = None
    eval_ids: Any = None
    folder: Path | None = None


class ConvergeLM(Scenario):
    name, kind, workload = "converge_lm", kinds.CONVERGENCE_LM, kinds.CONVERGENCE_LM
    model_kind, command = LM, "accelbench train"
    requires = {"transformers": "accelbench train with a language model"}
    settings_type = ConvergeLMSettings
    training = True
    image_inputs = False
    aliases = {"seq_len": "seq_lens"}
    cpu_defaults = {"models": ("hf:tiny-shakespeare",), "batch_sizes": (16,), "precisions": ("fp32",), "data": None}
    gpu_defaults = {**cpu_defaults, "precisions": ("amp-bf16",)}
    # the summary row: energy and cost of training the batch size to its last epoch, per token
    derived_keys = {
        "samples_key": "train_tokens_total",
        "work_seconds_key": "total_wall_s",
        "work_samples_key": "train_tokens_total",
        "spread_key": None,
    }

    def normalize(self, merged: dict[str, Any]) -> dict[str, Any]:
        from accelbench.scenarios.train.convergence import one_configuration

        one_configuration(merged)
        return merged

    def cases(self, spec, device: str) -> list[Case]:
        return [
            Case(
                scenario=self.name,
                model=spec.models[0],
                batch_size=bs,
                precision=spec.precisions[0],
                mode=spec.modes[0],
                device=device,
                name=f"{spec.models[0]}|bs={bs}|T={spec.settings.seq_lens[0]}|summary",
            )
            for bs in spec.batch_sizes
        ]

    def check(self, spec) -> None:
        """The model is a language model with a tokenizer whose context holds the sequence.

        Raises:
            ModelKindError, UnknownModelError, ConfigError: one line each.
        """
        from accelbench.models.lm_checks import check_model_name

        self.check_models(spec)
        context, has_tokenizer = check_model_name(spec.models[0])
        if context and spec.settings.seq_lens[0] > context:
            raise ConfigError("seq_len", spec.settings.seq_lens[0], f"at most the model's context of {context}")
        if not has_tokenizer:
            raise ConfigError("model", spec.models[0], "a language model with a tokenizer (training reads the text)")

    def prepare(self, spec, device, store) -> _State:
        from accelbench.scenarios.train.convergence import default_checkpoint_dir

        s = spec.settings
        folder = Path(s.checkpoint_dir) if s.checkpoint_dir else default_checkpoint_dir(store.path)
        return _State(folder=folder)

    def base_record(self, case, device) -> dict[str, Any]:
        return {**super().base_record(case, device), "row_type": "summary"}

    def measure(self, case, spec, state: _State, rank, sink):
        return {**case_fields(case, spec), **train_batch_size(case, spec, state, rank.device, sink)}, {}

    def oom_group(self, case) -> None:
        return None  # each batch size is its own training run


def _build(case, spec, device, tokenizer_out: dict):
    """The model (checkpoint or fresh weights) and its step: the training step's own
    (:func:`accelbench.training.lm_step.build_lm_step`), in one process, no activation checkpointing."""
    from accelbench.core.rank import Rank
    from accelbench.training import lm_step

    s = spec.settings
    built = lm_step.build_lm_step(
        case.model,
        case.precision,
        case.mode,
        Rank(device),
        seed=spec.seed,
        checkpointing="none",
        lr=s.lr,
        weight_decay=s.weight_decay,
        fused=None,
        random_init=s.init == "random",  # the same configuration, fresh weights, seeded
    )
    tokenizer_out["tokenizer"] = built.loaded.tokenizer
    return built.lm, built.step


def _windows(ids, seq_len: int):
    """Every packed window of ``seq_len + 1`` tokens of ``ids``: ``(n, seq_len + 1)``."""
    n = len(ids) // (seq_len + 1)
    return ids[: n * (seq_len + 1)].view(n, seq_len + 1)


def held_out_perplexity(lm, windows, device) -> tuple[float, float]:
    """``(mean next-token cross-entropy, its exp)`` of ``lm`` over every label token of ``windows``."""
    import torch
    import torch.nn.functional as F

    lm.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(windows), EVAL_BATCH):
            w = windows[i : i + EVAL_BATCH].to(device)
            logits = lm(input_ids=w[:, :-1], use_cache=False).logits.float()
            total += F.cross_entropy(logits.flatten(0, 1), w[:, 1:].reshape(-1), reduction="sum").item()
            count += w[:, 1:].numel()
    lm.train()
    loss = total / count
    return loss, math.exp(loss)


def _epoch(step, lm, spec, bs: int, epoch: int, data: dict, device, started: float, train_s: float) -> dict:
    """One pass over the shuffled training windows, then the held-out perplexity: the epoch's row."""
    import torch

    from accelbench.core.timing import sync
    from accelbench.scenarios.train.schedule import lr_at

    s, windows = spec.settings, data["train"]
    per_epoch = len(windows) // bs
    order = torch.randperm(len(windows), generator=torch.Generator().manual_seed(spec.seed * 10_000 + epoch))
    t0, losses, lr = time.perf_counter(), [], s.lr
    for k in range(per_epoch):
        lr = lr_at(epoch * per_epoch + k, s.epochs * per_epoch, s.lr, s.warmup_steps)
        step.set_lr(lr)
        w = windows[order[k * bs : (k + 1) * bs]].to(device)
        losses.append(step(w[:, :-1].contiguous(), w[:, 1:].reshape(-1))[0])
    sync(device)
    wall = time.perf_counter() - t0
    eval_loss, ppl = held_out_perplexity(lm, data["eval"], device)
    tokens = per_epoch * bs * (windows.shape[1] - 1)
    return {
        "row_type": "epoch",
        "epoch": epoch + 1,
        "steps": per_epoch,
        "lr_last": lr,
        "train_loss": float(torch.stack(losses).mean()),
        "eval_loss": eval_loss,
        "eval_perplexity": ppl,
        "train_tokens": tokens,
        "tokens_per_s": tokens / wall,
        "epoch_wall_s": wall,
        "elapsed_train_s": train_s + wall,
        "elapsed_s": time.perf_counter() - started,
    }


def epoch_key(case, epoch: int) -> str:
    return case.name.replace("|summary", f"|epoch={epoch}")


def train_batch_size(case, spec, state: _State, device, sink) -> dict[str, Any]:
    """Train (or continue, in a reopened run) one batch size; each epoch's row is stored through ``sink`` as it
    ends. Returns the summary row's fields.

    Raises:
        FloatingPointError: the training loss turned non-finite.
    """
    from accelbench.data.text import shipped_text, split

    tok: dict = {}
    lm, step = _build(case, spec, device, tok)
    seq = spec.settings.seq_lens[0]
    train_text, held_out = split(shipped_text())
    data = {
        "train": _windows(_ids(tok["tokenizer"], train_text), seq)[: spec.settings.train_windows],
        "eval": _windows(_ids(tok["tokenizer"], held_out), seq)[: spec.settings.eval_windows],
    }
    history = _resume(case, spec, step, sink, state.folder) if sink.resumed else []
    if not history:
        ckpt.clear(state.folder, spec.spec_hash(), sink.run_id, case.batch_size)
    started = time.perf_counter() - (history[-1]["elapsed_s"] if history else 0.0)
    for epoch in range(len(history), spec.settings.epochs):
        train_s = history[-1]["elapsed_train_s"] if history else 0.0
        row = _epoch(step, lm, spec, case.batch_size, epoch, data, device, started, train_s)
        if not math.isfinite(row["train_loss"]):
            raise FloatingPointError(f"the training loss is {row['train_loss']} at epoch {epoch + 1}")
        row = {**case_fields(case, spec), **row, "case_key": epoch_key(case, epoch + 1), "status": OK, "error": None}
        history.append(row)
        ckpt.save(
            state.folder,
            step=step,
            epoch=epoch + 1,
            history=history,
            spec_hash=spec.spec_hash(),
            run_id=sink.run_id,
            batch_size=case.batch_size,
        )
        sink.add(dict(row), derived=EPOCH_DERIVED)
    return summary_fields(history, spec.settings.target_perplexity)


def _ids(tokenizer, text: str):
    import torch

    return torch.tensor(tokenizer(text, verbose=False)["input_ids"], dtype=torch.long)


def case_fields(case, spec) -> dict[str, Any]:
    s = spec.settings
    return {
        "workload": kinds.CONVERGENCE_LM,
        "model": case.model,
        "batch_size": case.batch_size,
        "precision": case.precision,
        "mode": case.mode,
        "seq_len": s.seq_lens[0],
        "token_source": "text",
        "lr": s.lr,
        "weight_decay": s.weight_decay,
        "optimizer": "adamw",
        "epochs": s.epochs,
        "weights": "trained here from random initialisation" if s.init == "random" else "the checkpoint's, trained on",
    }


def _resume(case, spec, step, sink, folder) -> list[dict]:
    """The history of the epochs done, restored into ``step`` from the newest good checkpoint; epoch rows a kill
    left unstored are stored, rows of epochs that will run again are deleted."""
    found = ckpt.resume(folder, spec.spec_hash(), sink.run_id, case.batch_size, step)
    if found.state is None and found.rejected:  # the step may hold part of a refused state: not trained on
        raise ckpt.CheckpointError(folder, "; ".join(e.reason for e in found.rejected) + ": run without --resume")
    history: list[dict] = found.state["history"] if found.state else []
    done = sink.done_keys()
    sink.delete([epoch_key(case, e) for e in range(len(history) + 1, spec.settings.epochs + 1)])
    for row in history:
        if row["case_key"] not in done:
            sink.add({k: v for k, v in row.items() if k != "case_id"}, derived=EPOCH_DERIVED)
    if history:
        sink.continued(case.batch_size, len(history))
    return history


def summary_fields(history: list[dict], target: float | None) -> dict[str, Any]:
    """A batch size's result from its epoch rows: final and best held-out perplexity and the time to ``target``
    (the first epoch at or below it; None where none reached it)."""
    best = min(history, key=lambda r: r["eval_perplexity"])
    last = history[-1]
    hit = next((r for r in history if target is not None and r["eval_perplexity"] <= target), None)
    energies = [r.get("energy_j") for r in history]
    return {
        "row_type": "summary",
        "epochs_done": last["epoch"],
        "final_eval_perplexity": last["eval_perplexity"],
        "final_train_loss": last["train_loss"],
        "best_eval_perplexity": best["eval_perplexity"],
        "best_epoch": best["epoch"],
        "target_perplexity": target,
        "epochs_to_target": hit["epoch"] if hit else None,
        "time_to_target_s": hit["elapsed_s"] if hit else None,
        "time_to_target_train_s": hit["elapsed_train_s"] if hit else None,
        "total_wall_s": last["elapsed_s"],
        "total_train_s": last["elapsed_train_s"],
        "train_tokens_total": sum(r["train_tokens"] for r in history),
        "tokens_per_s": sum(r["train_tokens"] for r in history) / last["elapsed_train_s"],
        "energy_j": sum(energies) if all(e is not None for e in energies) else None,
    }


register(ConvergeLM())
