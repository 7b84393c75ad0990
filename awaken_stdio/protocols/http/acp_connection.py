"""One ACP connection behind HTTP or a WebSocket: an ``AcpFront`` on a pipe, over the app the process shares.

What the agent writes is routed as the ACP Streamable HTTP RFD and the ACP Python SDK's client expect: on a
WebSocket everything goes down the socket; over HTTP, to the connection's stream or a session's. A message naming a
session that has a stream (``params.sessionId``), and the answer to a request that named one, go to that session's
stream; the answer that opens a session (``session/new``, ``session/load``, ``session/resume``) and everything else
go to the connection's stream, where the client learns the session's id and opens its stream. Each message goes to
exactly one stream, kept (unbounded) until a GET reads it, so nothing written between a disconnect and the next GET
is lost. ``initialize`` is answered in the POST's own body. What is shared with the other clients of a session
(``session/attach``) is the :class:`~awaken_stdio.protocols.http.attach.Hub`'s.
"""

from __future__ import annotations

import logging
import math
import secrets
from typing import TYPE_CHECKING, Any, cast

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.acp.front import AcpFront
from awaken_stdio.protocols.http.attach import Hub, Role
from awaken_stdio.protocols.http.pipe import Pipe
from awaken_stdio.protocols.jsonrpc import JsonRpcPeer

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.app.startup import Startup

__all__ = ["AcpConnection", "Outbox"]

log = logging.getLogger(__name__)

INITIALIZE_TIMEOUT_S = 60.0
_REOPENING = frozenset({"session/load", "session/resume"})
_ACTING = frozenset({"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option"})
NOT_AUTHORISED = -32002  # the RFD's code for a client that may not act on (or attach to) the session
SESSION_NOT_FOUND = -32001


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

    def __init__(self, startup: Startup, app: App, hub: Hub, *, multiplex: bool) -> None:
        self.id = secrets.token_hex(16)
        self.client_info: dict[str, Any] = {}  # what its initialize said (told to others when it decides)
        self._app = app
        self._hub = hub
        self._attaching: dict[str, tuple[str, Role]] = {}  # session/attach request id -> (session, role)
        self._initializing: set[str] = set()  # initialize request ids: their answers say attach is offered
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
            self._hub.left(self)
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
        method = message.get("method")
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if method is None and "id" in message:  # an answer: perhaps to a question another connection asked
            target, answer = self._hub.answered(self, message)
            await target.pipe.feed(answer)
            return
        if method == "initialize" and "id" in message:
            self._initializing.add(_key(message["id"]))
            info = params.get("clientInfo") if isinstance(params, dict) else None
            if isinstance(info, dict):
                self.client_info = {k: v for k, v in cast("dict[str, Any]", info).items() if k in ("name", "version")}
        if isinstance(session_id, str) and method in _ACTING and self._hub.role(self, session_id) == "observer":
            if "id" in message:
                self._refuse(message["id"], NOT_AUTHORISED, "an observer of this session cannot act on it")
            return
        if method == "session/attach" and "id" in message:
            message = await self._attach(message, session_id, params)
            if not message:
                return
        elif "id" in message and isinstance(session_id, str):
            key = _key(message["id"])
            if method in _REOPENING:
                self._reopening[key] = session_id
            else:
                self._routes[key] = session_id
        await self.pipe.feed(message)

    async def _attach(self, message: dict[str, Any], session_id: Any, params: Any) -> dict[str, Any]:
        """``session/attach`` as a ``session/load`` of this connection (the history, replayed here); the hub
        learns the role when it succeeds. An empty dict: refused, answered already."""
        role = cast("dict[str, Any]", params).get("role", "controller") if isinstance(params, dict) else None
        if role not in ("controller", "observer") or not isinstance(session_id, str):
            self._refuse(message["id"], -32602, "session/attach needs a sessionId and a role: controller | observer")
            return {}
        record = await self._app.store.load_session(session_id)
        if record is None:
            self._refuse(message["id"], SESSION_NOT_FOUND, "Session not found", {"sessionId": session_id})
            return {}
        self._attaching[_key(message["id"])] = (session_id, role)
        load = {"sessionId": session_id, "cwd": record.cwd, "mcpServers": []}
        return {"jsonrpc": "2.0", "id": message["id"], "method": "session/load", "params": load}

    def push(self, message: dict[str, Any], session_id: str) -> None:
        """A message from elsewhere (another connection's agent, the hub) for this client, about ``session_id``."""
        target = None if self._multiplex or session_id not in self._outboxes else session_id
        try:
            self._outboxes[target].send.send_nowait(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("a message for a closed connection was dropped")

    def _refuse(self, request_id: Any, code: int, text: str, data: Any = None) -> None:
        error: dict[str, Any] = {"code": code, "message": text}
        if data is not None:
            error["data"] = data
        self._outboxes[None].send.send_nowait({"jsonrpc": "2.0", "id": request_id, "error": error})

    def close(self) -> None:
        """End the connection: turns in flight are cancelled, sessions stay in the store."""
        self.pipe.close()

    def _deliver(self, message: dict[str, Any]) -> None:
        self.last_used = anyio.current_time()
        if "method" not in message:
            key = _key(message.get("id"))
            if key in self._initializing:
                self._initializing.discard(key)
                _offer_attach(message)
            waiter = self._waiters.pop(key, None)
            if waiter is not None:
                waiter.send_nowait(message)
                return
            attaching = self._attaching.pop(key, None)
            if attaching is not None and "result" in message:
                message = self._attached(message, *attaching)
            target = self._answer_target(key, message, owner=attaching is None)
        else:
            params = message.get("params")
            session_id = params.get("sessionId") if isinstance(params, dict) else None
            target = session_id if isinstance(session_id, str) and session_id in self._outboxes else None
        outbox = self._outboxes[None if self._multiplex else target]
        try:
            outbox.send.send_nowait(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            log.debug("a message for a closed stream was dropped")
        if "method" in message:
            self._hub.emitted(self, message)

    def _attached(self, message: dict[str, Any], session_id: str, role: Role) -> dict[str, Any]:
        """The ``session/load`` that attached succeeded: the hub knows the role; the answer says who else is on."""
        self.outbox(session_id)
        self._hub.joined(self, session_id, role)
        others = [{**c.client_info, "role": r} for c, r in self._hub.members(session_id) if c is not self]
        result = {"sessionId": session_id, "role": role, "connectedClients": others}
        return {"jsonrpc": "2.0", "id": message["id"], "result": result}

    def _answer_target(self, key: str, message: dict[str, Any], *, owner: bool) -> str | None:
        session_id = self._routes.pop(key, None)
        reopened = self._reopening.pop(key, None)
        result = message.get("result")
        opened = result.get("sessionId") if isinstance(result, dict) else None
        opened = opened if isinstance(opened, str) else reopened if "result" in message else None
        if opened is not None:
            self.outbox(opened)
            if owner:  # opened, loaded or resumed here: a controller of it
                self._hub.joined(self, opened, "controller")
            return None  # the client learns the id here, then opens the session's stream
        return session_id if session_id in self._outboxes else None


def _offer_attach(answer: dict[str, Any]) -> None:
    """An ``initialize`` answer, with the attach capability (the RFD's ``sessionCapabilities.attach``) added."""
    result = answer.get("result")
    agent = result.get("agentCapabilities") if isinstance(result, dict) else None
    if isinstance(agent, dict):
        session = cast("dict[str, Any]", agent).setdefault("sessionCapabilities", {})
        session["attach"] = {"roles": ["controller", "observer"]}


def _key(request_id: Any) -> str:
    return str(request_id)
