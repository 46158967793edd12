"""An OpenAI-compatible server as an engine: vLLM, SGLang, TensorRT-LLM, llama.cpp or ``transformers serve``, reached
over HTTP and streamed (``accelbench serve``).

The engine sends one request body and yields one :class:`~accelbench.backends.engine.StreamEvent` a server-sent
event (SSE) chunk; the caller (:mod:`accelbench.scenarios.serve.load`) stamps each event with
``time.perf_counter()`` as it is yielded, right after its line is read. The body asks for a fixed output length in the
words its server understands (:attr:`ServerInfo.flavor`):

| flavor | server | fixed output length |
| --- | --- | --- |
| ``transformers`` | ``transformers serve`` (unknown fields are HTTP 422) | ``generation_config`` ``{"min_new_tokens": N, "max_new_tokens": N}`` (a JSON string), ``max_tokens`` |
| ``vllm`` | vLLM, SGLang (a ``/version`` endpoint) | ``ignore_eos: true``, ``min_tokens: N``, ``max_tokens: N``, ``stream_options.include_usage`` |
| ``openai`` | any other | ``max_tokens: N`` only (the model may stop early: counted as an output-length mismatch) |

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

from accelbench.backends.engine import Capabilities, Engine, StreamEvent
from accelbench.core.errors import ConfigError, MissingDependencyError

SERVE = "serve"  # the workload: an engine of it is driven by ``accelbench serve``, never by ``generate``
APIS = ("completions", "chat")
FLAVORS = ("transformers", "vllm", "openai")
# Connections a pool holds. httpcore's pool scans its connections, and for each idle one the others, every time it
# hands out or takes back a connection (O(connections^2) a request): with many requests in flight, small pools cost
# the client less than half the CPU a request of one large pool (docs/results.md, "The serving client's capacity")
POOL_CONNECTIONS = 8
_SSE_FIELDS = ("event:", "id:", "retry:")  # SSE fields other than data (WHATWG HTML, "Server-sent events")


class ServerError(ConfigError):
    """The server cannot be used: unreachable, or not OpenAI-compatible (one line; exit code 2)."""

    def __init__(self, message: str):
        self.field, self.value, self.allowed = "server", None, ""
        Exception.__init__(self, message)


class RequestError(Exception):
    """One request failed; ``reason`` is its short cause (``http 422``, ``connection``, ``malformed sse``,
    ``server error``), ``detail`` the server's words when it gave any."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


@dataclass(frozen=True, kw_only=True, slots=True)
class ServerInfo:
    """What :meth:`OpenAICompatible.probe` found.

    Attributes:
        base_url: the server's URL without a trailing ``/`` (``http://127.0.0.1:8000``).
        model: the model id requests name (the one asked for, else the first the server lists).
        models: every id ``/v1/models`` lists.
        flavor: ``transformers``, ``vllm`` or ``openai``: how a fixed output length is asked (module docstring).
        version: the server's version when it says (vLLM's ``/version``), else None.
        has_metrics: a Prometheus ``/metrics`` endpoint answers.
    """

    base_url: str
    model: str
    models: tuple[str, ...]
    flavor: str
    version: str | None
    has_metrics: bool


def _httpx():
    try:
        import httpx
    except ImportError as exc:
        raise MissingDependencyError("httpx", "serve") from exc
    return httpx


def _flavor(client: Any) -> tuple[str, str | None]:
    """``(flavor, version)`` from the server's own endpoints: ``transformers serve`` lists ``/load_model`` in its
    OpenAPI schema; vLLM and SGLang answer ``/version`` with ``{"version": ...}``."""
    with contextlib.suppress(Exception):
        paths = client.get("/openapi.json").json().get("paths", {})
        if "/load_model" in paths and "/v1/completions" in paths:
            return "transformers", None
    with contextlib.suppress(Exception):
        version = client.get("/version").json().get("version")
        if isinstance(version, str):
            return "vllm", version
    return "openai", None


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


def parse_sse_line(line: str) -> dict[str, Any] | None:
    """One line of an SSE stream: the JSON object of a ``data:`` line; :data:`DONE` for ``data: [DONE]`` (the
    stream's end); None for a blank line, a comment or another SSE field.

    Raises:
        RequestError: ``malformed sse``: a line that is none of these, or data that is not a JSON object.
    """
    if not line or line.startswith(":") or line.startswith(_SSE_FIELDS):
        return None
    if not line.startswith("data:"):
        raise RequestError("malformed sse", line[:200])
    data = line[5:].strip()
    if data == "[DONE]":
        return DONE
    try:
        obj = json.loads(data)
    except ValueError:
        raise RequestError("malformed sse", data[:200]) from None
    if not isinstance(obj, dict):
        raise RequestError("malformed sse", data[:200])
    return obj


DONE: dict[str, Any] = {}  # parse_sse_line's answer to ``data: [DONE]`` (compared by identity)


