"""A bidirectional JSON-RPC 2.0 peer over newline-delimited JSON on anyio byte streams.

It owns framing, the correlation of our requests with their answers, concurrent dispatch, cancellation, the
lifecycle and the one place where exceptions become wire errors. It knows nothing of ACP or MCP. It imports only the
standard library and anyio: it is on the path to the first ``initialize`` answer (budget 100 ms). Its choices
(ordering, back-pressure, long lines, one writer, one shutdown path) are in ``docs/jsonrpc.md``; stdout plumbing is
``protocols/stdio.py``'s.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from contextlib import suppress
from functools import partial
from typing import Any, TypeAlias

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.jsonrpc_calls import Batch, Pending, RequestContext
from awaken_stdio.protocols.jsonrpc_wire import (
    CONNECTION_CLOSED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    ConnectionClosedError,
    JsonRpcError,
    RequestId,
    RequestTimeoutError,
    decode_line,
    encode_frame,
    envelope_problem,
    error_to_wire,
    one_line,
    valid_id,
)

__all__ = [
    "CONNECTION_CLOSED",
    "DEFAULT_MAX_LINE_BYTES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_TIMEOUT",
    "ConnectionClosedError",
    "JsonRpcError",
    "JsonRpcPeer",
    "NotificationHandler",
    "Params",
    "RequestContext",
    "RequestHandler",
    "RequestId",
    "RequestTimeoutError",
    "error_to_wire",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 32 * 1024 * 1024

_READ_CHUNK = 64 * 1024
_OUTBOX_SIZE = 1024  # lines queued for the writer before notify() waits
MAX_OUTPUT_BACKLOG = 8 * 1024 * 1024  # bytes of output not yet written before reading pauses (back-pressure)
MAX_IN_FLIGHT = 1024  # requests being handled before reading pauses
_NOTIFICATION_QUEUE = 1024  # notifications queued before reading waits
_MAX_WRITE_BATCH = 1024 * 1024  # bytes joined into one write
_PARENT_POLL_S = 0.5
Params: TypeAlias = dict[str, Any] | list[Any] | None
RequestHandler: TypeAlias = Callable[[Params, RequestContext], Awaitable[Any]]
NotificationHandler: TypeAlias = Callable[[Params, RequestContext], Awaitable[None]]
_Notes: TypeAlias = MemoryObjectSendStream[tuple[NotificationHandler, Params, str]]  # to the notification worker


class JsonRpcPeer:
    """Both ends of JSON-RPC at once: serves the other side's requests and sends our own.

    Register handlers, then ``await tg.start(peer.run, reader, writer)``; ``run`` returns after input EOF,
    ``close()``, parent death (with ``watch_parent``) or a broken output. A peer runs once. The streams stay owned by
    the caller.
    """

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        eof_grace_s: float = 0.5,
        watch_parent: bool = False,
    ) -> None:
        self._max_line_bytes = max_line_bytes
        self._eof_grace_s = eof_grace_s
        self._stop_grace_s = eof_grace_s  # for in-flight handlers once reading stopped; ``close`` may shorten it
        self._watch_parent = watch_parent
        self._methods: dict[str, RequestHandler] = {}
        self._notification_handlers: dict[str, NotificationHandler] = {}
        self._ids = itertools.count(1)
        self._pending: dict[RequestId, Pending] = {}
        self._inbound: dict[RequestId, anyio.CancelScope] = {}
        self._active = 0  # requests in flight plus notifications queued or running
        self._idle: anyio.Event | None = None
        self._started = False
        self._close_requested = False
        self._input_open = False  # outbound requests can still be answered
        self._accepting = False  # lines may still be queued for writing
        self._read_scope: anyio.CancelScope | None = None
        self._task_group: anyio.abc.TaskGroup | None = None
        self._outbox: MemoryObjectSendStream[bytes] | None = None
        self._backlog = 0  # bytes passed to _send and not yet written
        self._room: anyio.Event | None = None  # set when reading may go on (back-pressure)
        self.batches = False  # serve JSON-RPC batches (``jsonrpc_calls.Batch``), else answer an array with -32600

    # -- handler table ---------------------------------------------------------------------------------------

    def register(self, name: str, handler: RequestHandler) -> None:
        """Serve requests for ``name``: ``await handler(params, ctx)`` is the result, or raises the error."""
        if name in self._methods:
            raise ValueError(f"a handler for request {name!r} is already registered")
        self._methods[name] = handler

    def method(self, name: str) -> Callable[[RequestHandler], RequestHandler]:
        """Decorator form of ``register``."""

        def decorate(handler: RequestHandler) -> RequestHandler:
            self.register(name, handler)
            return handler

        return decorate

    def register_notification(self, name: str, handler: NotificationHandler) -> None:
        """Handle notifications ``name``; handlers run one at a time in arrival order, so keep them short."""
        if name in self._notification_handlers:
            raise ValueError(f"a handler for notification {name!r} is already registered")
        self._notification_handlers[name] = handler

    def on_notification(self, name: str) -> Callable[[NotificationHandler], NotificationHandler]:
        """Decorator form of ``register_notification``."""

        def decorate(handler: NotificationHandler) -> NotificationHandler:
            self.register_notification(name, handler)
            return handler

        return decorate

    # -- outbound --------------------------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: Params = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - fails with a JSON-RPC error and forgets the request
        cancel_method: str | None = None,
    ) -> Any:
        """Send a request and return the other side's result.

        Raises ``JsonRpcError`` with the other side's error, ``RequestTimeoutError`` after ``timeout`` seconds
        (a late answer is then ignored), or ``ConnectionClosedError`` when input ends first. Cancelling the caller
        sends nothing unless the protocol names its notification (``cancel_method``, e.g. ACP's
        ``$/cancel_request``): then the other side is told ``{"requestId": id}``.
        """
        if not self._input_open:
            raise ConnectionClosedError("connection closed: no answer can arrive")
        request_id = next(self._ids)
        frame: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            frame["params"] = params
        pending = self._pending[request_id] = Pending()
        try:
            await self._send(encode_frame(frame))
            with anyio.fail_after(timeout):
                await pending.event.wait()
        except TimeoutError:
            raise RequestTimeoutError(method, timeout or 0) from None
        except anyio.get_cancelled_exc_class():
            if cancel_method is not None and self._input_open and not pending.event.is_set():
                with anyio.CancelScope(shield=True), suppress(JsonRpcError):
                    await self.notify(cancel_method, {"requestId": request_id})
            raise
        finally:
            self._pending.pop(request_id, None)
        if pending.error is not None:
            raise pending.error
        return pending.result

    async def notify(self, method: str, params: Params = None) -> None:
        """Queue a notification; it is written in order after everything queued before it.

        Returns without yielding unless the outbox is full. Raises ``ConnectionClosedError`` once the peer has
        stopped writing.
        """
        frame: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            frame["params"] = params
        await self._send(encode_frame(frame))

    def cancel_request(self, request_id: RequestId) -> bool:
        """Cancel the handler of an inbound request; it sends no response (MCP ``notifications/cancelled``).

        Returns False when no such request is in flight (already answered, or never seen).
        """
        scope = self._inbound.get(request_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    def close(self, *, grace_s: float | None = None) -> None:
        """Stop as on input EOF: ``run`` finishes in-flight work within the grace period and returns.

        ``grace_s`` replaces that period (``0``: cancel in-flight handlers at once, as a stop signal asks); queued
        output is still flushed.
        """
        self._close_requested = True
        if grace_s is not None:
            self._stop_grace_s = min(self._stop_grace_s, grace_s)
        if self._read_scope is not None:
            self._read_scope.cancel()

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def run(
        self,
        reader: anyio.abc.ByteReceiveStream,
        writer: anyio.abc.ByteSendStream,
        *,
        unread: bytes = b"",
        ended: bool = False,
        task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Serve until input EOF, ``close()``, parent death or a broken output; see the module docstring. ``unread``
        is input read before ``reader`` (``protocols/early.py``), served first; ``ended``: so was its EOF."""
        if self._started:
            raise RuntimeError("a JsonRpcPeer runs only once")
        self._started = True
        outbox, outbox_reader = anyio.create_memory_object_stream[bytes](_OUTBOX_SIZE)
        notes, notes_reader = anyio.create_memory_object_stream[tuple[NotificationHandler, Params, str]](
            _NOTIFICATION_QUEUE
        )
        self._outbox = outbox
        self._input_open = self._accepting = True
        writer_done = anyio.Event()
        try:
            async with anyio.create_task_group() as io_group:
                io_group.start_soon(self._write_loop, writer, outbox_reader, writer_done)
                async with anyio.create_task_group() as group:
                    self._task_group = group
                    group.start_soon(self._notification_loop, notes_reader)
                    if self._watch_parent:
                        group.start_soon(self._parent_watch_loop, os.getppid())
                    with anyio.CancelScope() as self._read_scope:
                        task_status.started()
                        if not self._close_requested:
                            await self._read_loop(reader, notes, unread, ended)
                    self._end_input()
                    notes.close()
                    await self._wait_idle()
                    self._accepting = False  # handlers cancelled below must not write
                    group.cancel_scope.cancel()
                outbox.close()
                with anyio.move_on_after(self._eof_grace_s):
                    await writer_done.wait()
                io_group.cancel_scope.cancel()
        finally:
            self._accepting = False
            self._end_input()
            for stream in (outbox, outbox_reader, notes, notes_reader):
                stream.close()

    def _end_input(self) -> None:
        self._input_open = False
        pending, self._pending = self._pending, {}
        for item in pending.values():
            item.error = ConnectionClosedError("connection closed before an answer arrived")
            item.event.set()

    async def _wait_idle(self) -> None:
        if self._active:
            self._idle = anyio.Event()
            with anyio.move_on_after(self._stop_grace_s):
                await self._idle.wait()
            if self._active:
                logger.info("shutdown: cancelling %d unfinished request(s) and notification(s)", self._active)

    def _one_done(self) -> None:
        self._active -= 1
        if self._active == 0 and self._idle is not None:
            self._idle.set()

    async def _parent_watch_loop(self, parent: int) -> None:
        """An orphan guard: a dead parent cannot close our stdin if a grandchild still holds it."""
        while os.getppid() == parent:  # noqa: ASYNC110 - nothing signals a parent's death portably; poll
            await anyio.sleep(_PARENT_POLL_S)
        logger.info("parent process %d is gone; shutting down", parent)
        self.close()

    # -- writing ---------------------------------------------------------------------------------------------

    async def _send(self, data: bytes) -> None:
        if not self._accepting or self._outbox is None:
            raise ConnectionClosedError("connection closed: nothing more can be sent")
        self._backlog += len(data)
        try:
            try:
                self._outbox.send_nowait(data)
            except anyio.WouldBlock:
                await self._outbox.send(data)
        except BaseException as exc:
            self._written(len(data))
            if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
                raise ConnectionClosedError("connection closed: nothing more can be sent") from None
            raise

    def _written(self, size: int) -> None:
        self._backlog -= size
        self._notice_room()

    def _notice_room(self) -> None:
        if self._room is not None and not self._behind():
            self._room.set()

    def _behind(self) -> bool:
        """Whether reading should pause: too much output waits, or too many requests are being handled."""
        return self._backlog > MAX_OUTPUT_BACKLOG or len(self._inbound) >= MAX_IN_FLIGHT

    async def _wait_for_room(self) -> None:
        logger.debug("reading paused: %d bytes to write, %d requests in flight", self._backlog, len(self._inbound))
        while self._behind():
            self._room = anyio.Event()
            await self._room.wait()
        self._room = None

    async def _write_loop(
        self,
        writer: anyio.abc.ByteSendStream,
        outbox: MemoryObjectReceiveStream[bytes],
        done: anyio.Event,
    ) -> None:
        """The only writer: joins lines already queued into one write, so bursts cost one syscall."""
        try:
            async with outbox:
                async for first in outbox:
                    batch, size = [first], len(first)
                    while size < _MAX_WRITE_BATCH:
                        try:
                            line = outbox.receive_nowait()
                        except (anyio.WouldBlock, anyio.EndOfStream):
                            break
                        batch.append(line)
                        size += len(line)
                    try:
                        await writer.send(first if len(batch) == 1 else b"".join(batch))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                        logger.info("output closed (%s); shutting down", exc or type(exc).__name__)
                        self._accepting = False
                        self.close()
                        return
                    self._written(size)
        finally:
            done.set()

    async def _reply_error(
        self, request_id: RequestId | None, code: int, message: str, data: Any = None, batch: Batch | None = None
    ) -> None:
        frame = encode_frame({"jsonrpc": "2.0", "id": request_id, "error": JsonRpcError(code, message, data).to_wire()})
        await self._send(frame) if batch is None else batch.add(frame)

    # -- reading ---------------------------------------------------------------------------------------------

    async def _read_loop(self, reader: anyio.abc.ByteReceiveStream, notes: _Notes, unread: bytes, ended: bool) -> None:
        """Split input into lines; a line over the limit is answered once and skipped as it streams in."""
        limit = self._max_line_bytes
        buffer = bytearray()
        discarding = False
        while True:
            if unread or ended:  # read before the peer ran, then the EOF if that came too
                chunk, unread = unread, b""
                if not chunk:
                    break
            else:
                try:
                    chunk = await reader.receive(_READ_CHUNK)
                except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                    break
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                if end < 0:
                    if not discarding:
                        if len(buffer) + len(chunk) - start > limit:
                            buffer.clear()
                            discarding = True
                            await self._line_too_long()
                        else:
                            buffer += chunk[start:]
                    break
                if discarding:
                    discarding = False
                elif len(buffer) + end - start > limit:
                    buffer.clear()
                    await self._line_too_long()
                elif buffer:
                    buffer += chunk[start:end]
                    line = bytes(buffer)
                    buffer.clear()
                    await self._handle_line(line, notes)
                else:
                    await self._handle_line(chunk[start:end], notes)
                start = end + 1
        if buffer and not discarding:  # a last line without its newline
            await self._handle_line(bytes(buffer), notes)

    async def _line_too_long(self) -> None:
        limit = self._max_line_bytes
        logger.warning("discarding an input line longer than %d bytes", limit)
        await self._reply_error(
            None,
            INVALID_REQUEST,
            f"Invalid Request: line exceeds the maximum of {limit} bytes",
            {"maxLineBytes": limit},
        )

    async def _handle_line(self, line: bytes, notes: _Notes) -> None:
        if not line or line.isspace():
            return
        try:
            message = decode_line(line.decode())
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            await self._reply_error(None, PARSE_ERROR, f"Parse error: {one_line(str(exc))}")
            return
        if type(message) is list and self.batches and message:
            batch = Batch(self._send)
            for entry in message:
                await self._handle_message(entry, notes, batch)
            await batch.done()
        else:
            await self._handle_message(message, notes)

    async def _handle_message(self, message: Any, notes: _Notes, batch: Batch | None = None) -> None:
        if type(message) is not dict:
            what = "a message must be a JSON object"
            if type(message) is list:
                what = "an empty batch" if self.batches else "batches are not supported"
            await self._reply_error(None, INVALID_REQUEST, f"Invalid Request: {what}", batch=batch)
            return
        request_id = message.get("id")
        echo = request_id if valid_id(request_id) else None
        if "method" not in message and ("result" in message or "error" in message):
            self._handle_response(message)
            return
        if self._behind():
            await self._wait_for_room()
        problem = envelope_problem(message)
        if problem is not None:
            await self._reply_error(
                echo, INVALID_REQUEST, message=f"Invalid Request: {problem}", data=None, batch=batch
            )
            return
        method: str = message["method"]
        params: Params = message.get("params")
        if "id" not in message:
            await self._dispatch_notification(method, params, notes)
        elif echo is None:
            await self._reply_error(
                None,
                INVALID_REQUEST,
                message="Invalid Request: id must be a string or an integer",
                data=None,
                batch=batch,
            )
        elif request_id in self._inbound:
            await self._reply_error(
                None,
                INVALID_REQUEST,
                message="Invalid Request: id is already in use by a request in flight",
                data={"id": request_id},
                batch=batch,
            )
        else:
            handler = self._methods.get(method)
            if handler is None:
                await self._reply_error(
                    request_id,
                    METHOD_NOT_FOUND,
                    message=f"Method not found: {one_line(method)}",
                    data=None,
                    batch=batch,
                )
                return
            scope = self._inbound[echo] = anyio.CancelScope()  # before the task runs: cancellable at once
            self._active += 1
            assert self._task_group is not None
            if batch is not None:
                batch.expect()
            self._task_group.start_soon(
                partial(self._serve, handler, method, params=params, request_id=echo, scope=scope, batch=batch)
            )

    def _handle_response(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        pending = self._pending.pop(request_id, None) if valid_id(request_id) else None
        if pending is None:
            if request_id is None and "error" in message:
                logger.warning("the other side could not read one of our messages: %r", message["error"])
            else:
                logger.warning("ignoring a response to unknown request id %r", request_id)
            return
        if "error" in message:
            error = message["error"]
            if isinstance(error, dict) and type(error.get("code")) is int and isinstance(error.get("message"), str):
                pending.error = JsonRpcError(error["code"], error["message"], error.get("data"))
            else:
                pending.error = JsonRpcError(INTERNAL_ERROR, "malformed error response", error)
        else:
            pending.result = message["result"]
        pending.event.set()

    # -- serving ---------------------------------------------------------------------------------------------

    async def _serve(
        self,
        handler: RequestHandler,
        method: str,
        params: Params,
        request_id: RequestId,
        scope: anyio.CancelScope,
        batch: Batch | None,
    ) -> None:
        try:
            with scope:
                try:
                    result = await handler(params, RequestContext(peer=self, method=method, request_id=request_id))
                except Exception as exc:
                    data = encode_frame({"jsonrpc": "2.0", "id": request_id, "error": error_to_wire(exc)})
                else:
                    try:
                        data = encode_frame({"jsonrpc": "2.0", "id": request_id, "result": result})
                    except (TypeError, ValueError) as exc:  # not JSON, NaN, or a cycle
                        logger.error("the result of %s is not JSON: %s", method, exc)
                        error = JsonRpcError(
                            INTERNAL_ERROR, "Internal error: the result is not JSON", {"message": str(exc)}
                        )
                        data = encode_frame({"jsonrpc": "2.0", "id": request_id, "error": error.to_wire()})
                if scope.cancel_called or not self._accepting:
                    return  # cancelled by the other side or at shutdown: no answer, never two
                if batch is not None:
                    batch.add(data)
                    return
                try:
                    await self._send(data)
                except ConnectionClosedError:
                    logger.debug("connection closed before the answer to %s (id %r)", method, request_id)
        finally:
            del self._inbound[request_id]
            self._one_done()
            self._notice_room()
            if batch is not None:
                await batch.done()

    async def _dispatch_notification(self, method: str, params: Params, notes: _Notes) -> None:
        handler = self._notification_handlers.get(method)
        if handler is None:
            logger.debug("ignoring notification %s: no handler", method)
            return
        self._active += 1
        try:
            try:
                notes.send_nowait((handler, params, method))
            except anyio.WouldBlock:
                await notes.send((handler, params, method))
        except BaseException:
            self._one_done()
            raise

    async def _notification_loop(
        self, notes: MemoryObjectReceiveStream[tuple[NotificationHandler, Params, str]]
    ) -> None:
        async with notes:
            async for handler, params, method in notes:
                try:
                    await handler(params, RequestContext(peer=self, method=method, request_id=None))
                except Exception:
                    logger.exception("notification handler for %s failed", method)
                finally:
                    self._one_done()
