"""A local HTTP/1.1 server that plays scripted replies in the OpenAI and Anthropic wire formats.

It runs its own asyncio loop in a thread, so the client under test (the real SDK) shares nothing with it but a TCP
connection on 127.0.0.1. Streams are sent as server-sent events, one chunked-encoding chunk per event, written and
drained one at a time. Each request takes the next queued :class:`Reply` (``repeat`` answers once the queue is
empty); every request is recorded, and ``dropped`` is set when a client hangs up while a reply is held back. An
error inside the server fails the ``with`` block that ran it.
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import json
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from awaken_stdio.contract.inference import StreamAccumulator, StreamChunk, StreamResult

__all__ = [
    "DONE",
    "FakeServer",
    "Reply",
    "Seen",
    "anthropic_error",
    "anthropic_text",
    "assemble",
    "block_delta",
    "block_start",
    "block_stop",
    "chat_chunk",
    "chat_text",
    "chat_usage",
    "message_delta",
    "message_start",
    "message_stop",
    "openai_error",
    "response_event",
    "responses_completed",
    "sse",
]


_PHRASES = {status.value: status.phrase for status in http.HTTPStatus}


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: an SSE stream (``events``) or a JSON ``body``."""

    status: int = 200
    events: Sequence[bytes] = ()
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    headers_delay_s: float = 0.0  # hold back the whole response: a slow first byte
    events_delay_s: float = 0.0  # send the headers, then hold back the first event
    cut_after: int | None = None  # send this many events, then drop the connection


@dataclass(frozen=True, slots=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeServer:
    """``with FakeServer(Reply(...)) as server:`` serves on ``server.url`` until the block ends."""

    def __init__(self, *replies: Reply, repeat: Reply | None = None) -> None:
        self.replies: deque[Reply] = deque(replies)
        self.repeat = repeat
        self.requests: list[Seen] = []
        self.dropped = threading.Event()
        self.errors: list[Exception] = []
        self.connections = 0
        self.first_event_at: list[float] = []  # perf_counter() when each stream's first event was written
        self.port = 0
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def push(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> Self:
        started = threading.Event()
        self._thread = threading.Thread(target=asyncio.run, args=(self._serve(started),), daemon=True)
        self._thread.start()
        if not started.wait(5):
            raise RuntimeError("the fake server did not start")
        return self

    def __exit__(self, *exc_info: type[BaseException] | BaseException | TracebackType | None) -> None:
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
        if self.errors and exc_info[0] is None:
            raise AssertionError(f"the fake server failed: {self.errors[0]!r}") from self.errors[0]

    async def _serve(self, started: threading.Event) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        started.set()
        async with server:
            await self._stop.wait()
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            while await self._exchange(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # the server is stopping; ending normally keeps asyncio from logging the cancelled handler
        except Exception as exc:  # a bug in the server: the test fails when the server stops
            self.errors.append(exc)
        finally:
            self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False when the connection is done."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        request_line, *lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines if line)}
        raw = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(Seen(method, path, headers, json.loads(raw) if raw else None))
        reply = self.replies.popleft() if self.replies else self.repeat
        if reply is None:
            reply = Reply(500, body={"error": {"message": "the fake server has no reply queued", "type": "api_error"}})
        if reply.headers_delay_s and not await self._hold(reader, reply.headers_delay_s):
            return False
        phrase = _PHRASES.get(reply.status, "Error")  # 529 (overloaded) is Anthropic's own
        extra = "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        if not reply.events:
            body = json.dumps(reply.body).encode()
            writer.write(
                f"HTTP/1.1 {reply.status} {phrase}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(body)}\r\n{extra}\r\n".encode()
                + body
            )
            await writer.drain()
            return True
        writer.write(
            f"HTTP/1.1 {reply.status} {phrase}\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
            f"transfer-encoding: chunked\r\n{extra}\r\n".encode()
        )
        await writer.drain()
        if reply.events_delay_s and not await self._hold(reader, reply.events_delay_s):
            return False
        self.first_event_at.append(time.perf_counter())
        for i, event in enumerate(reply.events):
            if i == reply.cut_after:
                writer.transport.abort()
                return False
            writer.write(b"%x\r\n%s\r\n" % (len(event), event))
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _hold(self, reader: asyncio.StreamReader, seconds: float) -> bool:
        """Wait ``seconds`` unless the client hangs up first (then note it and return False)."""
        try:
            data = await asyncio.wait_for(reader.read(1), seconds)
        except TimeoutError:
            return True
        except ConnectionError:
            data = b""
        if not data:
            self.dropped.set()
            return False
        return True


# -- server-sent events ----------------------------------------------------------------------------------------

DONE = b"data: [DONE]\n\n"


def sse(data: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


# -- OpenAI Chat Completions -----------------------------------------------------------------------------------


def chat_chunk(finish: str | None = None, **delta: Any) -> bytes:
    """One ``chat.completion.chunk`` whose single choice carries ``delta`` (and ``finish_reason``)."""
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-test",
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
    )


def chat_usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> bytes:
    """The last chunk when ``stream_options.include_usage`` is set: no choices, the usage."""
    return sse(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "gpt-test",
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
                "completion_tokens_details": {"reasoning_tokens": reasoning},
            },
        }
    )


def chat_text(*parts: str, usage: tuple[int, int] = (10, 5)) -> list[bytes]:
    return [
        chat_chunk(role="assistant", content=""),
        *(chat_chunk(content=p) for p in parts),
        chat_chunk("stop"),
        chat_usage(*usage),
        DONE,
    ]


def openai_error(message: str, type_: str, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


# -- OpenAI Responses ------------------------------------------------------------------------------------------


def response_event(type_: str, seq: int, **fields: Any) -> bytes:
    return sse({"type": type_, "sequence_number": seq, **fields}, event=type_)


def responses_completed(seq: int, output: list[dict[str, Any]], usage: tuple[int, int] = (10, 5)) -> bytes:
    response = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "model": "gpt-test",
        "output": output,
        "incomplete_details": None,
        "error": None,
        "usage": {
            "input_tokens": usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(usage),
        },
    }
    return response_event("response.completed", seq, response=response)


# -- Anthropic Messages ----------------------------------------------------------------------------------------


def message_start(input_tokens: int = 10, cache_read: int = 0, cache_write: int = 0) -> bytes:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
            "output_tokens": 1,
        },
    }
    return sse({"type": "message_start", "message": message}, event="message_start")


def block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_start", "index": index, "content_block": block}, event="content_block_start")


def block_delta(index: int, delta: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_delta", "index": index, "delta": delta}, event="content_block_delta")


def block_stop(index: int) -> bytes:
    return sse({"type": "content_block_stop", "index": index}, event="content_block_stop")


def message_delta(stop_reason: str, output_tokens: int) -> bytes:
    return sse(
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        },
        event="message_delta",
    )


def message_stop() -> bytes:
    return sse({"type": "message_stop"}, event="message_stop")


def anthropic_text(*parts: str, usage: tuple[int, int] = (10, 5)) -> list[bytes]:
    return [
        message_start(usage[0]),
        block_start(0, {"type": "text", "text": ""}),
        sse({"type": "ping"}, event="ping"),
        *(block_delta(0, {"type": "text_delta", "text": p}) for p in parts),
        block_stop(0),
        message_delta("end_turn", usage[1]),
        message_stop(),
    ]


def anthropic_error(type_: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": type_, "message": message}}


def assemble(chunks: list[StreamChunk]) -> StreamResult:
    """The chunks a client streamed, assembled into one result as the runtime does."""
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)
    return acc.result()
