"""The records of calls in flight: a handler's ``RequestContext``, an outbound request's ``Pending`` answer, and
the answers to one JSON-RPC batch (an array of requests and notifications), written as one array (``Batch``).

A protocol turns batches on per connection (``JsonRpcPeer.batches``: ACP v2); MCP and ACP v1 answer an array with
one -32600. Each entry is served as a message of its own; the batch's answers (its requests', and -32600 for each
invalid entry) go out together once every request in it is answered; a batch of notifications gets no answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from awaken_stdio.protocols.jsonrpc_wire import ConnectionClosedError, JsonRpcError, RequestId

__all__ = ["Batch", "Caller", "Pending", "RequestContext"]


class Caller(Protocol):
    """What a handler may do with the connection it serves (``JsonRpcPeer``): ask the other side, or tell it."""

    async def request(
        self,
        method: str,
        params: dict[str, Any] | list[Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - as JsonRpcPeer.request
        cancel_method: str | None = None,
    ) -> Any: ...

    async def notify(self, method: str, params: dict[str, Any] | list[Any] | None = None) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """What a handler knows about the message it serves; ``request_id`` is None for a notification."""

    peer: Caller
    method: str
    request_id: RequestId | None


class Pending:
    """An outbound request waiting for its answer."""

    __slots__ = ("error", "event", "result")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.result: Any = None
        self.error: JsonRpcError | None = None


class Batch:
    """Collects the answers of one batch; ``expect`` one per request served, ``done`` when each is answered (and
    once for the batch itself, when every entry is dispatched)."""

    __slots__ = ("_frames", "_open", "_send")

    def __init__(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        self._send = send
        self._frames: list[bytes] = []
        self._open = 1

    def add(self, frame: bytes) -> None:
        self._frames.append(frame.rstrip(b"\n"))

    def expect(self) -> None:
        self._open += 1

    async def done(self) -> None:
        self._open -= 1
        if self._open == 0 and self._frames:
            with suppress(ConnectionClosedError):  # the connection closed meanwhile: nobody is left to answer
                await self._send(b"[" + b",".join(self._frames) + b"]\n")
