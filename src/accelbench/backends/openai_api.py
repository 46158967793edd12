"""An OpenAI-compatible server as an engine: vLLM, SGLang, TensorRT-LLM, llama.cpp or ``transformers serve``, reached
over HTTP and streamed (``accelbench serve``).

The engine sends one request body and yields one :class:`~accelbench.backends.engine.StreamEvent` a server-sent
event (SSE) chunk; the caller (:mod:`accelbench.scenarios.serve.load`) stamps each event with
``time.perf_counter()`` as it is yielded, right after its line is read. The body asks for a fixed output length in the
words its server understands: the probe finds the server's kind (:func:`accelbench.backends.servers.detect`), and the
kind's entry says how (:data:`accelbench.backends.servers.KINDS`: transformers, llama.cpp, SGLang, vLLM, any other).

Which model requests name is the user's (``--served-model-name``), a guess from accelbench's model (a checkpoint
folder's path), or the one the server lists (:meth:`OpenAICompatible.probe`). A server whose ``/v1/models`` lists
nothing or fails (``transformers serve`` started without a model) is checked by one short completion of the named model
instead. The response streams are parsed by :mod:`accelbench.backends.openai_stream`.

Not registered in :data:`accelbench.backends.BACKENDS`: the registry's listings (``accelbench backends``, help, the
generated tables of ``docs/reference.md`` and the table of ``accelbench/backends/__init__.py``, which
``tests/test_registries.py`` checks against the registry) describe engines a model runs in; a server is named by its
URL, not by a mode, so ``accelbench serve`` constructs this engine itself.

``httpx`` is imported inside the methods (the ``serve`` extra), so importing this module costs nothing.
"""

from __future__ import annotations

import collections
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from accelbench.backends import servers
from accelbench.backends.engine import Capabilities, Engine, StreamEvent
from accelbench.backends.openai_stream import DONE, RequestError, chunk_event, events, parse_sse_line
from accelbench.core.errors import ConfigError, MissingDependencyError

__all__ = ["DONE", "OpenAICompatible", "RequestError", "ServerError", "ServerInfo", "chunk_event", "parse_sse_line"]

SERVE = "serve"  # the workload: an engine of it is driven by ``accelbench serve``, never by ``generate``
APIS = ("completions", "chat")


# Connections a pool holds. httpcore's pool scans its connections, and for each idle one the others, every time it
# hands out or takes back a connection (O(connections^2) a request): with many requests in flight, small pools cost
# the client less than half the CPU a request of one large pool (docs/results.md, "The serving client's capacity")
POOL_CONNECTIONS = 8
CLOSE = {"Connection": "close"}  # a request to a server that closes its connection after a streamed response


class ServerError(ConfigError):
    """The server cannot be used: unreachable, or not OpenAI-compatible (one line; exit code 2).

    Attributes:
        definitive: the server answered, and will not answer otherwise by waiting (a launch stops waiting at once).
    """

    def __init__(self, message: str, definitive: bool = False):
        self.field, self.value, self.allowed, self.definitive = "server", None, "", definitive
        Exception.__init__(self, message)


