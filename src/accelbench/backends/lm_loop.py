"""The in-process generation loops the engines run (:mod:`accelbench.backends.generation`); accelbench's scenarios
time them (:mod:`accelbench.backends.lm_timing`), so nothing here reads a clock.

- :func:`hf_generate`: Hugging Face ``model.generate`` as users call it (its default KV cache, greedy), with a logits
  processor that ``generate`` calls once a step right after the forward pass: ``on_token`` runs there, so a mark
  taken in it times the steps ``generate`` itself runs, its host work included.
- :class:`StaticLoop`: a pre-allocated ``StaticCache`` (``transformers``), the prefill in one forward pass
  (``logits_to_keep=1``: the LM head on the last prompt token only), then a decode step a token: the model on one
  token a sequence and the greedy argmax. With a compile mode the decode step is ``torch.compile``-d
  (``fullgraph``), once a model: every case of the model reuses it (:func:`decode_step`); ``reduce-overhead``
  captures it in a CUDA graph replayed every step (gpt-fast's recipe:
  ``torch.compiler.cudagraph_mark_step_begin()`` before each call, the output cloned before the next replay
  overwrites it). It is the :class:`accelbench.backends.engine.Session` of the static-cache engines.
"""

from __future__ import annotations

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


def decode_step(model, cache, tokens, cache_position, cache_arg: str):
    """One decode step: ``tokens`` ``(batch, 1)`` at ``cache_position`` ``(1,)`` through ``model`` with ``cache``
    (passed by the keyword ``cache_arg``, :func:`cache_argument`), and the greedy next tokens ``(batch, 1)``. The
    model and cache are arguments, so one compiled step serves every case of a model: Dynamo specialises on the
    first shapes and recompiles once with dynamic batch and cache lengths when they change; a CUDA graph is
    recorded per shape."""
    logits = model(
        tokens, cache_position=cache_position, position_ids=cache_position[None], use_cache=True, **{cache_arg: cache}
    ).logits
    return logits[:, -1].argmax(-1, keepdim=True)


def compiled_step(compile_mode: str | None, tune_reductions: bool = False):
    """:func:`decode_step`, ``torch.compile``-d (``fullgraph``) in ``compile_mode``, or as it is for None.

    ``tune_reductions`` adds Inductor's coordinate-descent tuning (``coordinate_descent_tuning``: each generated
    Triton kernel's block sizes searched around the heuristic's choice), which gpt-fast turns on for its decode
    step. It matters where the step's matrix products are Inductor reductions, as the weight-only linears are
    where the Triton GEMV cannot run (:func:`accelbench.quant.weight_only.compiled_reductions`): there it makes the
    weight-only step clearly faster on Hopper GPUs (docs/results.md, language models). ``torch.compile`` takes a
    mode or options, not both: the mode is spelled as its options then (``torch._inductor.list_mode_options``).
    """
    import torch

    if not compile_mode:
        return decode_step
    if not tune_reductions:
        return torch.compile(decode_step, mode=compile_mode, fullgraph=True)
    from torch._inductor import list_mode_options

    options = {**list_mode_options(compile_mode), "coordinate_descent_tuning": True}
    return torch.compile(decode_step, options=options, fullgraph=True)


class StaticLoop:
    """The static-cache prefill and decode loop (see the module docstring).

    Args:
        model: a ``transformers`` causal LM on ``device``, in eval mode.
        batch_size, prompt_len, new_tokens: the generation's shape (the cache holds ``prompt_len + new_tokens``).
        step: the decode step (:func:`compiled_step`); graphs: it replays CUDA graphs (``reduce-overhead``).
    """

    def __init__(
        self, model, batch_size: int, prompt_len: int, new_tokens: int, device, step=decode_step, graphs: bool = False
    ):
        import torch
        from transformers import StaticCache

        self.model, self.prompt_len, self.new_tokens, self.device = model, prompt_len, new_tokens, device
        self.cache = StaticCache(config=model.config, max_cache_len=prompt_len + new_tokens)
        self.cache_arg = cache_argument(model)
        self.positions = torch.arange(prompt_len + new_tokens, device=device)
        self.step, self.graphs = step, graphs

    def prefill(self, prompts):
        """The prefill: ``prompts`` ``(batch, prompt_len)`` through the model into the cache (positions
        ``0 .. prompt_len - 1``), the LM head on the last token, and the greedy first tokens ``(batch, 1)``. Call it
        under ``torch.no_grad``; it overwrites the cache's prompt positions (``accelbench profile --step prefill``
        runs it alone)."""
        p = self.prompt_len
        logits = self.model(
            prompts,
            cache_position=self.positions[:p],
            position_ids=self.positions[None, :p],
            use_cache=True,
            logits_to_keep=1,
            **{self.cache_arg: self.cache},
        ).logits
        return logits[:, -1].argmax(-1, keepdim=True)

    def decode(self, token, i: int):
        """Decode step ``i`` (0-based): ``token`` ``(batch, 1)`` at position ``prompt_len + i`` (the context is
        ``prompt_len + i + 1`` positions), the next greedy tokens ``(batch, 1)``. Under ``torch.no_grad``; a CUDA
        graph step is marked begun and its output cloned (``accelbench profile --step decode`` runs it alone)."""
        import torch

        p = self.prompt_len
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()
        token = self.step(self.model, self.cache, token, self.positions[p + i : p + i + 1], self.cache_arg)
        return token.clone() if self.graphs else token  # the next replay overwrites the graph's output

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
