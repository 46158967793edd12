"""The profiled training step of a language model (``accelbench profile --step train -m hf:<model>``): the step
``accelbench train -m hf:...`` times, built by the same :func:`accelbench.training.lm_step.build_lm_step` (the model
in float32 master weights, the precision's autocast, per-layer ``torch.compile`` for a compiling backend), one batch
of ``batch x seq_len`` random token ids: forward, next-token cross-entropy of the float32 logits, backward, AdamW with
``train``'s defaults (lr, weight decay, fused kernels on CUDA: :data:`accelbench.core.options.train_lm.OPTIONS`).

The analytic counts are ``train``'s own: FLOPs ``flops_per_token(shape, T) x B x T`` (torchtitan's ``6 N + 12 L H Q
T`` a token, the count ``train``'s MFU uses: :func:`accelbench.training.lm_maths.flops_per_token`), the forward a
third of them (the backward does twice the forward's matmuls), the least bytes
:func:`accelbench.training.lm_maths.step_least_bytes`.
"""

from __future__ import annotations

from accelbench.scenarios.profile.lm import LMWorkload


def counts(shape, batch_size: int, seq_len: int, param_bytes: int, activation_bytes: int):
    """The analytic counts (:class:`accelbench.core.analytic.AnalyticCounts`) of one training step of ``batch_size``
    sequences of ``seq_len`` tokens of a model of ``shape`` (:class:`accelbench.core.lm_analytic.Shape`), its
    parameters ``param_bytes`` each and activations ``activation_bytes`` each."""
    from accelbench.core.analytic import AnalyticCounts
    from accelbench.training import lm_maths

    flops = lm_maths.flops_per_token(shape, seq_len) * batch_size * seq_len
    return AnalyticCounts(
        flops=flops,
        forward_flops=flops / 3,
        params=shape.params,
        param_bytes=shape.params * param_bytes,
        input_bytes=2 * 8 * batch_size * seq_len,
        min_bytes=lm_maths.step_least_bytes(
            shape, batch_size=batch_size, seq_len=seq_len, param_bytes=param_bytes, activation_bytes=activation_bytes
        ),
    )


def build(case, spec, device) -> LMWorkload:
    """The case's training step on ``device``, run once (the first step compiles each decoder layer in a compiling
    mode: ``compile_s``).

    Raises:
        UnknownModelError, MissingDependencyError: as loading the model raises them. RuntimeError (OOM, a failed
            compile): as the build and the first step raise them.
    """
    from accelbench import precisions
    from accelbench.core.options.train_lm import OPTIONS
    from accelbench.core.rank import Rank
    from accelbench.training import lm_maths, lm_step

    seq_len = case.extras.seq_len
    built = lm_step.build_lm_step(
        case.model,
        case.precision,
        case.mode,
        Rank(device),
        seed=spec.seed,
        checkpointing="none",
        lr=OPTIONS["lr"].default,
        weight_decay=OPTIONS["weight_decay"].default,
        fused=OPTIONS["fused_optimizer"].default,
    )
    shape, step = built.shape, built.step
    ((x, y),) = lm_step.token_batches(
        "random", batch=case.batch_size, seq_len=seq_len, count=1, vocab=shape.vocab, seed=spec.seed, rank=0, world=1
    )
    x, y = x.to(device), y.to(device)
    step(x, y)  # the first step: compiles each decoder layer in compile mode, creates AdamW's state
    p = precisions.get(case.precision)
    wide = p.cast_dtype is None  # float32 weights unless the precision casts the model
    cols = {
        # what the step ran on: random token ids, no image data (the spec's data and images fields are an image
        # model's; a language-model row must not claim them)
        "data": None,
        "images": None,
        "token_source": "random",
        "weights": built.loaded.info.weights,
        "seq_len": seq_len,
        "tokens_per_step": case.batch_size * seq_len,
        "non_embedding_params": shape.non_embedding_params,
        "flops_per_token": lm_maths.flops_per_token(shape, seq_len),
        "fp8_linear_layers": built.fp8_linear_layers,
        "optimizer": "adamw",
        "lr": OPTIONS["lr"].default,
        "weight_decay": OPTIONS["weight_decay"].default,
        "optimizer_fused": bool(step.optimizer.defaults.get("fused")),
    }
    return LMWorkload(
        run=lambda: step(x, y)[0],
        reset=lambda: None,
        counts=counts(
            shape,
            case.batch_size,
            seq_len,
            4 if wide else 2,
            4 if wide and p.autocast_dtype is None else 2,
        ),
        columns=cols,
        compile_s=step.compile_s,
    )