class NoModelError(ServerError):
    """The server lists no model and none is named (``--served-model-name``)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerInfo:
    """What :meth:`OpenAICompatible.probe` found.

    Attributes:
        base_url: the server's URL without a trailing ``/`` (``http://127.0.0.1:8000``).
        model: the model id requests name (the one named, else the first the server lists).
        models: every id ``/v1/models`` lists (empty when it lists none or failed).
        listing: what ``/v1/models`` answered: ``HTTP 200, N models`` or ``HTTP 500, not a model list``.
        kind: the server's kind (:data:`accelbench.backends.servers.KINDS`' name): how a fixed output length is asked.
        version: the server's version when it says (vLLM's ``/version``, llama.cpp's ``/props``), else None.
        has_metrics: a Prometheus ``/metrics`` endpoint answers.
    """

    base_url: str
    model: str
    models: tuple[str, ...]
    listing: str = "HTTP 200"
    kind: str
    version: str | None
    has_metrics: bool


def request_model(served_model_name: str | None, model: str | None) -> tuple[str | None, tuple[str, ...] | None]:
    """``(model, guess)`` of :class:`OpenAICompatible` for accelbench's model ``model`` (``-m``) and the server's
    id ``served_model_name``: the id named; a name that is not accelbench's (no ``hf:``) as the id (vLLM serves a
    model under the name it was started with); for a checkpoint folder (``hf:PATH``), its path as typed and resolved
    as guesses (``vllm serve PATH`` and ``transformers serve`` name a folder's model by its path); else none (the
    server's own).
    """
    if served_model_name:
        return served_model_name, None
    if not model:
        return None, None
    from accelbench.models import hf

    if not hf.is_lm_name(model):
        return model, None
    folder = hf.checkpoint_dir(model)
    if folder is None:
        return None, None
    typed = model[len(hf.PREFIX) :]
    return None, tuple(dict.fromkeys((typed, str(folder.resolve()))))


def _httpx():
    try:
        import httpx
    except ImportError as exc:
        raise MissingDependencyError("httpx", "serve") from exc
    return httpx


def _listing(r: Any) -> tuple[tuple[str, ...] | None, str]:
    """The ids a ``GET /v1/models`` response lists (None: not a model list) and a few words saying what it was."""
    try:
        ids = tuple(str(m["id"]) for m in r.json()["data"]) if r.status_code == 200 else None
    except (ValueError, KeyError, TypeError):
        ids = None
    if ids is None:
        return None, f"HTTP {r.status_code}, not a model list"
    return ids, f"HTTP 200, {len(ids)} model{'s' if len(ids) != 1 else ''}"


def _has_metrics(client: Any) -> bool:
    with contextlib.suppress(Exception):
        r = client.get("/metrics")
        return r.status_code == 200 and "# TYPE" in r.text
    return False


def _error_reason(status: int, text: str) -> RequestError:
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        body = json.loads(text)
        detail = body.get("detail") or body.get("error") or body.get("message")
        if detail is not None:
            text = detail if isinstance(detail, str) else json.dumps(detail)
    return RequestError(f"http {status}", " ".join(text.split())[:300] or None)


def _ssl_context() -> Any:
    import ssl

    try:
        import certifi  # httpx's own certificate bundle

        return ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        return ssl.create_default_context()


class _Pools:
    """``httpx.AsyncClient`` s of :data:`POOL_CONNECTIONS` connections each, lent one request at a time: a free list
    holds a pool once a free connection, and a pool is made when the list is empty."""

    def __init__(self, make: Any):
        self._make, self._clients, self._free = make, [], collections.deque()

    def _grow(self) -> None:
        client = self._make()
        self._clients.append(client)
        self._free.extend([client] * POOL_CONNECTIONS)

    def reserve(self, connections: int) -> None:
        """Make the pools ``connections`` requests in flight need now, not during the measured requests."""
        while len(self._clients) * POOL_CONNECTIONS < connections:
            self._grow()

    def lend(self) -> Any:
        if not self._free:
            self._grow()
        return self._free.popleft()

    def give_back(self, client: Any) -> None:
        self._free.append(client)

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


class OpenAICompatible(Engine):
    """A server speaking the OpenAI completions or chat completions API (see the module docstring).

    Args:
        base_url: the server's URL (``http://host:port``; a trailing ``/v1`` is dropped).
        model: the model id requests name (``--served-model-name``); None: ``guess``'s where the server lists it (or
            lists none), else the first one the server lists.
        guess: ids the model may be served under (a checkpoint folder's path as typed and resolved), tried in order.
        banned_ids: token ids never to sample (a random-weight model's tokens that are not whole UTF-8, for a kind
            that ends a stream on such text: :attr:`accelbench.backends.servers.ServerKind.banned_tokens`).
        api: ``completions`` (``/v1/completions``, a ``prompt``) or ``chat`` (``/v1/chat/completions``, the prompt as
            one user message).
    """

    name = "openai-api"
    about = "an OpenAI-compatible server over HTTP, each request streamed (SSE)"
    workloads = (SERVE,)
    capabilities = Capabilities(in_process=False, steps=False, streams=True, compiles=False, weight_only_kernels=False)
    requires = ("httpx",)

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        model: str | None = None,
        api: str = "completions",
        guess: tuple[str, ...] | None = None,
        banned_ids: tuple[int, ...] = (),
    ):
        if api not in APIS:
            raise ConfigError("api", api, ", ".join(APIS))
        url = base_url.rstrip("/")
        self.base_url = url[: -len("/v1")] if url.endswith("/v1") else url
        self.model, self.api, self.guess, self.banned_ids = model, api, guess or None, tuple(banned_ids)
        self.info: ServerInfo | None = None
        self._pools: _Pools | None = None

    @property
    def path(self) -> str:
        """The endpoint requests are posted to."""
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def probe(self, timeout_s: float = 10.0, check_timeout_s: float | None = None) -> ServerInfo:
        """Ask the server what it serves (``/v1/models``), which kind it is and whether it has ``/metrics``.

        A server whose ``/v1/models`` fails or does not list the model (``transformers serve`` lists only the models
        it has loaded or finds in its hub cache, and answers HTTP 500 without a cache) is still used when the model
        is named (``model``, or the ``guess`` from accelbench's own model): one short real completion of it
        (``max_tokens`` 1, not streamed) decides. What ``/v1/models`` answered is kept in ``ServerInfo.listing``.

        Args:
            timeout_s: of each probing request.
            check_timeout_s: of the completion that checks an unlisted model (a server may load it on that request);
                None: ``max(timeout_s, 120)``.

        Raises:
            ServerError: unreachable within ``timeout_s``; no model listed and none named (:class:`NoModelError`); the
                named model is not among those listed (but by a server that loads a model on request); the check's
                completion failed.
        """
        httpx = _httpx()
        with httpx.Client(base_url=self.base_url, timeout=timeout_s) as client:
            try:
                r = client.get("/v1/models")
            except httpx.HTTPError as exc:
                raise ServerError(f"cannot reach {self.base_url}: {type(exc).__name__} {exc}".strip()) from None
            ids, listing = _listing(r)
            kind, version = servers.detect(client)
            model = self._pick(ids, listing, kind, r.status_code)
            if ids is None or model not in ids:
                model = self._first_answering(client, model, listing, check_timeout_s or max(timeout_s, 120.0))
            self.info = ServerInfo(
                base_url=self.base_url,
                model=model,
                models=ids or (),
                listing=listing,
                kind=kind.name,
                version=version,
                has_metrics=_has_metrics(client),
            )
        return self.info

    def _pick(self, ids: tuple[str, ...] | None, listing: str, kind: servers.ServerKind, status: int) -> str:
        """The model id requests name: the one named, else the guess where the server lists it (or lists none, or
        loads models on request), else the only one listed."""
        loads = kind.loads_on_request
        if self.model is not None:
            if ids and self.model not in ids and not loads:
                raise ServerError(
                    f"{self.base_url} does not serve {self.model!r}: it lists {', '.join(ids)} (--served-model-name)"
                )
            return self.model
        if self.guess is not None:
            known = [g for g in self.guess if ids and g in ids]
            if known or not ids or loads:
                return known[0] if known else self.guess[0]
        if ids and (len(ids) == 1 or self.guess is None):
            return ids[0]
        if ids:
            raise ServerError(
                f"{self.base_url} lists {', '.join(ids)}, not {self.guess[0]!r}: name the one requests ask for "
                "(--served-model-name)"
            )
        what = "lists no model" if ids is not None else "is not an OpenAI-compatible server, or lists no model"
        raise NoModelError(
            f"{self.base_url} {what} (GET /v1/models: {listing}): name the model requests ask for "
            "(--served-model-name NAME; a short completion then checks it)",
            definitive=status not in (502, 503, 504),
        )

    def _first_answering(self, client: Any, model: str, listing: str, timeout_s: float) -> str:
        """``model`` if one short completion of it answers, else the first of the later :attr:`guess` ids that does
        (``transformers serve`` started without a model loads the one a request names: a folder by its resolved
        path, not by the name typed after ``hf:``).

        Raises:
            ServerError: none answered; the error of ``model``'s completion.
        """
        later = (
            self.guess[self.guess.index(model) + 1 :]
            if self.model is None and self.guess and model in self.guess
            else ()
        )
        try:
            self._check_completion(client, model, listing, timeout_s)
            return model
        except ServerError as first:
            for other in later:  # a fresh connection: a server may close its connection after an error
                with contextlib.suppress(ServerError), _httpx().Client(base_url=self.base_url) as fresh:
                    self._check_completion(fresh, other, listing, timeout_s)
                    return other
            raise first

    def _check_completion(self, client: Any, model: str, listing: str, timeout_s: float) -> None:
        """One short real completion of ``model`` (``max_tokens`` 1, not streamed).

        Raises:
            ServerError: no answer, or not a completion (``definitive`` for a 4xx refusal).
        """
        body: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": False}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": "Hello"}]
        else:
            body["prompt"] = "Hello"
        httpx = _httpx()
        where = f"{self.base_url} (GET /v1/models: {listing})"
        try:
            r = client.post(self.path, json=body, timeout=timeout_s)
        except httpx.HTTPError as exc:
            raise ServerError(f"{where} did not answer a completion of {model!r}: {type(exc).__name__}") from None
        try:
            ok = r.status_code == 200 and isinstance(r.json().get("choices"), list)
        except (ValueError, AttributeError):
            ok = False
        if not ok:
            err = _error_reason(r.status_code, r.text) if r.status_code >= 400 else RequestError("not a completion")
            refused = 400 <= r.status_code < 500 and r.status_code not in (408, 429)
            raise ServerError(
                f"{where} did not answer a completion of {model!r} (--served-model-name): {err}", definitive=refused
            )

    def body(self, prompt: str, output_len: int | None) -> dict[str, Any]:
        """The streamed request of ``prompt`` asking exactly ``output_len`` output tokens the way the server's kind
        understands (module docstring), the :attr:`banned_ids` never sampled where the kind must be told; ``output_len``
        None: as many as the server decides. Probes first if :meth:`probe` has not run."""
        info = self.info or self.probe()
        body: dict[str, Any] = {"model": info.model, "stream": True}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        kind = servers.get(info.kind)
        body.update(kind.extra_body)
        if kind.usage_option:
            body["stream_options"] = {"include_usage": True}
        if output_len is not None:
            body.update(kind.fixed_length(output_len))
        if self.banned_ids and kind.banned_tokens is not None:
            body.update(kind.banned_tokens(self.banned_ids))
        return body

    @contextlib.asynccontextmanager
    async def connections(self, limit: int | None = None, timeout_s: float = 600.0) -> AsyncIterator[None]:
        """The connections :meth:`stream` uses while the context is open (a load level opens it once): pools of
        :data:`POOL_CONNECTIONS` kept-alive connections each, made as the requests in flight need them, so no request
        waits for a connection and no pool grows large enough to slow the client.

        Args:
            limit: the most requests the caller keeps in flight: their pools are made at once (None: one pool, and
                more as the requests in flight need them).
            timeout_s: the read timeout of a request (a connection's is at most 30 s).
        """
        httpx = _httpx()
        timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
        limits = httpx.Limits(max_connections=POOL_CONNECTIONS, max_keepalive_connections=POOL_CONNECTIONS)
        verify = _ssl_context() if self.base_url.startswith("https:") else False  # one context for every pool
        pools = _Pools(lambda: httpx.AsyncClient(base_url=self.base_url, limits=limits, timeout=timeout, verify=verify))
        pools.reserve(limit or POOL_CONNECTIONS)
        self._pools = pools
        try:
            yield
        finally:
            self._pools = None
            await pools.aclose()

    async def stream(self, request: dict[str, Any]) -> AsyncIterator[StreamEvent]:  # type: ignore[override]
        """Post ``request`` and yield an event a data chunk as its line is read, until ``data: [DONE]`` or the end of
        the response.

        Raises:
            RequestError: ``http <status>`` (the server refused it), ``connection`` (no connection, or it broke),
                ``timeout``, ``malformed sse``, ``server error`` (an error object in the stream).
        """
        httpx = _httpx()
        async with contextlib.AsyncExitStack() as stack:
            if self._pools is not None:
                client = self._pools.lend()
                stack.callback(self._pools.give_back, client)
            else:
                client = await stack.enter_async_context(httpx.AsyncClient(base_url=self.base_url, timeout=600.0))
            kind = servers.KINDS.get(self.info.kind) if self.info is not None else None
            headers = None if kind is None or kind.keep_alive else CLOSE
            try:
                async with client.stream("POST", self.path, json=request, headers=headers) as r:
                    if r.status_code >= 400:
                        raise _error_reason(r.status_code, (await r.aread()).decode(errors="replace"))
                    async for event in events(r, self.api):
                        yield event
            except httpx.TimeoutException as exc:
                raise RequestError("timeout", type(exc).__name__) from None
            except httpx.HTTPError as exc:
                raise RequestError("connection", f"{type(exc).__name__} {exc}".strip()) from None
