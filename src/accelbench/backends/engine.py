"""The engine protocol: every way a language model generates is one :class:`Engine`.

An engine is a backend of the ``generate`` workload (it registers in :data:`accelbench.backends.BACKENDS` and is
found by the name users give to ``--modes``; a third-party engine registers through the ``accelbench.backends``
entry point group). It owns *how* the model runs; the benchmark owns *how it is timed*: warm-up, synchronisation,
CUDA events and the per-token marks stay in accelbench's timing loops (``accelbench.backends.lm_timing``),
which call the engine's verbs and take a mark after each token (optimum-benchmark's backends: ``load``, ``prefill``,
``generate``; vLLM's ``bench`` calls ``LLM.generate``, never the engine's internals).

The verbs an engine implements depend on its :class:`Capabilities`:

| capability | verbs |
| --- | --- |
| ``steps`` (in process) | :meth:`Engine.load`, :meth:`Engine.session` -> :class:`Session` (``prefill``, ``decode``, ``rewind``) |
| in process, not ``steps`` | :meth:`Engine.load`, :meth:`Engine.generate` (calls ``on_token`` once a token) |
| out of process (``in_process`` False) | :meth:`Engine.stream`: one request streamed, an event a chunk |

Quantization is not an engine's choice: the precision says what a case's weights are (the weight-only precisions,
fp8) and :meth:`Engine.load` applies it through the precision path every other case uses
(:mod:`accelbench.precisions`, :mod:`accelbench.quant`). An engine that cannot run a precision says why in
:meth:`Engine.unsupported_reason` (an ``unsupported`` row).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.backends.base import BACKENDS, Backend

if TYPE_CHECKING:
    import torch

GENERATE = "generate"  # the workload an engine serves (:attr:`accelbench.backends.Backend.workloads`)


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What an engine can do; the scenarios read these, never the engine's name.

    Attributes:
        in_process: it runs in accelbench's process on a torch device (False: a server reached over HTTP).
        steps: it exposes the prefill and each decode step (:class:`Session`), so accelbench's loop times each
            step; False: it runs a whole generation (:meth:`Engine.generate` or :meth:`Engine.stream`) and reports
            each token as it comes.
        compiles: it builds something before the first step (``torch.compile``): its rows carry ``compile_s`` and
            the warm-up runs twice (compile, then a CUDA graph's recording).
        cuda_graphs: on a CUDA device each decode step replays one CUDA graph.
        fused_projections: q/k/v and gate/up run as one matmul each (gpt-fast's ``wqkv``/``w1w3``).
        weight_only_kernels: it runs the weight-only precisions (int8/fp8 weights) through accelbench's Triton GEMV.
        streams: it streams tokens as they are produced (a server's SSE stream).
    """

    in_process: bool = True
    steps: bool = True
    compiles: bool = False
    cuda_graphs: bool = False
    fused_projections: bool = False
    weight_only_kernels: bool = True
    streams: bool = False


