"""A JSON-RPC peer's two byte streams, in memory: the HTTP side feeds it one message at a time and is handed every
message it writes, decoded. So the stdio servers (``McpServer``, ``AcpServer``) serve a network connection as they
serve a pipe, framing, concurrency and cancellation included."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc

__all__ = ["Pipe"]

log = logging.getLogger(__name__)

_INBOX = 64  # messages fed and not yet read by the peer before ``feed`` waits


class Pipe:
    """``reader`` and ``writer`` for a peer: ``feed`` a message in, ``close`` for EOF; ``deliver`` gets its output."""

    def __init__(self, deliver: Callable[[dict[str, Any]], None]) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[bytes](_INBOX)
        self.reader: anyio.abc.ByteReceiveStream = _Reader(self._receive)
        self.writer: anyio.abc.ByteSendStream = _Writer(deliver)

    async def feed(self, message: dict[str, Any]) -> None:
        """One message for the peer; raises ``anyio.ClosedResourceError`` once the pipe is closed."""
        await self._send.send(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    def close(self) -> None:
        """End of input: the peer finishes what it serves (within its grace) and returns."""
        self._send.close()


class _Reader(anyio.abc.ByteReceiveStream):
    def __init__(self, stream: anyio.abc.ObjectReceiveStream[bytes]) -> None:
        self._stream = stream

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            return await self._stream.receive()
        except anyio.EndOfStream:
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Writer(anyio.abc.ByteSendStream):
    """Splits what the peer writes (lines, joined in batches) back into messages."""

    def __init__(self, deliver: Callable[[dict[str, Any]], None]) -> None:
        self._deliver = deliver

    async def send(self, item: bytes) -> None:
        for line in item.split(b"\n"):
            if line.strip():
                try:
                    message = json.loads(line)
                except ValueError:  # never: the peer writes JSON
                    log.error("the server wrote a line that is not JSON")
                    continue
                self._deliver(message)

    async def aclose(self) -> None:
        return None
