"""The engine protocol: every way a language model generates is one :class:`Engine`.

An engine is not a :class:`~accelbench.backends.Backend` (an image model's forward or training step): it registers
in its own registry, :data:`ENGINES`, and is found by the name users give to ``--modes`` (the two registries share
one namespace of modes: :mod:`accelbench.backends.modes`); a third-party engine registers through the
``accelbench.backends`` entry point group, which takes an engine as it takes a backend. The engine owns *how* the
model runs: it loads a model into a typed :class:`LoadedModel` (its prefill and decode, matching steps compiled or not
as its capabilities say), opens sessions on it, says how many untimed generations come first (:attr:`Engine.warmup`)
and hands the memory back (:meth:`Engine.release`, the one place that does). The benchmark owns *how it is timed*:
synchronisation, CUDA events and the per-token marks stay in accelbench's timing loops
(``accelbench.backends.lm_timing``), which call the engine's verbs and take a mark after each token
(optimum-benchmark's backends: ``load``, ``prefill``, ``generate``; vLLM's ``bench`` calls ``LLM.generate``, never
the engine's internals).

The verbs an engine implements depend on its :class:`Capabilities`:

| capability | verbs |
| --- | --- |
| ``steps`` (in process) | :meth:`Engine.load` -> :class:`LoadedModel`, :meth:`Engine.session` -> :class:`Session` (``prefill``, ``decode``, ``rewind``) |
| in process, not ``steps`` | :meth:`Engine.load` -> :class:`LoadedModel`, :meth:`Engine.generate` (calls ``on_token`` once a token) |
| out of process (``in_process`` False) | :meth:`Engine.stream`: one request streamed, an event a chunk |

Quantization is not an engine's choice: the precision says what a case's weights are (the weight-only precisions,
fp8) and :meth:`Engine.load` applies it through the precision path every other case uses
(:mod:`accelbench.precisions`, :mod:`accelbench.quant`). An engine that cannot run a precision says why in
:meth:`Engine.unsupported_reason` (an ``unsupported`` row).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from accelbench.backends.base import BACKENDS
from accelbench.core.config import pick, put

if TYPE_CHECKING:
    import torch

    from accelbench.models.hf import LMInfo, LoadedLM

GENERATE = "generate"  # the workload an engine serves (what a mode serves: ``workloads``, as a backend's)


@dataclass(frozen=True, kw_only=True, slots=True)
class Capabilities:
    """What an engine can do; the scenarios read these, never the engine's name.

    Attributes:
        in_process: it runs in accelbench's process on a torch device (False: a server reached over HTTP).
        steps: it exposes the prefill and each decode step (:class:`Session`), so accelbench's loop times each
            step; False: it runs a whole generation (:meth:`Engine.generate` or :meth:`Engine.stream`) and reports
            each token as it comes.
        compiles: its prefill and decode steps are ``torch.compile``-d (matching steps of one loop,
            :func:`accelbench.backends.lm_loop.compiled_steps`): its rows carry ``compile_s`` (and each step's,
            ``compile_prefill_s`` and ``compile_decode_s``) and the warm-up runs twice (:attr:`Engine.warmup`).
        cuda_graphs: on a CUDA device each step (the prefill of each prompt shape, each decode step) replays one
            CUDA graph.
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