class Session(Protocol):
    """One generation shape of a loaded model (``batch_size x (prompt_len + new_tokens)`` KV cache positions).

    The verbs run under ``torch.no_grad``; token tensors are int64 ``(batch, 1)`` on the model's device.
    """

    def prefill(self, prompts: torch.Tensor) -> torch.Tensor:
        """``prompts`` ``(batch, prompt_len)`` into the KV cache; the greedy first tokens ``(batch, 1)``."""
        ...

    def decode(self, token: torch.Tensor, i: int) -> torch.Tensor:
        """Decode step ``i`` (0-based, position ``prompt_len + i``): the greedy next tokens ``(batch, 1)``."""
        ...

    def rewind(self, position: int) -> None:
        """Set the cache's write position back to ``position`` (0: before the prefill), so a step repeats the same
        work (``accelbench profile``)."""
        ...

    def reset(self) -> None:
        """Empty the cache before a new generation."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class StreamEvent:
    """One chunk of a streamed completion, as an out-of-process engine returns it.

    Attributes:
        text: the chunk's text ('' for a chunk that carries only usage).
        tokens: output tokens the chunk carries when the server says so, else None (counted by the tokenizer).
        usage: the server's ``usage`` object when the chunk carries it (``prompt_tokens``, ``completion_tokens``).
        finish_reason: the choice's ``finish_reason`` on its last chunk.
        output: the chunk carries generated output: a choice with text, even empty text (a token the tokenizer
            decodes to nothing, or the first bytes of a character, is still a token the server generated); not a
            chunk of usage alone, a chat stream's role announcement or an empty closing chunk.
    """

    text: str = ""
    tokens: int | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    output: bool = False


class Engine(Backend):
    """Base class of the generation engines (see the module docstring).

    Subclasses set ``name``, ``about`` and ``capabilities`` and implement the verbs their capabilities promise;
    the others raise :class:`NotImplementedError` naming the engine.
    """

    workloads = (GENERATE,)
    tune = ()  # tune searches image models' inference and training: never an engine
    capabilities = Capabilities()

    @property
    def compiles(self) -> bool:  # type: ignore[override]  # Backend's attribute, read from the capabilities
        return self.capabilities.compiles

    @property
    def fused(self) -> bool:  # type: ignore[override]
        return self.capabilities.fused_projections

    @property
    def graph_capture(self) -> bool:  # type: ignore[override]
        return self.capabilities.cuda_graphs

    @property
    def host_bound(self) -> bool:  # type: ignore[override]
        # an uncompiled in-process loop dispatches every operator of every token from Python (at batch 1 the host
        # is the bottleneck); a compiled step replays one CUDA graph a token; a server's host work is not ours
        return self.capabilities.in_process and not self.capabilities.compiles

    def unsupported_reason(
        self, device: torch.device, workload: str = GENERATE, precision: str | None = None
    ) -> str | None:
        """Why this engine cannot run a ``workload`` case on ``device`` in ``precision`` (a precision name), or None:
        the backend's reasons (:meth:`accelbench.backends.Backend.unsupported_reason`), then a weight-only
        precision asked of an engine without ``weight_only_kernels``."""
        reason = Backend.unsupported_reason(self, device, workload)
        if reason or precision is None:
            return reason
        from accelbench import precisions

        if precisions.get(precision).weight_only and not self.capabilities.weight_only_kernels:
            return f"{self.name} does not run weight-only precisions ({precision})"
        return None

    def options(self) -> dict[str, Any]:
        return {
            "compile_mode": ("reduce-overhead on CUDA, default on CPU" if self.capabilities.compiles else None),
            "freezing": False,
            "fused_projections": self.capabilities.fused_projections,
        }

    # verbs -----------------------------------------------------------------------------------------------------
    def load(self, model: str, precision: str, device: torch.device, seed: int) -> Any:
        """``model`` (a registry name) built or loaded on ``device`` in ``precision`` (quantized as the precision
        says), with whatever the engine prepares once a model (fused projections, a compiled step).

        Returns:
            What the engine's other verbs take. accelbench's scenarios read its ``module`` (the ``transformers``
            causal LM), ``tokenizer`` (or None), ``info`` (:class:`accelbench.models.hf.LMInfo`) and ``columns``
            (the row's build columns), as :class:`accelbench.backends.generation.LoadedModel` holds them.
        Raises:
            UnknownModelError, CheckpointError, Unsupported: the model cannot run on this engine (a row).
        """
        raise NotImplementedError(f"{self.name} does not load models in process")

    def session(self, loaded: Any, batch_size: int, prompt_len: int, new_tokens: int) -> Session:
        """A :class:`Session` of ``loaded`` for one generation shape (``steps`` engines)."""
        raise NotImplementedError(f"{self.name} does not expose prefill and decode steps")

    def generate(self, loaded: Any, prompts: torch.Tensor, new_tokens: int, on_token: Callable[[], None]) -> Any:
        """A whole greedy generation of exactly ``new_tokens`` tokens a sequence from ``prompts`` ``(batch, P)``,
        calling ``on_token()`` once a token as it is produced (the caller marks the time); the tokens
        ``(batch, new_tokens)``."""
        raise NotImplementedError(f"{self.name} does not generate in process")

    def stream(self, request: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        """One request (an OpenAI-compatible completion body) streamed: an event a chunk as it arrives (the caller
        stamps the arrival time) (out-of-process engines)."""
        raise NotImplementedError(f"{self.name} does not stream requests")


def engines(*, steps: bool | None = None) -> tuple[str, ...]:
    """The names of the registered engines, in registration order (those whose ``capabilities.steps`` is
    ``steps``, when given: the engines ``accelbench profile`` can time a single prefill or decode step of)."""
    return tuple(
        n for n, b in BACKENDS.items() if isinstance(b, Engine) and (steps is None or b.capabilities.steps == steps)
    )
