"""The one loader of language models: every command that builds one (``generate``'s engines, ``train``'s step, the
profile, the local servers' checkpoints) asks :func:`load_lm`.

An ``hf:`` name is built or read by :mod:`accelbench.models.hf`; any other name is a user factory's module
(:func:`accelbench.models.create_model`), cast and moved. With a tensor-parallel layout
(:class:`accelbench.core.parallel_dims.ParallelDims` with ``tp`` used) the model is split over the layout's ``tp``
mesh (:mod:`accelbench.models.tensor_parallel`): random weights are built on the ``meta`` device and drawn on each
rank's shards, never whole; a checkpoint or a factory's module is built whole on the device, then split.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accelbench.core.parallel_dims import ParallelDims
    from accelbench.models.hf import LoadedLM


def load_lm(name: str, device, dtype, seed: int = 0, *, random_init: bool = False, dims: ParallelDims | None = None):
    """The language model ``name`` on ``device`` in ``dtype`` (a torch dtype), in eval mode, as a
    :class:`~accelbench.models.hf.LoadedLM`.

    Args:
        seed: random weights are drawn after ``torch.manual_seed(seed)`` (on shards: :func:`~accelbench.models
            .tensor_parallel.materialize`).
        random_init: a checkpoint's architecture with fresh weights (its tokenizer kept).
        dims: the ranks' layout; with ``tp`` used, this rank's part of the split model (``info.columns``-style
            figures in :attr:`LoadedLM.parallel`).
    Raises:
        UnknownModelError, CheckpointError, MissingDependencyError: the name does not resolve. Unsupported: a model
            tensor parallelism cannot split (:func:`accelbench.models.tensor_parallel.tp_reason`).
    """
    import torch

    from accelbench.models import hf

    tp = dims is not None and bool(dims.tp)
    if not hf.is_lm_name(name):
        from accelbench.models import create_model

        torch.manual_seed(seed)
        module = create_model(name).module.to(device=device, dtype=dtype).eval()
        loaded = hf.from_module(name, module, getattr(module, "tokenizer", None))
        return _split(loaded, dims, device) if tp else loaded
    meta = tp and (hf.checkpoint_dir(name) is None or random_init)
    loaded = hf.load_hf(name, torch.device("meta") if meta else device, dtype, seed, random_init=random_init)
    if not tp:
        return loaded
    return _split(loaded, dims, device, seed=seed if meta else None)


def _split(loaded: LoadedLM, dims: ParallelDims, device, seed: int | None = None) -> LoadedLM:
    """``loaded`` split over ``dims``' ``tp`` mesh; its meta-device weights drawn on ``device`` when ``seed`` is
    given."""
    import dataclasses

    from accelbench.models.tensor_parallel import apply_tp, materialize

    mesh = dims.build_mesh(device.type)["tp"]
    cols = apply_tp(loaded.module, mesh)
    if seed is not None:
        materialize(loaded.module, device, seed)
    return dataclasses.replace(loaded, parallel=cols)
