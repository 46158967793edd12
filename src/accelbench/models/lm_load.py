"""The one loader of language models: every command that builds one (``generate``'s engines, ``train``'s step, the
profile, the local servers' checkpoints) asks :func:`load_lm`.

An ``hf:`` name is built or read by :mod:`accelbench.models.hf`; any other name is a user factory's module
(:func:`accelbench.models.create_model`), cast and moved. With a tensor-parallel layout
(:class:`accelbench.core.parallel_dims.ParallelDims` with ``tp`` used) the model is split over the layout's ``tp``
mesh (:mod:`accelbench.models.tensor_parallel`): random weights are built on the ``meta`` device and drawn on each
rank's shards, never whole; a checkpoint or a factory's module is built whole on the device, then split.

A caller that converts each decoder layer (``each_layer``: a weight-only precision quantizing it) gets it called on
every layer once its weights are on the device. Random weights are then drawn a layer at a time, each converted
before the next is allocated (:func:`materialize`), so a model whose weights in its load dtype exceed the device's
memory but whose quantized weights do not (a Llama-3.1-70B shape in int8 on one 141 GB GPU) is never whole in that
dtype: the peak is the converted layers, one unconverted layer and what lies outside the layers (embedding, norm,
LM head).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.models.hf import LoadedLM


def load_lm(
    name: str,
    device,
    dtype,
    seed: int = 0,
    *,
    random_init: bool = False,
    dims: ParallelDims | None = None,
    each_layer: Callable | None = None,
):
    """The language model ``name`` on ``device`` in ``dtype`` (a torch dtype), in eval mode, as a
    :class:`~accelbench.models.hf.LoadedLM`.

    Args:
        seed: random weights are drawn after ``torch.manual_seed(seed)`` (on shards, or a layer at a time:
            :func:`materialize`).
        random_init: a checkpoint's architecture with fresh weights (its tokenizer kept).
        dims: the ranks' layout; with ``tp`` used, this rank's part of the split model (``info.columns``-style
            figures in :attr:`LoadedLM.parallel`).
        each_layer: called on every decoder layer (an ``nn.Module``) once its weights are on ``device`` (and split),
            in order; random weights are drawn a layer at a time for it (see the module docstring).
    Raises:
        UnknownModelError, CheckpointError, MissingDependencyError: the name does not resolve. Unsupported: a model
            tensor parallelism cannot split (:func:`accelbench.models.tensor_parallel.tp_reason`).
    """
    import torch

    from accelbench.models import hf
    from accelbench.models.lm_shape import decoder_layers

    tp, meta = dims is not None and bool(dims.tp), False
    if not hf.is_lm_name(name):
        from accelbench.models import create_model

        torch.manual_seed(seed)
        module = create_model(name).module.to(device=device, dtype=dtype).eval()
        loaded = hf.from_module(name, module, getattr(module, "tokenizer", None))
    else:
        random = hf.checkpoint_dir(name) is None or random_init
        meta = random and (tp or each_layer is not None)
        loaded = hf.load_hf(name, torch.device("meta") if meta else device, dtype, seed, random_init=random_init)
    if tp:
        loaded = _split(loaded, dims, device)
    if meta:
        materialize(loaded.module, device, seed, each_layer)
    elif each_layer is not None:
        try:
            layers = decoder_layers(loaded.module)
        except ValueError:  # a factory's module without a list of decoder layers: converted whole by the caller
            layers = []
        for layer in layers:
            each_layer(layer)
    return loaded


def _split(loaded: LoadedLM, dims: ParallelDims, device) -> LoadedLM:
    """``loaded`` split over ``dims``' ``tp`` mesh (meta-device weights stay on the meta device)."""
    import dataclasses

    from accelbench.models.tensor_parallel import apply_tp

    mesh = dims.build_mesh(device.type)["tp"]
    cols = apply_tp(loaded.module, mesh)
    return dataclasses.replace(loaded, parallel=cols)


