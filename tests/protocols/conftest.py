"""In-memory wiring for ``JsonRpcPeer`` tests: the test plays the client on the far end of two byte pipes."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.jsonrpc import JsonRpcPeer


class MemoryReader(anyio.abc.ByteReceiveStream):
    def __init__(self, stream: MemoryObjectReceiveStream[bytes]) -> None:
        self.stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self.stream.receive()

    async def aclose(self) -> None:
        await self.stream.aclose()


class MemoryWriter(anyio.abc.ByteSendStream):
    """Counts writes, so tests can see the peer batching lines."""

    def __init__(self, stream: MemoryObjectSendStream[bytes]) -> None:
        self.stream = stream
        self.writes = 0

    async def send(self, item: bytes) -> None:
        self.writes += 1
        await self.stream.send(item)

    async def aclose(self) -> None:
        await self.stream.aclose()


class Wire:
    """The client's end of a connection to a peer, with line framing and bounded waits."""

    def __init__(self) -> None:
        self.to_peer, to_peer_rx = anyio.create_memory_object_stream[bytes](math.inf)
        from_peer_tx, self.from_peer = anyio.create_memory_object_stream[bytes](math.inf)
        self.reader = MemoryReader(to_peer_rx)
        self.writer = MemoryWriter(from_peer_tx)
        self._buffer = b""
        self.raw_lines: list[bytes] = []

    async def send(self, message: Any) -> None:
        await self.send_raw(json.dumps(message).encode() + b"\n")

    async def send_raw(self, data: bytes) -> None:
        await self.to_peer.send(data)

    def close_input(self) -> None:
        self.to_peer.close()

    async def receive_line(self, timeout: float = 2.0) -> bytes:
        with anyio.fail_after(timeout):
            while b"\n" not in self._buffer:
                self._buffer += await self.from_peer.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.raw_lines.append(line)
        return line

    async def receive(self, timeout: float = 2.0) -> dict[str, Any]:
        message = json.loads(await self.receive_line(timeout))
        assert isinstance(message, dict)
        return message

    async def request(self, id: Any, method: str, params: Any = None) -> dict[str, Any]:
        """Send a request and return the next message, which must be its answer."""
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            frame["params"] = params
        await self.send(frame)
        answer = await self.receive()
        assert answer.get("id") == id, answer
        return answer

    async def assert_silent(self, duration: float = 0.05) -> None:
        with anyio.move_on_after(duration):
            line = await self.receive_line(timeout=duration * 2)
            raise AssertionError(f"unexpected output {line!r}")

    def read_available(self) -> list[dict[str, Any]]:
        """Every whole line written so far, without waiting (for after ``run`` has returned)."""
        self.drain()
        *lines, self._buffer = self._buffer.split(b"\n")
        self.raw_lines.extend(lines)
        return [json.loads(line) for line in lines]

    def drain(self) -> None:
        while True:
            try:
                self._buffer += self.from_peer.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                return

    def close(self) -> None:
        for stream in (self.to_peer, self.reader.stream, self.writer.stream, self.from_peer):
            stream.close()


Serve = Callable[..., AbstractAsyncContextManager[Wire]]


@asynccontextmanager
async def _serving(peer: JsonRpcPeer, *, timeout: float = 5.0) -> AsyncIterator[Wire]:
    """Run ``peer`` against a fresh ``Wire``; on exit close its input and wait for ``run`` to return."""
    wire = Wire()
    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                await tg.start(peer.run, wire.reader, wire.writer)
                yield wire
                wire.close_input()
    finally:
        wire.drain()  # keep what the peer wrote last, for the test to read after run() returned
        wire.close()


@pytest.fixture
def serve() -> Serve:
    return _serving
