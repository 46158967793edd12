"""The server-kind table's types and registry (:mod:`accelbench.backends.servers` documents the kinds)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True, slots=True)
class Metrics:
    """The ``/metrics`` series of a kind that mean one thing (None: the kind has no such series).

    Attributes:
        running, waiting: gauges of the requests being served and queued.
        kv_cache: a gauge of the KV cache's use (a fraction of it).
        prompt_tokens, output_tokens: counters of the tokens prefilled and generated.
    """

    running: str | None = None
    waiting: str | None = None
    kv_cache: str | None = None
    prompt_tokens: str | None = None
    output_tokens: str | None = None

    @property
    def timeline(self) -> tuple[str, ...]:
        """The gauges drawn over a level's time (queue and cache)."""
        return tuple(s for s in (self.running, self.waiting, self.kv_cache) if s)


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchRequest:
    """What a built-in launch is asked for.

    Attributes:
        model: accelbench's model (``hf:<architecture>``, ``hf:/folder``, a kind's own file such as ``X.gguf``).
        cache_dir: where written checkpoints are kept (beside the store).
        device: the torch device the server runs on (random weights are drawn there).
        port: the port of ``127.0.0.1`` it listens on.
        seed: of random weights.
        precision: the served precision (one of the kind's :attr:`ServerKind.precisions`), None: its default.
        parallel: the most requests in flight a level sends (a server with fixed slots gets this many).
        tokens_per_request: the longest request's prompt plus output tokens (a slot's context).
        continuous_batching: ask for it where it is an option.
        server_bin: the server's binary where the kind runs one (``--server-bin``).
    """

    model: str
    cache_dir: Path
    device: Any
    port: int
    seed: int = 0
    precision: str | None = None
    parallel: int = 1
    tokens_per_request: int = 2048
    continuous_batching: bool = True
    server_bin: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class LaunchPlan:
    """A built-in launch, ready to start.

    Attributes:
        command: the shell command line (``exec``-ed: the server leads its group).
        env: environment entries on top of accelbench's.
        model_id: the id requests name.
        tokenizer_dir: the folder of the tokenizer that counts the server's tokens (None: the model's own).
        precision: the precision it serves; version: the server's version where known before it starts.
        weights: what the weights are (``random``, the bundled model, a folder or file).
    """

    command: str
    env: dict[str, str] = field(default_factory=dict)
    model_id: str
    tokenizer_dir: Path | None = None
    precision: str | None = None
    version: str | None = None
    weights: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerKind:
    """One kind of OpenAI-compatible server (module docstring).

    Attributes:
        name: the kind's name (``--engine NAME``; the rows' ``server_engine``).
        about: one line.
        fixed_length: the body fields asking exactly N output tokens.
        detect: ``client -> (is this kind, version)`` from the server's own endpoints (an ``httpx.Client``); None:
            the fallback, always this kind.
        usage_option: takes ``stream_options.include_usage`` (``transformers serve`` refuses unknown fields with
            HTTP 422, and sends usage last anyway).
        loads_on_request: loads a model it does not list on the first request naming it.
        extra_body: fields every request to it carries (llama.cpp: ``cache_prompt`` false, since a level sends the
            prompts an earlier level sent, and a server that kept their KV cache would skip their prefill).
        keep_alive: reuses a connection after a streamed response (llama.cpp's closes it, while its header says
            keep-alive: a client that reused it would race the close, so each request asks for its own).
        banned_tokens: the body fields that keep ids from being sampled, for a random-weight model whose tokens
            must be whole UTF-8 (llama.cpp ends a stream on text that is not); None: not needed.
        metrics: its ``/metrics`` series.
        checkpoint: what ``--engine`` writes for it (None: no built-in launch).
        precisions: the served precisions of its built-in launch (bits a weight each), the first its default;
            cpu_precision: its default on a CPU, where another.
        launch: ``LaunchRequest -> LaunchPlan`` of its built-in launch (None: started by ``--launch`` or by hand).
        requires: modules its built-in launch imports (found, not imported, before anything runs).
        binary: the program its built-in launch runs (``--server-bin`` names it), None: a Python module's.
        preflight: ``serve settings -> None``, raising what would stop its launch (no binary) before anything runs.
    """

    name: str
    about: str
    fixed_length: Callable[[int], dict[str, Any]]
    detect: Callable[[Any], tuple[bool, str | None]] | None = None
    usage_option: bool = True
    loads_on_request: bool = False
    extra_body: dict[str, Any] = field(default_factory=dict)
    keep_alive: bool = True
    banned_tokens: Callable[[tuple[int, ...]], dict[str, Any]] | None = None
    metrics: Metrics = Metrics()
    checkpoint: str | None = None
    precisions: dict[str, float] = field(default_factory=dict)
    cpu_precision: str | None = None
    launch: Callable[[LaunchRequest], LaunchPlan] | None = None
    requires: tuple[str, ...] = ()
    binary: str | None = None
    preflight: Callable[[Any], None] | None = None

    def precision(self, name: str | None, device_type: str) -> str | None:
        """The served precision ``name`` (None: the kind's default: :attr:`cpu_precision` on a CPU where it has one,
        else its first).

        Raises:
            ConfigError: a precision the kind's launch does not serve.
        """
        if not self.precisions:
            return name
        if name is None:
            return self.cpu_precision if device_type == "cpu" and self.cpu_precision else next(iter(self.precisions))
        if name not in self.precisions:
            raise ConfigError("served_precision", name, f"one of {', '.join(self.precisions)} for {self.name}")
        return name


