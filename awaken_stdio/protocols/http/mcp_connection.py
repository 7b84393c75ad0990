"""One ``McpServer`` behind HTTP: a 2025-11-25 session (``Mcp-Session-Id``), or one stateless 2026-07-28 request.

The server runs on a :class:`~awaken_stdio.protocols.http.pipe.Pipe` over the app every connection shares. What it
writes is routed here: an answer to the POST that asked it; a progress notification to the POST whose request
carries its token; the list-changed and resource-updated notifications to the session's GET stream; anything else
(logging, elicitation, sampling: what a tool call says while it runs) to the newest POST still waiting, else the GET
stream. Nothing is written to two streams; what has nowhere to go is dropped (and logged at debug level).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.http.pipe import Pipe
from awaken_stdio.protocols.mcp.server import McpServer

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.app.startup import Startup

__all__ = ["Connection", "Stream"]

log = logging.getLogger(__name__)

Stream = MemoryObjectReceiveStream[dict[str, Any]]
_LISTENED = frozenset(
    {
        "notifications/tools/list_changed",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
    }
)


class Connection:
    """An MCP server on a pipe, and the HTTP streams waiting for what it writes."""

    def __init__(self, startup: Startup, app: App) -> None:
        self.pipe = Pipe(self._deliver)
        self.server = McpServer(startup, watch_parent=False, shared=app)
        self._waiting: dict[Any, MemoryObjectSendStream[dict[str, Any]]] = {}
        self._tokens: dict[Any, Any] = {}  # progress token -> the request id that carries it
        self._listener: MemoryObjectSendStream[dict[str, Any]] | None = None
        self.done = anyio.Event()
        self.last_used = anyio.current_time()

    async def run(self) -> None:
        """Serve until the pipe closes; then every stream still waiting ends."""
        try:
            await self.server.run(self.pipe.reader, self.pipe.writer)
        finally:
            self.done.set()
            for stream in [*self._waiting.values(), *([self._listener] if self._listener else [])]:
                stream.close()
            self._waiting.clear()

    @property
    def busy(self) -> bool:
        """Whether a request is in flight or a GET stream is open (an idle session may be ended)."""
        return bool(self._waiting) or self._listener is not None

    async def ask(self, request: dict[str, Any]) -> Stream:
        """Feed a request; the stream yields what the server writes for it and ends after its answer."""
        self.last_used = anyio.current_time()
        request_id = request["id"]
        if request_id in self._waiting:
            raise ValueError("a request with this id is already in flight")
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self._waiting[request_id] = send
        params = request.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        if isinstance(meta, dict) and "progressToken" in meta:
            self._tokens[meta["progressToken"]] = request_id
        try:
            await self.pipe.feed(request)
        except BaseException:
            self._forget(request_id)
            raise
        return receive

    async def tell(self, message: dict[str, Any]) -> None:
        """Feed a notification, or the answer to one of the server's requests."""
        self.last_used = anyio.current_time()
        await self.pipe.feed(message)

    def listen(self) -> Stream | None:
        """The session's GET stream, or None when one is open already."""
        if self._listener is not None or self.done.is_set():
            return None
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self._listener = send
        return receive

    def unlisten(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        self.last_used = anyio.current_time()

    def abandon(self, request_id: Any) -> None:
        """The client closed the stream of ``request_id``: its answer, when it comes, goes nowhere."""
        self._forget(request_id)

    def cancel(self) -> None:
        """Stop at once: calls in flight are cancelled (a stateless request whose client went away)."""
        self.server.peer.close(grace_s=0)
        self.pipe.close()

    def close(self) -> None:
        """End the session: the server finishes what it serves within its grace, then stops."""
        self.pipe.close()

    def _forget(self, request_id: Any) -> None:
        stream = self._waiting.pop(request_id, None)
        if stream is not None:
            stream.close()
        for token in [t for t, rid in self._tokens.items() if rid == request_id]:
            del self._tokens[token]

    def _deliver(self, message: dict[str, Any]) -> None:
        if "method" not in message:  # an answer
            request_id = message.get("id")
            stream = self._waiting.get(request_id)
            if stream is None:
                log.debug("an answer to %r has no stream waiting for it", request_id)
                return
            stream.send_nowait(message)
            self._forget(request_id)
            return
        target = self._target(message)
        if target is None:
            log.debug("%s has no open stream to go to; dropped", message["method"])
            return
        try:
            target.send_nowait(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("%s: its stream just closed; dropped", message["method"])

    def _target(self, message: dict[str, Any]) -> MemoryObjectSendStream[dict[str, Any]] | None:
        method = message["method"]
        if method == "notifications/progress":
            params = message.get("params") or {}
            stream = self._waiting.get(self._tokens.get(params.get("progressToken")))
            if stream is not None:
                return stream
        if method in _LISTENED and self._listener is not None:
            return self._listener
        if self._waiting:
            return next(reversed(self._waiting.values()))
        return self._listener
