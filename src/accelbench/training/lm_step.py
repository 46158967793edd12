"""A causal language model made ready for the training step, the step built around it (:func:`build_lm_step`, the one
``accelbench train -m hf:...`` times and ``accelbench profile --step train -m hf:...`` profiles), and its token
batches.

The model is loaded by :func:`accelbench.models.lm_load.load_lm` in float32 (random weights of an architecture, the bundled
model, a local folder), switched to training (``use_cache`` off), then, in this order (torchtitan's order:
``torchtitan/models/llama3/infra/parallelize.py``): Float8 training for an fp8 precision
(``torchao.float8.convert_to_float8_training`` on every ``nn.Linear`` but the LM head, as torchtitan leaves its
``output`` layer), activation checkpointing (:func:`accelbench.training.lm_maths.checkpointed_layers`:
Hugging Face's ``gradient_checkpointing_enable`` with non-reentrant ``torch.utils.checkpoint``, then the flag of each
decoder layer the rule leaves out switched off), ``torch.compile`` of each decoder layer for a compiling backend
(``nn.Module.compile``: state-dict keys unchanged), and under torchrun FSDP2 (``fully_shard`` on each decoder layer
then on the root) or DDP. The step itself is :func:`accelbench.training.step.build_step`'s, the module
wrapped by :class:`NextToken` so its cross-entropy is the next-token loss.

Labels: each batch row is a window of ``seq_len + 1`` tokens; the inputs are its first ``seq_len``, the labels its
last ``seq_len`` (the shift is in the data, as torchtitan's loader does it; the model's own ``labels=`` path is not
used), and the step's ``cross_entropy(logits.float(), labels)`` averages over every label token.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from accelbench.core.lm_analytic import Shape
from accelbench.core.parallel_dims import ParallelDims
from accelbench.models.lm_shape import decoder_layers
from accelbench.training.lm_maths import checkpointed_layers, window_starts


@dataclass(kw_only=True, slots=True)
class LMStep:
    """A language model's training step, built (:func:`build_lm_step`).

    Attributes:
        step: the :class:`accelbench.training.step.TrainStep` (``step(x (B, T), y (B * T,))`` -> ``(loss, logits)``).
        lm: the causal LM inside the step's module; loaded: :func:`accelbench.models.lm_load.load_lm`'s result (its
            ``info``, ``tokenizer``).
        shape: the counts of the model before any Float8 swap (:func:`accelbench.models.lm_shape.shape_of`).
        fp8_linear_layers: Linear layers swapped for Float8 training, None for another precision.
    """

    step: Any
    lm: Any
    loaded: Any
    shape: Shape
    fp8_linear_layers: int | None


def step_config(precision: str, mode: str, *, lr: float, weight_decay: float, fused: bool | None):
    """The step's :class:`accelbench.training.step.StepConfig`: AdamW; an fp8 precision trains its Float8 linears
    under bf16 autocast."""
    from accelbench import precisions
    from accelbench.training.step import StepConfig

    if precisions.is_float8(precision):
        precision = next(p.name for p in precisions.PRECISIONS.values() if p.trainable and p.autocast_dtype and p.bf16)
    return StepConfig(precision=precision, mode=mode, optimizer="adamw", lr=lr, weight_decay=weight_decay, fused=fused)


def build_lm_step(
    model: str,
    precision: str,
    mode: str,
    rank,
    *,
    seed: int,
    checkpointing: str,
    lr: float,
    weight_decay: float,
    fused: bool | None,
    dims: ParallelDims | None = None,
    fsdp_autocast: bool = True,
    random_init: bool = False,
) -> LMStep:
    """The model ``model`` made ready (see the module docstring) and its training step on ``rank``'s device.

    Args:
        rank: where it runs (:class:`accelbench.core.rank.Rank`, or a torchrun rank whose ``wrap`` is DDP).
        checkpointing: ``none``, ``selective`` or ``full`` (:func:`accelbench.training.lm_maths.checkpointed_layers`).
        lr, weight_decay, fused: AdamW's (:func:`step_config`).
        dims: how the ranks split the model (None: one process). ``dp`` used: DDP (the rank's ``wrap``); ``dp_shard``:
            FSDP2 over the layout's ``dp_shard`` mesh (:func:`fsdp_wrap`); fsdp_autocast: under FSDP2 with an
            ``amp-*`` precision, autocast on top of the gathers in its dtype (False: the gathers alone, torchtitan's).
        random_init: a checkpoint's architecture with fresh weights (:func:`accelbench.models.lm_load.load_lm`).
    Raises:
        UnknownModelError, MissingDependencyError: as :func:`accelbench.models.lm_load.load_lm`; Unsupported: tensor
            parallelism (``dims.tp``), which training does not run; RuntimeError (OOM): as building raises it.
    """
    import torch

    from accelbench import backends, precisions
    from accelbench.core.errors import Unsupported
    from accelbench.models.lm_load import load_lm
    from accelbench.models.lm_shape import shape_of
    from accelbench.training.step import build_step

    dims = dims or ParallelDims()
    if dims.tp:
        raise Unsupported("tensor-parallel training is not built (ddp and fsdp are)")
    device = rank.device
    loaded = load_lm(model, device, torch.float32, seed=seed, random_init=random_init)
    lm = loaded.module.train()
    lm.config.use_cache = False
    shape = shape_of(lm)
    fp8 = None
    if precisions.is_float8(precision):
        fp8 = convert_float8(lm, rowwise=precisions.granularity(precision) == "row")
    backend = backends.get(mode)
    compile_kwargs = {"mode": getattr(backend, "compile_mode", None), "dynamic": False} if backend.compiles else None
    prepare_lm(lm, checkpointing=checkpointing, compile_kwargs=compile_kwargs)
    cfg = step_config(precision, mode, lr=lr, weight_decay=weight_decay, fused=fused)
    wrap = rank.wrap if dims.dp else None
    if dims.dp_shard:
        half = precisions.get(cfg.precision).autocast_dtype  # "bfloat16", "float16" or None
        mesh = dims.build_mesh(device.type)["dp_shard"]
        wrap = fsdp_wrap(lm, getattr(torch, half) if half else None, mesh=mesh)
        if half and not fsdp_autocast and fp8 is None:  # Float8 linears keep autocast's bf16 inputs
            cfg = dataclasses.replace(cfg, autocast=False)
    step = build_step(next_token(lm), cfg, device, wrap=wrap, compile_whole=False)
    return LMStep(step=step, lm=lm, loaded=loaded, shape=shape, fp8_linear_layers=fp8)


def next_token(lm):
    """``lm`` (a ``transformers`` causal LM) as the training step's module: ``(B, T)`` token ids -> ``(B * T,
    vocab)`` logits."""
    import torch

    class NextToken(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.lm = inner

        def forward(self, x):
            return self.lm(input_ids=x, use_cache=False).logits.flatten(0, 1)

    return NextToken(lm)


def float8_reason(device) -> str | None:
    """Why Float8 training cannot run on ``device`` (torchao missing), or None; the compute capability is the
    precision's own check."""
    import importlib.util

    if importlib.util.find_spec("torchao") is None:
        return "Float8 training needs torchao (pip install torchao)"
    return None


def convert_float8(lm, rowwise: bool) -> int:
    """Swap every ``nn.Linear`` of ``lm`` but the LM head for torchao's ``Float8Linear`` (dynamic scaling: per
    tensor, or per row with ``rowwise``; torchao ``float8`` README); returns how many were swapped."""
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    head = lm.get_output_embeddings()
    swapped = []

    def keep(module, fqn: str) -> bool:
        ok = module is not head and module.in_features % 16 == 0 and module.out_features % 16 == 0
        if ok:
            swapped.append(fqn)
        return ok

    config = Float8LinearConfig.from_recipe_name("rowwise") if rowwise else Float8LinearConfig()
    convert_to_float8_training(lm, config=config, module_filter_fn=keep)
    return len(swapped)


def prepare_lm(lm, *, checkpointing: str, compile_kwargs: dict | None) -> None:
    """Activation checkpointing and per-layer compilation of ``lm``, in place (see the module docstring)."""
    layers = decoder_layers(lm)
    recompute = set(checkpointed_layers(len(layers), checkpointing))
    if recompute:
        kwargs = {"use_reentrant": False}
        if hasattr(lm, "activation_checkpointing_enable"):  # the name transformers gives it from 5.24 on
            lm.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            lm.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        for i, layer in enumerate(layers):
            if hasattr(layer, "gradient_checkpointing"):
                layer.gradient_checkpointing = i in recompute
    if compile_kwargs is not None:
        for layer in layers:
            layer.compile(**compile_kwargs)


def fsdp_wrap(lm, param_dtype=None, mesh=None):
    """A ``wrap`` for :func:`accelbench.training.step.build_step` that shards with FSDP2: ``fully_shard``
    on each decoder layer of ``lm``, then on ``lm`` itself, the root of its parameters (the step's
    :func:`next_token` module around it holds none; its flattened logits are a view, which FSDP2's backward hook
    must not be registered on); sharded over ``mesh``.

    ``param_dtype`` (the autocast dtype of an ``amp-*`` precision): FSDP2's mixed precision, as torchtitan trains
    (``torchtitan/models/llama3/infra/parallelize.py``: ``MixedPrecisionPolicy(param_dtype=bfloat16,
    reduce_dtype=float32)``): the float32 shards are gathered in ``param_dtype`` (half the all-gather bytes and no
    per-op casts of the weights) and the gradients reduced in float32; the optimizer keeps float32 parameters.
    ``mesh``: the 1-D mesh to shard over (:meth:`accelbench.core.parallel_dims.ParallelDims.build_mesh`'s
    ``dp_shard``; None: every rank)."""
    import torch
    from torch.distributed.fsdp import fully_shard

    kwargs = {} if mesh is None else {"mesh": mesh}
    if param_dtype is not None:
        from torch.distributed.fsdp import MixedPrecisionPolicy

        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)

    def wrap(module):
        for layer in decoder_layers(lm):
            fully_shard(layer, **kwargs)
        fully_shard(lm, **kwargs)
        return module

    return wrap


