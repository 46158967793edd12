"""Generation engines (the ``generate`` scenario's ``--modes``): how a language model runs a prefill and its decode
steps, each an :class:`accelbench.backends.engine.Engine`.

(``tests/test_registries.py`` checks this table against :data:`accelbench.backends.engine.ENGINES`.)

| name | capabilities | what | source |
| --- | --- | --- | --- |
| hf-generate | whole generations | what users get: Hugging Face's default (dynamic) KV cache, greedy | transformers docs, "Generation" |
| static-cache | steps | a pre-allocated ``StaticCache``, the prefill and one eager decode step a token | transformers docs, "KV cache strategies" |
| static-compile | steps, compiles, CUDA graphs | the prefill and the decode step ``torch.compile``-d; on CUDA ``mode="reduce-overhead"``: one CUDA graph a step | gpt-fast; PyTorch blog "Accelerating Generative AI with PyTorch II: GPT, Fast" |
| static-compile-fused | the same, fused projections | q/k/v and gate/up fused into one matmul each (Llama-like models) | gpt-fast ``wqkv``/``w1w3``; vLLM's merged projections |

Every in-process engine loads through :func:`load_model`: the model (:func:`accelbench.models.lm_load.load_lm`: an
``hf:`` name or a user factory; split over the GPUs of a tensor-parallel layout) in its precision's dtype and quantized as its precision says (:mod:`accelbench.quant.lm`), its projections
fused when the engine's capabilities say so, and its prefill and decode steps compiled once a model. The loops are
:mod:`accelbench.backends.lm_loop`'s; their timing is accelbench's (:mod:`accelbench.backends.lm_timing`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from accelbench.backends.engine import Capabilities, Engine, LoadedModel, register

if TYPE_CHECKING:
    import torch


def load_model(engine: Engine, name: str, precision: str, device, seed: int, dims=None) -> LoadedModel:
    """``name`` on ``device`` as ``engine`` runs it in ``precision`` (see the module docstring): fused first, so the
    fused linears are quantized like any other; the prefill and decode steps compiled (on CUDA:
    ``reduce-overhead``, one CUDA graph a step) when the engine compiles. A precision that quantizes does it (fused
    first) a decoder layer at a time as the layers load (:func:`accelbench.quant.lm.layer_quantizer`): random weights
    are then never whole in the load dtype, so a Llama-3.1-70B shape in int8 weight-only loads on one 141 GB GPU.
    ``dims``: the ranks' layout (a
    :class:`~accelbench.core.parallel_dims.ParallelDims`; with ``tp`` used, this rank's shard of the model split
    by :mod:`accelbench.models.tensor_parallel`).

    Raises:
        UnknownModelError: the tokenizer has more tokens than the model embeds. Unsupported: fused projections
            asked of a model not built like Llama; a torchao fp8 precision on a tensor-parallel model
            (:func:`tp_reason`). MissingDependencyError: fp8 without torchao.
    """
    from accelbench.backends.lm_fuse import fuse_layer, fuse_projections
    from accelbench.backends.lm_loop import compiled_steps
    from accelbench.models import hf
    from accelbench.models.lm_load import load_lm
    from accelbench.quant.lm import layer_quantizer, lm_dtype, quantize_lm
    from accelbench.quant.weight_only import compiled_reductions

    caps = engine.capabilities
    why = tp_reason(precision) if dims is not None and dims.tp else None
    if why:
        from accelbench.core.errors import Unsupported

        raise Unsupported(why)
    quantize_layer = layer_quantizer(precision)

    def each_layer(layer) -> None:
        if caps.fused_projections:
            fuse_layer(layer)
        quantize_layer(layer)

    lm = load_lm(name, device, lm_dtype(precision), seed, dims=dims, each_layer=each_layer if quantize_layer else None)
    hf.check_tokenizer(lm)
    cols: dict[str, Any] = dict(lm.parallel)
    if caps.fused_projections:
        cols["fused_layers"] = fuse_projections(lm.module)
    cols.update(quantize_lm(lm.module, precision))
    graphs = caps.compiles and caps.cuda_graphs and device.type == "cuda"
    mode = ("reduce-overhead" if graphs else "default") if caps.compiles else None
    tune = compiled_reductions(lm.module)  # linears compiled as Inductor reductions: the decode step tunes them
    return LoadedModel(lm=lm, device=device, columns=cols, steps=compiled_steps(mode, tune))


def tp_reason(precision: str) -> str | None:
    """Why a tensor-parallel model cannot run in ``precision``, or None (every in-process engine runs a split).

    Not split: torchao's fp8 precisions (fp8 activations; a split is checked against the whole model on CPUs, where
    they do not run). The weight-only precisions are split: each rank quantizes its own shards after the split,
    per-shard scales (:mod:`accelbench.quant.weight_only`), as an engine quantizing on the fly after sharding does
    (vLLM's dynamic fp8 of a checkpoint's loaded shards). Fused projections are fused after the split, each rank its
    own shards (:mod:`accelbench.backends.lm_fuse`).
    """
    from accelbench import precisions

    p = precisions.get(precision)
    if p.quant is not None and not p.weight_only:
        return f"{precision}: torchao's fp8 linears are not split by tensor parallelism (use fp8-weight-only)"
    return None


class HFGenerate(Engine):
    """Hugging Face ``model.generate`` with its default KV cache: whole generations, a callback a token."""

    name = "hf-generate"
    about = "language models: Hugging Face generate with its default (dynamic) KV cache"
    capabilities = Capabilities(steps=False)

    def load(self, model: str, precision: str, device: torch.device, seed: int, dims=None) -> LoadedModel:
        return load_model(self, model, precision, device, seed, dims)

    def generate(self, loaded: LoadedModel, prompts, new_tokens: int, on_token: Callable[[], None]):
        from accelbench.backends.lm_loop import hf_generate

        return hf_generate(loaded.module, prompts, new_tokens, on_token)


class StaticCache(Engine):
    """The static-cache loop (:class:`accelbench.backends.lm_loop.StaticLoop`): a session exposes the prefill and
    each decode step; its capabilities say whether the step is compiled and the projections fused."""

    def __init__(self, name: str, about: str, capabilities: Capabilities):
        self.name, self.about, self.capabilities = name, about, capabilities

    def load(self, model: str, precision: str, device: torch.device, seed: int, dims=None) -> LoadedModel:
        return load_model(self, model, precision, device, seed, dims)

    def session(self, loaded: LoadedModel, batch_size: int, prompt_len: int, new_tokens: int):
        from accelbench.backends.lm_loop import StaticLoop

        return StaticLoop(loaded.module, batch_size, prompt_len, new_tokens, loaded.device, steps=loaded.steps)


for engine in (
    HFGenerate(),
    StaticCache(
        "static-cache",
        "language models: a pre-allocated static KV cache, one eager decode step a token",
        Capabilities(),
    ),
    StaticCache(
        "static-compile",
        "language models: the static-cache prefill and decode step torch.compile-d (CUDA: a CUDA graph a step, as "
        "gpt-fast)",
        Capabilities(compiles=True, cuda_graphs=True),
    ),
    StaticCache(
        "static-compile-fused",
        "language models: static-compile with q/k/v and gate/up fused into one matmul each",
        Capabilities(compiles=True, cuda_graphs=True, fused_projections=True),
    ),
):
    register(engine)
