"""MCP over Streamable HTTP at ``/mcp``, both protocol eras, on the same ``McpServer`` as ``awaken-stdio mcp``.

- 2025-11-25 (the handshake era): ``initialize`` without a session header opens a session and answers with its
  ``Mcp-Session-Id``; later POSTs carry it (404 once it is gone); GET opens the session's stream for what the server
  says unasked; DELETE ends it. Sessions idle past ``SESSION_IDLE_S`` (no request in flight, no stream) are ended.
- 2026-07-28 (stateless): a POST whose ``MCP-Protocol-Version`` header names that version (or whose body carries
  its ``_meta`` envelope) is served by a server of its own that lives as long as the request; closing the response
  stream cancels it. The routing headers must agree with the body (-32020, HTTP 400); notifications are accepted
  (202) and dropped; GET and DELETE are 405.

An answer goes out as JSON when it comes before anything else; a request that streams (progress, logging, an
elicitation) or outlasts ``COMMIT_S`` gets an SSE stream. Error statuses follow the SDK's table for the stateless
era; the handshake era answers JSON-RPC errors with 200, as its clients expect.
"""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from awaken_stdio.protocols.http.mcp_connection import Connection, Stream
from awaken_stdio.protocols.mcp.wire import MODERN_VERSIONS, PROTOCOL_VERSION_KEY

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.app.startup import Startup

__all__ = ["McpEndpoint"]

log = logging.getLogger(__name__)

SESSION_HEADER = "mcp-session-id"
VERSION_HEADER = "mcp-protocol-version"
METHOD_HEADER = "mcp-method"
NAME_HEADER = "mcp-name"
HEADER_MISMATCH = -32020
COMMIT_S = 10.0  # an answer slower than this goes out as SSE, so proxies see bytes before they give up
PING_S = 15.0
SESSION_IDLE_S = 30 * 60.0
MAX_SESSIONS = 256
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # the Mcp-Name header's field
_STATUS = {-32700: 400, -32600: 400, -32602: 400, HEADER_MISMATCH: 400, -32021: 400, -32022: 400, -32601: 404}