def fsdp_reason() -> str | None:
    """Why FSDP2 is not available in this torch (``torch.distributed.fsdp.fully_shard``, torch >= 2.6), or None."""
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return "FSDP2 (torch.distributed.fsdp.fully_shard) needs torch >= 2.6"
    return None


def text_ids(tokenizer) -> Any:
    """The training part of the shipped text as one token stream (``(n,)`` int64)."""
    import torch

    from accelbench.data.text import shipped_text, split

    return torch.tensor(tokenizer(split(shipped_text())[0], verbose=False)["input_ids"], dtype=torch.long)


def token_batches(
    source: str, *, batch: int, seq_len: int, count: int, vocab: int, seed: int, rank: int, world: int, ids=None
) -> list[tuple[Any, Any]]:
    """``count`` batches ``(x (batch, seq_len), y (batch * seq_len,))`` of this rank, on the CPU.

    ``random``: token ids drawn uniformly from the vocabulary (seeded per rank). ``text``: consecutive packed windows
    of ``ids`` (:func:`text_ids`), rank ``r`` of ``w`` taking every ``w``-th window from its ``r``-th
    (:func:`accelbench.training.lm_maths.window_starts`).
    """
    import torch

    n = batch * count
    if source == "random":
        gen = torch.Generator().manual_seed(seed * 1_000_003 + rank)
        windows = torch.randint(0, vocab, (n, seq_len + 1), generator=gen)
    else:
        starts = window_starts(len(ids), seq_len, n, first=rank, stride=world)
        windows = torch.stack([ids[s : s + seq_len + 1] for s in starts])
    out = []
    for k in range(count):
        w = windows[k * batch : (k + 1) * batch]
        out.append((w[:, :-1].contiguous(), w[:, 1:].reshape(-1).contiguous()))
    return out