def chunk_event(chunk: dict[str, Any], api: str) -> StreamEvent:
    """The :class:`StreamEvent` of one parsed chunk (completions: ``choices[0].text``; chat:
    ``choices[0].delta.content``; ``usage`` when the chunk carries it). A choice whose text field is present counts
    as output even when the text is empty (vLLM's ``benchmarks/lib/endpoint_request_func.py`` times every chunk with
    ``choices``), but for a chat stream's role announcement (``role`` with empty content) and an empty chunk that
    only closes the choice (``finish_reason`` set).

    Raises:
        RequestError: ``server error``: the chunk is an error object (vLLM reports a failure mid-stream so).
    """
    if "error" in chunk and "choices" not in chunk:
        err = chunk["error"]
        raise RequestError("server error", str(err.get("message", err) if isinstance(err, dict) else err)[:300])
    choices = chunk.get("choices") or [{}]
    choice = choices[0] if isinstance(choices[0], dict) else {}
    part = (choice.get("delta") or {}) if api == "chat" else choice
    raw = part.get("content" if api == "chat" else "text")
    text = raw if isinstance(raw, str) else ""
    closing = choice.get("finish_reason") is not None or (api == "chat" and "role" in part)
    usage = chunk.get("usage")
    return StreamEvent(
        text=text,
        usage=usage if isinstance(usage, dict) else None,
        finish_reason=choice.get("finish_reason"),
        output=isinstance(raw, str) and (bool(text) or not closing),
    )


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
        model: the model id requests name; None: the first one the server lists.
        api: ``completions`` (``/v1/completions``, a ``prompt``) or ``chat`` (``/v1/chat/completions``, the prompt as
            one user message).
    """

    name = "openai-api"
    about = "an OpenAI-compatible server over HTTP, each request streamed (SSE)"
    workloads = (SERVE,)
    capabilities = Capabilities(in_process=False, steps=False, streams=True, compiles=False, weight_only_kernels=False)
    requires = ("httpx",)

    def __init__(self, base_url: str = "http://127.0.0.1:8000", model: str | None = None, api: str = "completions"):
        if api not in APIS:
            raise ConfigError("api", api, ", ".join(APIS))
        url = base_url.rstrip("/")
        self.base_url = url[: -len("/v1")] if url.endswith("/v1") else url
        self.model, self.api = model, api
        self.info: ServerInfo | None = None
        self._pools: _Pools | None = None

    @property
    def path(self) -> str:
        """The endpoint requests are posted to."""
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def probe(self, timeout_s: float = 10.0) -> ServerInfo:
        """Ask the server what it serves (``/v1/models``), which flavor it is and whether it has ``/metrics``.

        Raises:
            ServerError: unreachable within ``timeout_s``, not OpenAI-compatible (``/v1/models`` does not answer a
                model list), no model listed and none asked, or the asked model is not among those listed (except
                by ``transformers serve``, which loads a model on its first request).
        """
        httpx = _httpx()
        with httpx.Client(base_url=self.base_url, timeout=timeout_s) as client:
            try:
                r = client.get("/v1/models")
            except httpx.HTTPError as exc:
                raise ServerError(f"cannot reach {self.base_url}: {type(exc).__name__} {exc}".strip()) from None
            try:
                ids = tuple(m["id"] for m in r.json()["data"]) if r.status_code == 200 else None
            except (ValueError, KeyError, TypeError):
                ids = None
            if ids is None:
                raise ServerError(
                    f"{self.base_url} is not an OpenAI-compatible server: GET /v1/models answered "
                    f"HTTP {r.status_code}, not a model list"
                )
            if self.model is None and not ids:
                raise ServerError(f"{self.base_url} lists no model: name the one requests ask for (--model)")
            flavor, version = _flavor(client)
            # transformers serve loads an unlisted model on its first request (it lists only those loaded or cached)
            if self.model is not None and ids and self.model not in ids and flavor != "transformers":
                raise ServerError(f"{self.base_url} does not serve {self.model!r}: it lists {', '.join(ids)}")
            self.info = ServerInfo(
                base_url=self.base_url,
                model=self.model or ids[0],
                models=ids,
                flavor=flavor,
                version=version,
                has_metrics=_has_metrics(client),
            )
        return self.info

    def body(self, prompt: str, output_len: int | None) -> dict[str, Any]:
        """The streamed request of ``prompt`` asking exactly ``output_len`` output tokens the way the server's flavor
        understands (module docstring); ``output_len`` None: as many as the server decides. Probes first if
        :meth:`probe` has not run."""
        info = self.info or self.probe()
        body: dict[str, Any] = {"model": info.model, "stream": True}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if info.flavor != "transformers":  # transformers serve ignores it and always sends usage last
            body["stream_options"] = {"include_usage": True}
        if output_len is None:
            return body
        body["max_tokens"] = output_len
        if info.flavor == "transformers":
            body["generation_config"] = json.dumps({"min_new_tokens": output_len, "max_new_tokens": output_len})
        elif info.flavor == "vllm":
            body.update(ignore_eos=True, min_tokens=output_len)
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
            try:
                async with client.stream("POST", self.path, json=request) as r:
                    if r.status_code >= 400:
                        raise _error_reason(r.status_code, (await r.aread()).decode(errors="replace"))
                    done = False
                    async for line in r.aiter_lines():
                        # after [DONE] the rest of the response is read, not dropped: a response closed unread
                        # closes its connection, and every request would then pay a new TCP connection
                        chunk = None if done else parse_sse_line(line.rstrip("\r"))
                        done = done or chunk is DONE
                        if chunk is not None and chunk is not DONE:
                            yield chunk_event(chunk, self.api)
            except httpx.TimeoutException as exc:
                raise RequestError("timeout", type(exc).__name__) from None
            except httpx.HTTPError as exc:
                raise RequestError("connection", f"{type(exc).__name__} {exc}".strip()) from None
