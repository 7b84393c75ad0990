"""One ACP connection behind HTTP or a WebSocket: an ``AcpFront`` on a pipe, over the app the process shares.

What the agent writes is routed as the ACP Streamable HTTP RFD and the ACP Python SDK's client expect: on a
WebSocket everything goes down the socket; over HTTP, to the connection's stream or a session's. A message naming a
session that has a stream (``params.sessionId``), and the answer to a request that named one, go to that session's
stream; the answer that opens a session (``session/new``, ``session/load``, ``session/resume``) and everything else
go to the connection's stream, where the client learns the session's id and opens its stream. Each message goes to
exactly one stream, kept (unbounded) until a GET reads it, so nothing written between a disconnect and the next GET
is lost. ``initialize`` is answered in the POST's own body.
"""

from __future__ import annotations

import logging
import math
import secrets
from typing import TYPE_CHECKING, Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.acp.front import AcpFront
from awaken_stdio.protocols.http.pipe import Pipe
from awaken_stdio.protocols.jsonrpc import JsonRpcPeer

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.app.startup import Startup

__all__ = ["AcpConnection", "Outbox"]

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT_S = 60.0
_REOPENING = frozenset({"session/load", "session/resume"})


class Outbox:
    """One stream's messages, kept until its reader (a GET, or the socket) takes them; one reader at a time."""

    def __init__(self) -> None:
        self.send: MemoryObjectSendStream[dict[str, Any]]
        self.receive: MemoryObjectReceiveStream[dict[str, Any]]
        self.send, self.receive = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self.attached = False

    def close(self) -> None:
        self.send.close()


class AcpConnection:
    """An ACP server on a pipe, with the outboxes its messages wait in."""

    def __init__(self, startup: Startup, app: App, *, multiplex: bool) -> None:
        self.id = secrets.token_hex(16)
        self.pipe = Pipe(self._deliver)
        self.peer = JsonRpcPeer(watch_parent=False)
        self.front = AcpFront(startup, self.peer, shared=app)
        self._multiplex = multiplex
        self._outboxes: dict[str | None, Outbox] = {None: Outbox()}  # None: the connection's (or the socket's)
        self._routes: dict[str, str] = {}  # request id -> the session it named
        self._reopening: dict[str, str] = {}  # session/load or resume request id -> its session
        self._waiters: dict[str, MemoryObjectSendStream[dict[str, Any]]] = {}
        self.done = anyio.Event()
        self.last_used = anyio.current_time()

    async def run(self) -> None:
        """Serve until the pipe closes; then every outbox ends."""
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self.front.app.run)
                await self.peer.run(self.pipe.reader, self.pipe.writer)
                self.front.app.close()
        finally:
            self.done.set()
            for outbox in self._outboxes.values():
                outbox.close()

    @property
    def attached(self) -> bool:
        return any(outbox.attached for outbox in self._outboxes.values())

    def has_session(self, session_id: str) -> bool:
        return session_id in self._outboxes

    def outbox(self, session_id: str | None = None) -> Outbox:
        """The connection's outbox, or a session's (made on demand: a client may open a session's stream as soon
        as it sees the id, before the answer that opens the session here)."""
        if session_id is not None and session_id not in self._outboxes:
            self._outboxes[session_id] = Outbox()
        return self._outboxes[session_id]

    async def initialize(self, message: dict[str, Any]) -> dict[str, Any]:
        """Feed ``initialize`` and return its answer (it goes to no stream)."""
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._waiters[_key(message["id"])] = send
        await self.feed(message)
        with anyio.fail_after(INITIALIZE_TIMEOUT_S):
            return await receive.receive()

    async def feed(self, message: dict[str, Any]) -> None:
        """A message from the client; the session a request names is where its answer goes."""
        self.last_used = anyio.current_time()
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if "method" in message and "id" in message and isinstance(session_id, str):
            key = _key(message["id"])
            if message["method"] in _REOPENING:
                self._reopening[key] = session_id
            else:
                self._routes[key] = session_id
        await self.pipe.feed(message)

    def close(self) -> None:
        """End the connection: turns in flight are cancelled, sessions stay in the store."""
        self.pipe.close()

    def _deliver(self, message: dict[str, Any]) -> None:
        self.last_used = anyio.current_time()
        if "method" not in message:
            key = _key(message.get("id"))
            waiter = self._waiters.pop(key, None)
            if waiter is not None:
                waiter.send_nowait(message)
                return
            target = self._answer_target(key, message)
        else:
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            target = session_id if isinstance(session_id, str) and session_id in self._outboxes else None
        outbox = self._outboxes[None if self._multiplex else target]
        try:
            outbox.send.send_nowait(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("a message for a closed stream was dropped")

    def _answer_target(self, key: str, message: dict[str, Any]) -> str | None:
        session_id = self._routes.pop(key, None)
        reopened = self._reopening.pop(key, None)
        result = message.get("result")
        opened = result.get("sessionId") if isinstance(result, dict) else None
        opened = opened if isinstance(opened, str) else reopened if "result" in message else None
        if opened is not None:
            self.outbox(opened)
            return None  # the client learns the id here, then opens the session's stream
        return session_id if session_id in self._outboxes else None


def _key(request_id: Any) -> str:
    return str(request_id)
