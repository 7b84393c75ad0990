"""The connections' ends: the stdio transport (the SDK's ``stdio_client`` reworked: stderr to our logger, the whole
process group stopped, the reason a server went away), the streamable-HTTP one, and the ``Link`` through which a
transport or a call tells the supervisor (``toolsets.py``) that the connection was lost.
"""

from __future__ import annotations

import logging
import subprocess
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from awaken_stdio.tools._processes import open_session_process, release_session, stop_process_group, wait_until
from awaken_stdio.tools.mcp.spec import McpServerSpec, server_environment

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream
    from mcp.client.session import ClientSession
    from mcp.shared.message import SessionMessage

__all__ = ["RELIST", "Link", "Lost", "Signal", "describe", "open_transport"]

logger = logging.getLogger("awaken_stdio.tools.mcp")  # one logger for the MCP client, whichever module logs

_MAX_LINE = 32 * 1024 * 1024  # one JSON-RPC message from a stdio server
_MAX_LOG_LINE = 64 * 1024  # one stderr line; longer ones are logged in pieces
_EXIT_CODE_WAIT_S = 1.0  # after stdout EOF, how long to wait for the exit code that explains it
_STDERR_TAIL, _STDERR_TAIL_CHARS = 3, 200  # the stderr lines a failed start is reported with
_DRAIN_S = 0.5  # after the group is gone, how long its last stderr lines may take to arrive
_UNANSWERED_STOP_S = 0.25  # each step of stopping a server that never answered


@dataclass(frozen=True, slots=True, kw_only=True)
class Lost:
    reason: str


RELIST: Literal["relist"] = "relist"
Signal = Lost | Literal["relist"]


@dataclass(slots=True, eq=False, kw_only=True)
class Link:
    """One connection attempt: its session once ready, and how everyone tells its supervisor what happened."""

    signals: MemoryObjectSendStream[Signal]
    session: ClientSession | None = None
    ready: bool = False
    lost_reason: str | None = None
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=_STDERR_TAIL))

    def lose(self, reason: str) -> None:
        if self.lost_reason is None:
            self.lost_reason = reason
        self._send(Lost(reason=reason))

    def failure(self, exc: BaseException) -> str:
        """Why the connection could not be made, with the server's last words: "it exited with code 2 (stderr:
        missing configuration)" says more than the handshake's "Connection closed"."""
        reason = self.lost_reason or describe(exc)
        if self.stderr_tail:
            reason += f" (stderr: {' | '.join(self.stderr_tail)})"
        return reason

    def relist(self) -> None:
        self._send(RELIST)

    def _send(self, signal: Signal) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.signals.send_nowait(signal)


def describe(exc: BaseException) -> str:
    """One line for a status: the innermost error of a one-leaf exception group, its type when it has no text."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def open_transport(spec: McpServerSpec, link: Link) -> AbstractAsyncContextManager[Any]:
    return _stdio_transport(spec, link) if spec.transport == "stdio" else _http_transport(spec)


@asynccontextmanager
async def _http_transport(spec: McpServerSpec) -> AsyncGenerator[Any]:
    """The SDK's streamable-HTTP client. A server that went away is noticed at the next request, whose failure
    closes the connection (the call reports it and the supervisor reconnects)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    assert spec.url is not None  # checked by McpServerSpec
    # A long read timeout: the server may hold a response stream open while a tool works.
    timeout = httpx2.Timeout(spec.timeout_s, read=300.0)
    async with (
        httpx2.AsyncClient(headers=dict(spec.headers), timeout=timeout) as http,
        streamable_http_client(spec.url, http_client=http) as streams,
    ):
        yield streams