def state_bytes(step) -> tuple[int, int]:
    """``(gradient bytes, optimizer state bytes)`` this rank holds (a sharded tensor's local shard)."""
    import torch

    def local(t) -> int:
        t = t.to_local() if hasattr(t, "to_local") else t
        return t.numel() * t.element_size()

    grads = sum(local(p.grad) for p in step.module.parameters() if p.grad is not None)
    opt = sum(
        local(v) for s in step.optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor) and v.dim()
    )
    return grads, opt


def unsupported_reason(precision: str, mode: str, device, workload: str = "train") -> str | None:
    """Why a language model's training step cannot run in ``precision`` and ``mode`` on ``device``, or None: the
    image step's reasons, but an fp8 precision: Float8 training (torchao) where the GPU has fp8 matmuls (compute
    capability >= 8.9)."""
    from accelbench import backends, precisions

    if precisions.is_float8(precision):
        why = precisions.unsupported_reason(precision, device) or float8_reason(device)
        return f"Float8 training: {why}" if why else None
    return precisions.unsupported_reason(precision, device, True) or backends.get(mode).unsupported_reason(
        device, workload
    )


def is_lm_spec(models) -> bool:
    """Whether ``models`` (names, or one comma-separated string) are language models (``accelbench train`` trains
    them as such, ``accelbench profile --step train`` profiles their step).

    Raises:
        ConfigError: language models mixed with image classifiers.
    """
    from accelbench.core.errors import ConfigError, UnknownModelError
    from accelbench.models.base import LM, lookup
    from accelbench.models.hf import is_lm_name

    names = [s.strip() for s in models.split(",")] if isinstance(models, str) else list(models or ())
    found = []
    for n in names:
        try:
            found.append(lookup(n).kind == LM)
        except UnknownModelError:
            found.append(is_lm_name(n))
    if found and any(found) and not all(found):
        raise ConfigError("model", ",".join(names), "language models or image classifiers, not both in one run")
    return bool(found) and all(found)
