"""The stream of an OpenAI-compatible server's response, parsed (:mod:`accelbench.backends.openai_api`'s engine reads
its responses through :func:`events`): server-sent event (SSE) lines, each ``data:`` chunk one
:class:`~accelbench.backends.engine.StreamEvent`, and the errors a request meets on the way (:class:`RequestError`).
"""

from __future__ import annotations

import codecs
import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

from accelbench.backends.engine import StreamEvent

_SSE_FIELDS = ("event:", "id:", "retry:")  # SSE fields other than data (WHATWG HTML, "Server-sent events")
FIRST_BYTES = 200  # of a response accelbench does not understand, kept as its request's detail


class RequestError(Exception):
    """One request failed; ``reason`` is its short cause (``http 422``, ``connection``, ``malformed sse``,
    ``server error``), ``detail`` the server's words when it gave any."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


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


async def events(r: Any, api: str) -> AsyncIterator[StreamEvent]:
    """The events of a streamed response, read as bytes and split into lines here.

    The text of a chunk may not be valid UTF-8 on its own (a character split across two chunks, as llama.cpp's
    server sends): a line is decoded keeping undecodable bytes as surrogates, and the chunks' texts are joined back
    into characters by one incremental decoder a request. After ``[DONE]`` the rest of the response is read, not
    dropped: a response closed unread closes its connection, and every request would then pay a new TCP connection.

    Raises:
        RequestError: ``malformed sse`` / ``server error`` (:func:`parse_sse_line`, :func:`chunk_event`); ``no output``
            when the response held no chunk of output, with its first :data:`FIRST_BYTES` bytes as the detail.
    """
    text = codecs.getincrementaldecoder("utf-8")(errors="replace")
    head, pending, done, output = b"", b"", False, False
    async for data in r.aiter_bytes():
        if len(head) < FIRST_BYTES:
            head += data[: FIRST_BYTES - len(head)]
        pending += data
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            chunk = None if done else parse_sse_line(raw.rstrip(b"\r").decode("utf-8", "surrogateescape"))
            done = done or chunk is DONE
            if chunk is None or chunk is DONE:
                continue
            event = chunk_event(chunk, api)
            if event.text:
                event = dataclasses.replace(event, text=text.decode(event.text.encode("utf-8", "surrogateescape")))
            output = output or event.output
            yield event
    if pending.strip() and not done:  # a last line without its newline
        chunk = parse_sse_line(pending.rstrip(b"\r").decode("utf-8", "surrogateescape"))
        if chunk is not None and chunk is not DONE:
            event = chunk_event(chunk, api)
            output = output or event.output
            yield event
    if not output:
        raise RequestError("no output", f"the response began {head.decode(errors='replace')!r}" if head else "empty")
