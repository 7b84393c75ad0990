"""ACP at ``/acp``, as the ACP "Streamable HTTP & WebSocket transport" RFD describes it, on the same ``AcpFront``
as ``awaken-stdio acp``.

- POST ``initialize`` (no ``Acp-Connection-Id``): a new connection; 200 with the answer and its id in that header.
- POST anything else: 202 at once; answers come on the streams. ``Acp-Connection-Id`` is required (400; 404 once
  gone); so is ``Acp-Session-Id`` for the session-scoped methods, and it must agree with ``params.sessionId``.
- GET (``Accept: text/event-stream``): the connection's SSE stream, or a session's with ``Acp-Session-Id``; what
  was written while no stream was open waits for the next GET. One reader per stream (409).
- GET with ``Upgrade: websocket``: a connection on a socket (its id in the 101's ``Acp-Connection-Id``); text frames,
  one JSON-RPC message each; binary frames are ignored. The connection ends with the socket.
- DELETE: the connection ends (202).

Sessions are the store's, not the connection's: a client that lost its connection opens another and continues a
session with ``session/load`` or ``session/resume``. Connections over HTTP with no stream open and nothing said for
``IDLE_S`` end. Batches are answered 501. HTTP/1.1 here; a TLS reverse proxy in front gives clients HTTP/2.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from awaken_stdio.protocols.http.acp_connection import AcpConnection, Outbox
from awaken_stdio.protocols.http.attach import Hub

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.app.startup import Startup

__all__ = ["AcpEndpoint"]

log = logging.getLogger(__name__)

CONNECTION_HEADER = "acp-connection-id"
SESSION_HEADER = "acp-session-id"
PING_S = 15.0
IDLE_S = 30 * 60.0
MAX_CONNECTIONS = 256
_SESSION_SCOPED = frozenset(
    {"session/prompt", "session/cancel", "session/set_mode", "session/set_config_option", "session/close"}
)


class AcpEndpoint:
    """The ``/acp`` route and its WebSocket twin."""

    def __init__(self, startup: Startup, app: App, group: anyio.abc.TaskGroup) -> None:
        self._startup = startup
        self._app = app
        self._group = group
        self._connections: dict[str, AcpConnection] = {}
        self._hub = Hub()  # who is on which session, across connections

    async def handle(self, request: Request) -> Response:
        connection_id = request.headers.get(CONNECTION_HEADER)
        if request.method == "POST":
            return await self._post(request, connection_id)
        if connection_id is None:
            return _plain(400, "Acp-Connection-Id is required")
        connection = self._connections.get(connection_id)
        if connection is None:
            return _plain(404, "no such connection")
        if request.method == "DELETE":
            self._end(connection)
            return Response(status_code=202)
        if "text/event-stream" not in request.headers.get("accept", ""):
            return _plain(406, "the stream is text/event-stream")
        outbox = connection.outbox(request.headers.get(SESSION_HEADER))
        if outbox.attached:
            return _plain(409, "this stream is already open")
        outbox.attached = True
        return EventSourceResponse(_events(outbox), ping=PING_S)

    async def socket(self, websocket: WebSocket) -> None:
        """A connection on a WebSocket, for as long as the socket lasts."""
        if len(self._connections) >= MAX_CONNECTIONS:
            await websocket.close(code=1013)
            return
        connection = self._start(multiplex=True)
        await websocket.accept(headers=[(CONNECTION_HEADER.encode(), connection.id.encode())])
        outbox = connection.outbox()
        outbox.attached = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_pump_out, websocket, outbox, tg.cancel_scope)
                await _pump_in(websocket, connection)
                tg.cancel_scope.cancel()
        finally:
            self._end(connection)

    async def reap(self) -> None:
        """End HTTP connections with no stream open and nothing said for ``IDLE_S``."""
        while True:
            await anyio.sleep(60)
            now = anyio.current_time()
            for connection in list(self._connections.values()):
                if connection.done.is_set() or (not connection.attached and now - connection.last_used > IDLE_S):
                    log.info("ending idle ACP connection %s", connection.id[:8])
                    self._end(connection)

    def close(self) -> None:
        for connection in list(self._connections.values()):
            self._end(connection)

    def _start(self, *, multiplex: bool) -> AcpConnection:
        connection = AcpConnection(self._startup, self._app, self._hub, multiplex=multiplex)
        self._connections[connection.id] = connection
        self._group.start_soon(connection.run)
        return connection

    def _end(self, connection: AcpConnection) -> None:
        self._connections.pop(connection.id, None)
        connection.close()

    async def _post(self, request: Request, connection_id: str | None) -> Response:
        if not request.headers.get("content-type", "").startswith("application/json"):
            return _plain(415, "the body must be application/json")
        try:
            decoded: object = json.loads(await request.body())
        except ValueError as exc:
            return _plain(400, f"the body is not JSON: {exc}")
        if isinstance(decoded, list):
            return _plain(501, "batches are not supported")
        if not isinstance(decoded, dict):
            return _plain(400, "a message must be a JSON object")
        message = cast("dict[str, Any]", decoded)
        method = message.get("method")
        if connection_id is None:
            if method != "initialize" or "id" not in message:
                return _plain(400, "Acp-Connection-Id is required (initialize first)")
            if len(self._connections) >= MAX_CONNECTIONS:
                return _plain(503, "too many ACP connections open; try again later")
            connection = self._start(multiplex=False)
            try:
                answer = await connection.initialize(message)
            except TimeoutError:
                self._end(connection)
                return _plain(504, "initialize was not answered in time")
            return JSONResponse(answer, headers={CONNECTION_HEADER: connection.id})
        connection = self._connections.get(connection_id)
        if connection is None:
            return _plain(404, "no such connection")
        params = message.get("params")
        named = params.get("sessionId") if isinstance(params, dict) else None
        session_id = request.headers.get(SESSION_HEADER)
        if method in _SESSION_SCOPED and session_id is None:
            return _plain(400, f"{method} needs the Acp-Session-Id header")
        if session_id is not None and named is not None and session_id != named:
            return _plain(400, "Acp-Session-Id does not match params.sessionId")
        if session_id is not None and not connection.has_session(session_id):
            return _plain(404, "no such session on this connection (session/load or session/resume it first)")
        await connection.feed(message)
        return Response(status_code=202)


async def _events(outbox: Outbox) -> AsyncIterator[dict[str, str]]:
    try:
        while True:
            try:
                message = await outbox.receive.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                return
            yield {"event": "message", "data": json.dumps(message, separators=(",", ":"))}
    finally:
        outbox.attached = False


async def _pump_in(websocket: WebSocket, connection: AcpConnection) -> None:
    """Client frames to the agent until the socket closes; a frame that is not a JSON object is ignored."""
    while True:
        try:
            frame = await websocket.receive()
        except WebSocketDisconnect:
            return
        if frame["type"] == "websocket.disconnect":
            return
        text = frame.get("text")
        if text is None:
            continue  # binary frames mean nothing here (the RFD)
        try:
            decoded: object = json.loads(text)
        except ValueError:
            log.warning("ignoring a WebSocket frame that is not JSON")
            continue
        if isinstance(decoded, dict):
            await connection.feed(cast("dict[str, Any]", decoded))


async def _pump_out(websocket: WebSocket, outbox: Outbox, scope: anyio.CancelScope) -> None:
    try:
        async for message in outbox.receive:
            await websocket.send_text(json.dumps(message, separators=(",", ":")))
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass
    scope.cancel()


def _plain(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