@dataclass(frozen=True, kw_only=True, slots=True)
class Steps:
    """The two matching steps of one generation loop, ``fn(model, cache, tokens, cache_position, cache_arg) ->
    tokens`` each (:mod:`accelbench.backends.lm_loop`): compiled once a model and shared by its sessions.

    Attributes:
        prefill: the prompt ``(batch, prompt_len)`` into the cache, the greedy first tokens ``(batch, 1)``.
        decode: one token a sequence ``(batch, 1)``, the greedy next tokens ``(batch, 1)``.
        graphs: the steps replay CUDA graphs (``reduce-overhead``): each call is marked begun, each output cloned.
        compiled: the steps are ``torch.compile``-d: a session's repeated calls of a step skip the guards that do not
            tell its compiled graphs apart (:meth:`accelbench.backends.lm_loop.StaticLoop.prefill`).
    """

    prefill: Callable
    decode: Callable
    graphs: bool = False
    compiled: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedModel:
    """A language model an in-process engine loaded (what :meth:`Engine.load` returns, what its other verbs take).

    Attributes:
        lm: the module (a ``transformers`` causal LM in eval mode), its tokenizer (or None) and what is known of it.
        device: where it runs (a ``torch.device``).
        columns: the row's columns of the build (``quant_*``, ``fused_layers``).
        steps: its prefill and decode steps (compiled or not, as the engine's capabilities say); None for an engine
            that runs whole generations its own way.
    """

    lm: LoadedLM
    device: Any
    columns: dict[str, Any] = field(default_factory=dict)
    steps: Steps | None = None

    @property
    def module(self) -> Any:
        """The ``transformers`` causal LM."""
        return self.lm.module

    @property
    def tokenizer(self) -> Any:
        """Its tokenizer, or None."""
        return self.lm.tokenizer

    @property
    def info(self) -> LMInfo:
        """What is known of it (:class:`accelbench.models.hf.LMInfo`: vocabulary, context, weights)."""
        return self.lm.info


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