@asynccontextmanager
async def _stdio_transport(spec: McpServerSpec, link: Link) -> AsyncGenerator[Any]:
    """The SDK's ``stdio_client``, reworked where it falls short for us.

    It writes the server's stderr to a file, not a logger; it stops the process group only when the server itself
    outlives the grace period, leaving a grandchild of a server that exits cleanly running; and it does not say
    when the server went away. Framing follows the SDK: one JSON-RPC message per line, parse errors passed on.
    """
    import mcp_types
    from mcp.shared.message import SessionMessage

    assert spec.command is not None  # checked by McpServerSpec
    process = await open_session_process(
        [spec.command, *spec.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_environment(spec.env),
        cwd=spec.cwd,
    )
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
    stdout_done, stderr_done = anyio.Event(), anyio.Event()

    async def read_stdout() -> None:
        assert process.stdout is not None
        lines = _LineReader(process.stdout, _MAX_LINE)
        try:
            while (line := await lines.read()) is not None:
                if not line.strip():
                    continue
                try:
                    message: SessionMessage | Exception = SessionMessage(
                        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    )
                except ValueError as exc:
                    message = exc  # the session reports it and goes on
                await read_send.send(message)
            # Before the session sees EOF and fails its calls, so the status says why ("exited with code 3").
            link.lose(await _exit_reason(process))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the session is gone: we are shutting down
        except _LineTooLong as exc:
            link.lose(str(exc))
        finally:
            read_send.close()
            stdout_done.set()
        # Keep draining: a server blocked on a full stdout pipe cannot see its stdin close and exit.
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            async for _ in process.stdout:
                pass

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_recv:
                async for message in write_recv:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            link.lose(f"its stdin closed ({describe(exc)})")

    async def read_stderr() -> None:
        assert process.stderr is not None
        lines = _LineReader(process.stderr, _MAX_LOG_LINE, cut=True)
        try:
            while (line := await lines.read()) is not None:
                text = line.decode(errors="replace").rstrip("\r")
                logger.info("[%s] %s", spec.name, text)
                if text.strip():
                    link.stderr_tail.append(text.strip()[:_STDERR_TAIL_CHARS])
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(read_stderr)
        try:
            yield read_recv, write_send
        finally:
            # Stopping must finish even when we are cancelled, or the server would outlive us; every wait is bounded.
            with anyio.CancelScope(shield=True):
                await write_send.aclose()
                # a server that never answered has nothing to finish: it gets no time to, so a process that is
                # leaving (stdin EOF) is not held up by one that never will
                grace_s = spec.stop_grace_s if link.ready else min(spec.stop_grace_s, _UNANSWERED_STOP_S)
                if not await stop_process_group(process, grace_s):
                    logger.warning("MCP server process %d is still alive after SIGKILL; abandoning it", process.pid)
                release_session(process.pid)
                with anyio.move_on_after(_DRAIN_S):  # the server's last words
                    await stderr_done.wait()
                    await stdout_done.wait()
                with anyio.move_on_after(spec.stop_grace_s):
                    await process.aclose()
            tg.cancel_scope.cancel()


class _LineTooLong(Exception):
    pass


class _LineReader:
    """The lines of a byte stream without their ``\\n``; one longer than ``limit`` is cut (``cut``) or an error.

    A line's pieces are joined once, when it ends: a multi-megabyte message arriving in 64 KiB chunks is not copied
    and searched again for every chunk.
    """

    def __init__(self, stream: anyio.abc.ByteReceiveStream, limit: int, *, cut: bool = False) -> None:
        self._stream = stream
        self._limit = limit
        self._cut = cut
        self._pending: list[bytes] = []  # the unfinished line's pieces
        self._pending_size = 0
        self._lines: deque[bytes] = deque()
        self._eof = False

    async def read(self) -> bytes | None:
        """The next line, ``None`` at the end of the stream."""
        while not self._lines:
            if self._eof:
                return None
            try:
                chunk = await self._stream.receive()
            except anyio.EndOfStream:
                self._eof = True
                if self._pending_size:
                    self._lines.append(self._take_pending())
                continue
            if b"\n" in chunk:
                first, *middle, last = chunk.split(b"\n")
                self._pending.append(first)
                self._lines.append(self._take_pending())
                self._lines.extend(middle)
                chunk = last
            if chunk:
                self._pending.append(chunk)
                self._pending_size += len(chunk)
            if self._pending_size > self._limit:
                if not self._cut:
                    raise _LineTooLong(f"it sent a line of more than {self._limit} bytes")
                self._lines.append(self._take_pending())
        return self._lines.popleft()

    def _take_pending(self) -> bytes:
        line = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        return line


async def _exit_reason(process: anyio.abc.Process) -> str:
    if not await wait_until(lambda: process.returncode is not None, _EXIT_CODE_WAIT_S):
        return "it closed its stdout"
    return f"it exited with code {process.returncode}"