KINDS: dict[str, ServerKind] = {}


def register(kind: ServerKind) -> ServerKind:
    """Add ``kind`` to :data:`KINDS` (the fallback, ``detect`` None, last)."""
    KINDS[kind.name] = kind
    fallback = [k for k in KINDS.values() if k.detect is None]
    for k in fallback:
        KINDS.pop(k.name)
        KINDS[k.name] = k
    return kind


def get(name: str) -> ServerKind:
    """The kind ``name``.

    Raises:
        ConfigError: no such kind.
    """
    if name not in KINDS:
        raise ConfigError("engine", name, ", ".join(KINDS))
    return KINDS[name]


def launchable() -> tuple[str, ...]:
    """The kinds accelbench can start itself (``--engine``)."""
    return tuple(n for n, k in KINDS.items() if k.launch is not None)


def detect(client: Any) -> tuple[ServerKind, str | None]:
    """``(kind, version)`` of the server ``client`` (an ``httpx.Client`` at its base URL) talks to: the first of
    :data:`KINDS` whose ``detect`` recognises it; a probe that fails is a no."""
    for kind in KINDS.values():
        if kind.detect is None:
            return kind, None
        try:
            found, version = kind.detect(client)
        except Exception:  # an endpoint it lacks, or an answer of another shape: not this kind
            continue
        if found:
            return kind, version
    raise LookupError("no fallback server kind registered")


def random_weight_bans(tokenizer: Any) -> tuple[int, ...]:
    """The ids of ``tokenizer`` (a ``transformers`` fast tokenizer) whose bytes are not whole UTF-8: what a
    random-weight model must not sample on a kind that ends a stream on text that is not whole UTF-8
    (:attr:`ServerKind.banned_tokens`; :func:`accelbench.backends.servers.llamacpp.vocab.incomplete_utf8_ids`).
    ``()`` for a tokenizer without a ``tokenizer.json`` document."""
    import json

    from accelbench.backends.servers.llamacpp.vocab import incomplete_utf8_ids

    backend = getattr(tokenizer, "backend_tokenizer", None)
    return incomplete_utf8_ids(json.loads(backend.to_str())) if backend is not None else ()


def served_bytes_per_weight(kind_name: str | None, precision: str | None) -> float | None:
    """Bytes one weight takes in ``precision`` as kind ``kind_name`` serves it (Q8_0: 8.5 bits), or None where the
    kind does not say."""
    kind = KINDS.get(kind_name or "")
    bits = kind.precisions.get(precision or "") if kind is not None else None
    return bits / 8 if bits else None