class McpEndpoint:
    """The ``/mcp`` route: sessions of the handshake era, and the stateless era's one-request servers."""

    def __init__(self, startup: Startup, app: App, group: anyio.abc.TaskGroup) -> None:
        self._startup = startup
        self._app = app
        self._group = group
        self._sessions: dict[str, Connection] = {}

    async def handle(self, request: Request) -> Response:
        if request.method == "POST":
            return await self._post(request)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is None:
            return _plain(405, "GET and DELETE need an Mcp-Session-Id (the 2026-07-28 era has neither)")
        connection = self._sessions.get(session_id)
        if connection is None:
            return _plain(404, "no such session")
        if request.method == "DELETE":
            del self._sessions[session_id]
            connection.close()
            return Response(status_code=204)
        if "text/event-stream" not in request.headers.get("accept", ""):
            return _plain(406, "the GET stream is text/event-stream")
        stream = connection.listen()
        if stream is None:
            return _plain(409, "this session's stream is already open")
        return EventSourceResponse(_events(stream, connection.unlisten), ping=PING_S)

    async def reap(self) -> None:
        """End sessions idle past ``SESSION_IDLE_S`` (run for the life of the server)."""
        while True:
            await anyio.sleep(60)
            now = anyio.current_time()
            for session_id, connection in list(self._sessions.items()):
                if connection.done.is_set() or (not connection.busy and now - connection.last_used > SESSION_IDLE_S):
                    log.info("ending idle MCP session %s", session_id[:8])
                    del self._sessions[session_id]
                    connection.close()

    def close(self) -> None:
        for connection in self._sessions.values():
            connection.close()
        self._sessions.clear()

    async def _post(self, request: Request) -> Response:
        if not request.headers.get("content-type", "").startswith("application/json"):
            return _plain(415, "the body must be application/json")
        try:
            decoded: object = json.loads(await request.body())
        except ValueError as exc:
            return _error(None, -32700, f"Parse error: {exc}", 400)
        if not isinstance(decoded, dict):
            what = "batches are not supported" if isinstance(decoded, list) else "a message must be a JSON object"
            return _error(None, -32600, f"Invalid Request: {what}", 400)
        message = cast("dict[str, Any]", decoded)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            connection = self._sessions.get(session_id)
            if connection is None:
                return _error(message.get("id"), -32001, "Session not found", 404)
            return await self._serve(request, connection, message, {SESSION_HEADER: session_id})
        if _modern(request, message):
            return await self._stateless(request, message)
        if message.get("method") != "initialize":
            return _error(message.get("id"), -32600, "Bad Request: no Mcp-Session-Id header (initialize first)", 400)
        if len(self._sessions) >= MAX_SESSIONS:
            return _error(message.get("id"), -32603, "too many MCP sessions open; try again later", 503)
        session_id = secrets.token_hex(16)
        connection = self._sessions[session_id] = Connection(self._startup, self._app)
        self._group.start_soon(connection.run)
        return await self._serve(request, connection, message, {SESSION_HEADER: session_id})

    async def _stateless(self, request: Request, message: dict[str, Any]) -> Response:
        if "id" not in message or "method" not in message:
            return Response(status_code=202)  # the stateless era defines no client notification to act on
        mismatch = _header_mismatch(request, message)
        if mismatch is not None:
            return _error(message["id"], HEADER_MISMATCH, mismatch, 400)
        connection = Connection(self._startup, self._app)
        self._group.start_soon(connection.run)
        return await self._serve(request, connection, message, {}, owned=True)

    async def _serve(
        self, request: Request, connection: Connection, message: dict[str, Any], headers: dict[str, str],
        *, owned: bool = False,
    ) -> Response:  # fmt: skip
        """Feed ``message``; a request is answered as JSON or SSE, anything else with 202. ``owned``: the
        connection serves this request only and ends with it (cancelled if the client leaves first)."""
        if "method" not in message or "id" not in message:
            await connection.tell(message)
            return Response(status_code=202, headers=headers)
        try:
            stream = await connection.ask(message)
        except ValueError as exc:
            return _error(message["id"], -32600, f"Invalid Request: {exc}", 400)
        first: dict[str, Any] | None = None
        with anyio.move_on_after(COMMIT_S):
            try:
                first = await stream.receive()
            except anyio.EndOfStream:
                return _error(message["id"], -32603, "the server stopped before it answered", 500)
        if first is not None and "method" not in first:
            if owned:
                connection.close()
            error: object = first.get("error")
            code = cast("dict[str, Any]", error).get("code") if isinstance(error, dict) else None
            status = _STATUS.get(code, 200) if owned and isinstance(code, int) else 200
            return JSONResponse(first, status_code=status, headers=headers)

        async def events() -> AsyncIterator[dict[str, str]]:
            answered = False
            try:
                if first is not None:
                    yield _event(first)
                async for item in stream:
                    answered = "method" not in item
                    yield _event(item)
            finally:
                if owned:
                    connection.close() if answered else connection.cancel()
                elif not answered:
                    connection.abandon(message["id"])

        return EventSourceResponse(events(), headers=headers, ping=PING_S)


def _modern(request: Request, message: dict[str, Any]) -> bool:
    if request.headers.get(VERSION_HEADER) in MODERN_VERSIONS:
        return True
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return message.get("method") != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta


def _header_mismatch(request: Request, message: dict[str, Any]) -> str | None:
    """What the stateless era's routing headers say that the body does not (the server checks the body itself)."""
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or PROTOCOL_VERSION_KEY not in meta:
        return None  # the server answers the missing envelope (-32602)
    if request.headers.get(VERSION_HEADER) != meta[PROTOCOL_VERSION_KEY]:
        return "MCP-Protocol-Version header does not match the request envelope's protocol version"
    method = message.get("method")
    if request.headers.get(METHOD_HEADER) != method:
        return "Mcp-Method header does not match the request body's method"
    field = _NAMED.get(method) if isinstance(method, str) else None
    named = params.get(field) if field is not None and isinstance(params, dict) else None
    if named is not None and _decoded(request.headers.get(NAME_HEADER)) != named:
        return f"Mcp-Name header does not match the request body's {field!r} parameter"
    return None


def _decoded(value: str | None) -> str | None:
    """A header value, with the ``=?base64?...?=`` form for values that are not plain ASCII undone."""
    if value is not None and value.startswith("=?base64?") and value.endswith("?="):
        import base64

        try:
            return base64.b64decode(value[9:-2]).decode()
        except ValueError:
            return None
    return value


def _event(message: dict[str, Any]) -> dict[str, str]:
    return {"event": "message", "data": json.dumps(message, separators=(",", ":"))}


async def _events(stream: Stream, done: Any) -> AsyncIterator[dict[str, str]]:
    try:
        async for item in stream:
            yield _event(item)
    finally:
        done()


def _error(request_id: Any, code: int, message: str, status: int) -> JSONResponse:
    body = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status)


def _plain(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)
