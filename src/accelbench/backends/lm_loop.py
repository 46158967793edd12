"""The in-process generation loops the engines run (:mod:`accelbench.backends.generation`); accelbench's scenarios
time them (:mod:`accelbench.backends.lm_timing`), so nothing here reads a clock.

- :func:`hf_generate`: Hugging Face ``model.generate`` as users call it (its default KV cache, greedy), with a logits
  processor that ``generate`` calls once a step right after the forward pass: ``on_token`` runs there, so a mark
  taken in it times the steps ``generate`` itself runs, its host work included.
- :class:`StaticLoop`: a pre-allocated ``StaticCache`` (``transformers``), the prefill in one forward pass
  (:func:`prefill_step`, ``logits_to_keep=1``: the LM head on the last prompt token only), then a decode step a
  token (:func:`decode_step`): the model on one token a sequence and the greedy argmax. The two are matching steps
  (the same arguments); with a compile mode both are ``torch.compile``-d (``fullgraph``), once a model: every case
  of the model reuses them (:func:`compiled_steps`); ``reduce-overhead`` captures each in CUDA graphs replayed every
  call (gpt-fast's recipe: ``torch.compiler.cudagraph_mark_step_begin()`` before each call, the output cloned
  before the next replay overwrites it). It is the :class:`accelbench.backends.engine.Session` of the
  static-cache engines.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


def hf_generate(model, prompts, new_tokens: int, on_token: Callable[[], None], cache_implementation: str | None = None):
    """``model.generate(prompts, max_new_tokens=N, min_new_tokens=N, do_sample=False)`` with the model's default
    cache (``cache_implementation`` to name another), calling ``on_token()`` once a generated token; the tokens
    ``(batch, new_tokens)``. ``min_new_tokens`` keeps an end-of-sequence token from ending it early.

    ``prompts``: int64 ``(batch, prompt_len)`` on the model's device.
    """
    import torch
    from transformers import LogitsProcessorList

    def mark(input_ids, scores):
        on_token()
        return scores

    pad = model.generation_config.pad_token_id
    pad = pad if pad is not None else (model.config.eos_token_id or 0)
    extra = {"cache_implementation": cache_implementation} if cache_implementation else {}
    with torch.inference_mode():
        out = model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            logits_processor=LogitsProcessorList([mark]),
            pad_token_id=pad,
            **extra,
        )
    return out[:, prompts.shape[1] :]


def cache_argument(model) -> str:
    """The keyword ``model``'s forward takes its KV cache by: ``cache`` in ``transformers`` releases that renamed it
    (``past_key_values`` is deprecated there, to be removed in 5.40), else ``past_key_values`` (5.17, the GPU
    machines'). Read from the forward's signature (through the deprecation decorator's ``functools.wraps``)."""
    import inspect

    return "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"


def prefill_step(model, cache, tokens, cache_position, cache_arg: str):
    """The prefill: ``tokens`` ``(batch, prompt_len)`` at ``cache_position`` ``(prompt_len,)`` through ``model`` into
    ``cache`` (passed by the keyword ``cache_arg``, :func:`cache_argument`), the LM head on the last token only
    (``logits_to_keep=1``), and the greedy first tokens ``(batch, 1)``. The matching step of :func:`decode_step`:
    the same arguments, so one compile serves every case of a model."""
    logits = model(
        tokens,
        cache_position=cache_position,
        position_ids=cache_position[None],
        use_cache=True,
        logits_to_keep=1,
        **{cache_arg: cache},
    ).logits
    return logits[:, -1].argmax(-1, keepdim=True)


def decode_step(model, cache, tokens, cache_position, cache_arg: str):
    """One decode step: ``tokens`` ``(batch, 1)`` at ``cache_position`` ``(1,)`` through ``model`` with ``cache``
    (passed by the keyword ``cache_arg``, :func:`cache_argument`), and the greedy next tokens ``(batch, 1)``. The
    model and cache are arguments, so one compiled step serves every case of a model: Dynamo specialises on the
    first shapes and recompiles when the batch or the cache length changes (:func:`compiled_steps`); a CUDA graph is
    recorded per shape."""
    logits = model(
        tokens, cache_position=cache_position, position_ids=cache_position[None], use_cache=True, **{cache_arg: cache}
    ).logits
    return logits[:, -1].argmax(-1, keepdim=True)


def _compiled(fn, compile_mode: str, tune_reductions: bool, dynamic: bool | None = None):
    """``fn`` ``torch.compile``-d (``fullgraph``) in ``compile_mode``, with Inductor's coordinate-descent tuning
    when ``tune_reductions`` (``torch.compile`` takes a mode or options, not both: the mode is spelled as its
    options then, ``torch._inductor.list_mode_options``); ``dynamic`` as ``torch.compile`` takes it (None: torch's
    automatic dynamic shapes, static first)."""
    import torch

    if not tune_reductions:
        return torch.compile(fn, mode=compile_mode, fullgraph=True, dynamic=dynamic)
    from torch._inductor import list_mode_options

    options = {**list_mode_options(compile_mode), "coordinate_descent_tuning": True}
    return torch.compile(fn, options=options, fullgraph=True, dynamic=dynamic)


# The most shapes a sweep's compiled step may compile (Dynamo's ``recompile_limit``, 8 by default, raised to it):
# each step compiles once a shape (a prompt length and batch size for the prefill, a batch size and cache length
# for the decode step), and a ``fullgraph`` function past the limit fails (``FailOnRecompileLimitHit``).
SHAPES_LIMIT = 64


def compiled_steps(compile_mode: str | None, tune_reductions: bool = False):
    """The matching :func:`prefill_step` and :func:`decode_step` (:class:`accelbench.backends.engine.Steps`), each
    ``torch.compile``-d (``fullgraph``) in ``compile_mode``, or both as they are for None.

    Both are specialised to their shapes (``dynamic=False``): a prefill graph a (batch size, prompt length) and a
    decode graph a (batch size, cache length). gpt-fast compiles its ``prefill`` with dynamic shapes instead (one
    graph for every prompt length); measured on the CPU (a 32-layer Llama of width 256, Inductor, torch 2.14) the
    dynamic graph took 92 s to compile against 43-56 s a static one, and ran the 128-token prefill 40 % slower (72
    against 51 ms), so a run of one or two prompt lengths compiles sooner static and every prompt length runs
    kernels specialised to it (``benchmarks/llm_gptfast.py --prefill`` measures both on a
    GPU). The KV cache's buffers are static addresses (:func:`allocate`). Each compile happens in a case's first
    warm-up generation; a later case of the same shape reuses it. Dynamo's recompile limit is raised to
    :data:`SHAPES_LIMIT` so that a sweep's shapes each compile (past it, a ``fullgraph`` function fails). With
    ``reduce-overhead`` a CUDA graph is recorded per shape, the KV cache written in place.

    ``tune_reductions`` adds Inductor's coordinate-descent tuning to the decode step (``coordinate_descent_tuning``:
    each generated Triton kernel's block sizes searched around the heuristic's choice), which gpt-fast turns on for
    its decode step. It matters where the step's matrix products are Inductor reductions, as the weight-only
    linears are where the Triton GEMV cannot run (:func:`accelbench.quant.weight_only.compiled_reductions`): there it
    makes the weight-only step clearly faster on Hopper GPUs (docs/results.md, language models). A prefill's matrix
    products are GEMMs (cuBLAS, or the weight-only GEMM), never such reductions: it compiles in the plain mode.
    """
    from accelbench.backends.engine import Steps

    if not compile_mode:
        return Steps(prefill=prefill_step, decode=decode_step)
    import torch._dynamo.config as dynamo_config

    name = "recompile_limit" if hasattr(dynamo_config, "recompile_limit") else "cache_size_limit"  # torch < 2.6
    setattr(dynamo_config, name, max(getattr(dynamo_config, name), SHAPES_LIMIT))
    return Steps(
        prefill=_compiled(prefill_step, compile_mode, False, dynamic=False),
        decode=_compiled(decode_step, compile_mode, tune_reductions, dynamic=False),
        graphs=compile_mode == "reduce-overhead",
        compiled=True,
    )


def guards_skipped(steps):
    """A context in which a compiled step's call evaluates only the guards that tell its compiled graphs apart
    (``torch.compiler.set_stance(skip_guard_eval_unsafe=True)``, torch >= 2.7; PyTorch docs, "Reducing Guard
    Overhead"): for ``steps`` that are compiled, else (or on an older torch) a context that changes nothing.

    Every call of a compiled step first checks its guards: the shapes, dtypes and strides of its inputs, the model's
    parameters and buffers and the cache's tensors among them. For a 32-layer Llama that is 2.3 ms of host time a
    call (measured on the CPU, the profiler's ``TorchDynamo Cache Lookup``, width 64; 0.18 ms with the guards
    skipped), spent before the step's first kernel starts, so it is in every TTFT. The skip is sound when the inputs
    are those a full check already let through: a session calls it from a step's second call on, with the same
    model, cache and shapes (:class:`StaticLoop`)."""
    import contextlib

    import torch

    if not steps.compiled or not _can_skip_guards():
        return contextlib.nullcontext()
    return torch.compiler.set_stance(skip_guard_eval_unsafe=True)


@functools.cache
def _can_skip_guards() -> bool:
    """This torch's ``torch.compiler.set_stance`` takes ``skip_guard_eval_unsafe`` (torch >= 2.7); read once, not on
    every step."""
    import inspect

    import torch

    stance = getattr(torch.compiler, "set_stance", None)
    return stance is not None and "skip_guard_eval_unsafe" in inspect.signature(stance).parameters


def allocate(cache, model, batch_size: int, device) -> None:
    """Allocate ``cache``'s keys and values now (``early_initialization``), not in the first step that writes them.

    ``transformers``' ``StaticCache`` allocates a layer's buffers lazily, in its first ``update``, and marks them
    static addresses there (``torch._dynamo.mark_static_address``: what lets a CUDA graph write them in place), but
    only outside a compiled region; a compiled prefill would allocate them inside its graph, unmarked, and recompile
    once they exist. Allocated here, every step, compiled or not, finds them in place. The layout is the
    config's: ``num_key_value_heads`` (else ``num_attention_heads``) heads of ``head_dim`` (else hidden size /
    heads; a model split by tensor parallelism holds ``1 / tp`` of the heads a GPU), in the dtype of the model's input embeddings (its activations' dtype; the weight-only precisions store
    their linears' weights as int8 or fp8). A cache without ``early_initialization`` stays lazy."""
    if not hasattr(cache, "early_initialization"):
        return
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    from accelbench.models.tensor_parallel import degree

    heads = (getattr(config, "num_key_value_heads", None) or config.num_attention_heads) // degree(model)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    dtype = model.get_input_embeddings().weight.dtype
    cache.early_initialization(batch_size, heads, head_dim, dtype, device)


class StaticLoop:
    """The static-cache prefill and decode loop (see the module docstring).

    Args:
        model: a ``transformers`` causal LM on ``device``, in eval mode.
        batch_size, prompt_len, new_tokens: the generation's shape (the cache holds ``prompt_len + new_tokens``).
        steps: the prefill and decode steps (:func:`compiled_steps`; None: both eager).
    """

    def __init__(self, model, batch_size: int, prompt_len: int, new_tokens: int, device, steps=None):
        import torch
        from transformers import StaticCache

        self.model, self.prompt_len, self.new_tokens, self.device = model, prompt_len, new_tokens, device
        self.cache = StaticCache(config=model.config, max_cache_len=prompt_len + new_tokens)
        allocate(self.cache, model, batch_size, device)
        self.cache_arg = cache_argument(model)
        self.positions = torch.arange(prompt_len + new_tokens, device=device)
        self.steps = steps or compiled_steps(None)
        self._called: set[str] = set()  # the steps this session has called once, its guards checked in full

    def _run(self, name: str, tokens, positions):
        """Step ``name`` of :attr:`steps`; a CUDA graph step is marked begun and its output cloned (the next replay
        overwrites the graph's output). A compiled step's first call in this session checks its guards in full (and
        compiles when no graph fits); its later calls, on the same model, cache and shapes, skip the guards that do
        not tell its graphs apart (:func:`guards_skipped`)."""
        import contextlib

        import torch

        if self.steps.graphs:
            torch.compiler.cudagraph_mark_step_begin()
        step = getattr(self.steps, name)
        with guards_skipped(self.steps) if name in self._called else contextlib.nullcontext():
            out = step(self.model, self.cache, tokens, positions, self.cache_arg)
        self._called.add(name)
        return out.clone() if self.steps.graphs else out

    def prefill(self, prompts):
        """The prefill: ``prompts`` ``(batch, prompt_len)`` through the model into the cache (positions
        ``0 .. prompt_len - 1``), the LM head on the last token, and the greedy first tokens ``(batch, 1)``. Call it
        under ``torch.no_grad``; it overwrites the cache's prompt positions (``accelbench profile --step prefill``
        runs it alone)."""
        return self._run("prefill", prompts, self.positions[: self.prompt_len])

    def decode(self, token, i: int):
        """Decode step ``i`` (0-based): ``token`` ``(batch, 1)`` at position ``prompt_len + i`` (the context is
        ``prompt_len + i + 1`` positions), the next greedy tokens ``(batch, 1)``. Under ``torch.no_grad``
        (``accelbench profile --step decode`` runs it alone)."""
        p = self.prompt_len
        return self._run("decode", token, self.positions[p + i : p + i + 1])

    def rewind(self, position: int) -> None:
        """Set the cache's write position back to ``position`` (0: before the prefill; ``prompt_len``: before the
        first decode step), so a step can be repeated doing the same work (``accelbench profile``). Where the cache
        keeps its own write position (``transformers`` 5's static layers count ``cumulative_length`` and ignore the
        ``cache_position`` passed), every layer's is set in one ``_foreach_copy_`` (one kernel on CUDA); an older
        cache writes where ``cache_position`` says and needs nothing."""
        import torch

        lengths = [
            layer.cumulative_length
            for layer in getattr(self.cache, "layers", ())
            if isinstance(getattr(layer, "cumulative_length", None), torch.Tensor)
        ]
        if lengths:
            torch._foreach_copy_(lengths, [torch.full_like(lengths[0], position)] * len(lengths))

    def reset(self) -> None:
        """Empty the cache before a new generation (its buffers zeroed in place: a captured graph keeps its inputs)."""
        self.cache.reset()