class Engine:
    """Base class of the generation engines (see the module docstring).

    Subclasses set ``name``, ``about`` and ``capabilities`` and implement the verbs their capabilities promise;
    the others raise :class:`NotImplementedError` naming the engine.

    Attributes:
        name: the mode name users give (``--modes``); about: one line for the tables (README, docs).
        workloads: what it serves (``generate``; a server engine: ``serve``), as a backend's ``workloads``.
        capabilities: what it can do (:class:`Capabilities`).
        requires: pip packages it imports (checked before a run: :mod:`accelbench.sweep.requirements`).
    """

    name: str = ""
    about: str = ""
    workloads: tuple[str, ...] = (GENERATE,)
    capabilities = Capabilities()
    requires: tuple[str, ...] = ()

    @property
    def host_bound(self) -> bool:
        """Its step is bound by the host's Python work (the telemetry sampler goes to a process of its own:
        :func:`accelbench.telemetry.isolation_for`): an uncompiled in-process loop dispatches every operator of every
        token from Python (at batch 1 the host is the bottleneck); a compiled step replays one CUDA graph a token; a
        server's host work is not ours."""
        return self.capabilities.in_process and not self.capabilities.compiles

    @property
    def warmup(self) -> int:
        """Untimed generations before the timed ones (``accelbench generate``, ``serve``'s in-process ceiling): two
        for a compiling engine (the first compiles, the second records the CUDA graphs a ``reduce-overhead`` step
        replays from then on: torch's CUDA graph trees record on a function's second call), else one (allocator and
        kernel caches warm)."""
        return 2 if self.capabilities.compiles else 1

    def unsupported_reason(
        self, device: torch.device, workload: str = GENERATE, precision: str | None = None
    ) -> str | None:
        """Why this engine cannot run a ``workload`` case on ``device`` in ``precision`` (a precision name), or None:
        another workload, or a weight-only precision asked of an engine without ``weight_only_kernels``."""
        if workload not in self.workloads:
            return f"{self.name} does not run {workload} cases (it serves {', '.join(self.workloads)})"
        if precision is None:
            return None
        from accelbench import precisions

        if precisions.get(precision).weight_only and not self.capabilities.weight_only_kernels:
            return f"{self.name} does not run weight-only precisions ({precision})"
        return None

    def runs_on(self, device_type: str) -> bool:
        """It can run on a device of this type (``cpu``, ``cuda``): every in-process engine runs on both."""
        return True

    def options(self) -> dict[str, Any]:
        """The execution options it stands for, as row columns (``compile_mode``, ``freezing``,
        ``fused_projections``)."""
        return {
            "compile_mode": ("reduce-overhead on CUDA, default on CPU" if self.capabilities.compiles else None),
            "freezing": False,
            "fused_projections": self.capabilities.fused_projections,
        }

    # verbs -----------------------------------------------------------------------------------------------------
    def load(self, model: str, precision: str, device: torch.device, seed: int, dims=None) -> LoadedModel:
        """``model`` (a registry name) built or loaded on ``device`` in ``precision`` (quantized as the precision
        says), with whatever the engine prepares once a model (fused projections, compiled steps).

        Args:
            device: where this process's part of the model runs (its rank's GPU under torchrun).
            seed: random weights are drawn after ``torch.manual_seed(seed)``.
            dims: the ranks' layout (:class:`accelbench.core.parallel_dims.ParallelDims`) of a model split over the
                job's GPUs (``tp`` used: this rank's shard, :mod:`accelbench.models.tensor_parallel`), passed only
                for a split case; None in one process.

        Returns:
            The :class:`LoadedModel` the engine's other verbs take.
        Raises:
            UnknownModelError, CheckpointError, Unsupported: the model cannot run on this engine (a row).
        """
        raise NotImplementedError(f"{self.name} does not load models in process")

    def session(self, loaded: LoadedModel, batch_size: int, prompt_len: int, new_tokens: int) -> Session:
        """A :class:`Session` of ``loaded`` for one generation shape (``steps`` engines)."""
        raise NotImplementedError(f"{self.name} does not expose prefill and decode steps")

    def generate(
        self, loaded: LoadedModel, prompts: torch.Tensor, new_tokens: int, on_token: Callable[[], None]
    ) -> torch.Tensor:
        """A whole greedy generation of exactly ``new_tokens`` tokens a sequence from ``prompts`` ``(batch, P)``,
        calling ``on_token()`` once a token as it is produced (the caller marks the time); the tokens
        ``(batch, new_tokens)``."""
        raise NotImplementedError(f"{self.name} does not generate in process")

    def stream(self, request: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        """One request (an OpenAI-compatible completion body) streamed: an event a chunk as it arrives (the caller
        stamps the arrival time) (out-of-process engines)."""
        raise NotImplementedError(f"{self.name} does not stream requests")

    def release(self) -> None:
        """Hand back the memory of the models this engine loaded that nobody holds any more: call it after dropping
        every reference to a :class:`LoadedModel` (and its sessions). Collects them, drops every compiled graph of
        the process (``torch._dynamo.reset``: the compiled steps, their CUDA graphs and memory pools) and empties
        the CUDA caching allocator (``torch.cuda.empty_cache``), so the next load starts from an empty device."""
        import gc

        gc.collect()
        if not self.capabilities.in_process:
            return
        import torch

        if self.capabilities.compiles:
            torch._dynamo.reset()
        if torch.cuda.is_initialized():
            torch.cuda.empty_cache()


ENGINES: dict[str, Engine] = {}


def register(engine: Engine) -> Engine:
    """Add ``engine`` to :data:`ENGINES` under its name.

    Raises:
        ValueError: another engine, or a backend, has that name (``--modes`` names one or the other; a plugin never
            replaces one silently).
    """
    if engine.name in BACKENDS:
        raise ValueError(f"mode {engine.name} is registered already (a backend)")
    return put(ENGINES, engine.name, engine, "engine")


def get(name: str) -> Engine:
    """The engine called ``name``.

    Raises:
        ConfigError: no such engine.
    """
    return pick(ENGINES, name, "mode")


def engines(*, steps: bool | None = None) -> tuple[str, ...]:
    """The names of the registered engines, in registration order (those whose ``capabilities.steps`` is
    ``steps``, when given: the engines ``accelbench profile`` can time a single prefill or decode step of)."""
    return tuple(n for n, e in ENGINES.items() if steps is None or e.capabilities.steps == steps)