def materialize(lm, device, seed: int, each_layer: Callable | None = None) -> None:
    """Allocate ``lm``'s ``meta``-device weights (whole, or a rank's shards) on ``device`` and draw them there: what
    lies outside the decoder layers first, then one decoder layer at a time, ``each_layer`` called on each before
    the next is allocated.

    Weights are drawn as ``transformers`` initialises a Llama (``normal(0, initializer_range)`` for linears and
    embeddings, ones for norms, zeros for biases), each tensor from its own generator seeded by ``seed`` and its
    qualified name. A shard is its slice of the whole tensor drawn so (one whole tensor at a time on the device,
    :data:`accelbench.models.lm_shape.SHARD_SLICE`): a split model's weights are the whole model's drawn here, on
    every degree, and replicated tensors are the same on every rank, as a split model needs. Tied weights (an LM
    head that is the embedding table) stay one tensor. Rotary-embedding buffers, computed at construction, are
    rebuilt on ``device``.
    """
    import torch

    from accelbench.models.lm_shape import decoder_layers

    layers = decoder_layers(lm)
    inside = {id(m) for layer in layers for m in layer.modules()}
    ties = _ties(lm)
    std = float(getattr(lm.config, "initializer_range", 0.02))
    with torch.no_grad():
        for prefix, module in lm.named_modules():
            if id(module) not in inside:
                _draw(module, prefix, device, seed, std, recurse=False)
        for module_name, attr, owner in ties:
            setattr(lm.get_submodule(module_name), attr, lm.get_parameter(owner))
        names = {id(m): n for n, m in lm.named_modules()}
        for layer in layers:
            _draw(layer, names[id(layer)], device, seed, std, recurse=True)
            if each_layer is not None:
                each_layer(layer)
    _rebuild_rotary(lm, device)


def _ties(lm) -> list[tuple[str, str, str]]:
    """``(module name, attribute, owner parameter's name)`` of every parameter that is another's tensor (a tied LM
    head): ``to_empty`` gives each module its own tensor, so the ties are restored after it."""
    owner: dict[int, str] = {}
    ties = []
    for name, p in lm.named_parameters(remove_duplicate=False):
        if id(p) in owner:
            module_name, _, attr = name.rpartition(".")
            ties.append((module_name, attr, owner[id(p)]))
        else:
            owner[id(p)] = name
    return ties


def _draw(module, prefix: str, device, seed: int, std: float, *, recurse: bool) -> None:
    """``module``'s parameters (its own, or with ``recurse`` its submodules' too) allocated on ``device`` and drawn
    (see :func:`materialize`); a shard keeps its marks of the ranks it is split over and of its slice."""
    import torch

    from accelbench.models.lm_shape import SHARD_SLICE, SHARDS

    marks = {
        n: {a: getattr(p, a) for a in (SHARDS, SHARD_SLICE) if hasattr(p, a)}
        for n, p in module.named_parameters(recurse=recurse)
    }
    module.to_empty(device=device, recurse=recurse)  # new parameter objects: the marks are set again below
    for name, p in module.named_parameters(recurse=recurse):
        for attr, value in marks[name].items():
            setattr(p, attr, value)
        full = f"{prefix}.{name}" if prefix else name
        g = torch.Generator(device=p.device).manual_seed(seed * 1_000_003 + zlib.crc32(full.encode()))
        if name.endswith("bias"):
            p.zero_()
        elif p.dim() == 1:  # a norm's scale
            p.fill_(1.0)
        elif SHARD_SLICE in marks[name]:  # drawn whole, this rank's slice kept
            (dim, rank), tp = marks[name][SHARD_SLICE], marks[name][SHARDS]
            shape = [n * tp if i == dim else n for i, n in enumerate(p.shape)]
            whole = torch.empty(shape, device=p.device, dtype=p.dtype).normal_(0.0, std, generator=g)
            p.copy_(whole.chunk(tp, dim)[rank])
        else:
            p.normal_(0.0, std, generator=g)


def _rebuild_rotary(lm, device) -> None:
    """Replace every rotary-embedding module (its ``inv_freq`` buffers were left empty by ``to_empty``) by a new one
    built on ``device`` from its config."""
    import torch

    for parent in list(lm.modules()):
        for child_name, child in list(parent.named_children()):
            if type(child).__name__.endswith("RotaryEmbedding"):
                with torch.device(device):
                    setattr(parent, child_name, type(child)(child.config))
