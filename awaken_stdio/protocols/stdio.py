"""Stdio plumbing: the protocol owns stdin and stdout; everything else in the process goes to stderr or nowhere.

``open_stdio()`` moves the protocol onto private duplicates of fd 0 and fd 1, then points fd 1 at stderr (and
``sys.stdout`` at ``sys.stderr``) and fd 0 at ``/dev/null``. So a stray ``print()``, a C library's ``printf`` and the
output of any child process land on stderr, never on the wire, and a child that reads stdin cannot steal protocol
bytes. It owns no framing; ``protocols/jsonrpc.py`` does. It needs anyio's asyncio backend: pipes, FIFOs and
sockets are read and written through asyncio pipe transports (no thread per read). Anything else (a regular file, a
terminal, ``/dev/null``), which epoll refuses or which must not be switched to non-blocking mode under the user's
shell, is read by a daemon thread (one stuck in ``read()`` on a terminal must not hold up exit) and written from a
worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import queue
import stat
import sys
import threading
from collections.abc import AsyncGenerator
from typing import IO, Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

__all__ = ["open_stdio"]

_READ_CHUNK = 64 * 1024
_CLOSE_TIMEOUT_S = 0.5  # flushing what the output transport still buffers at exit, if anyone still reads it


@contextlib.asynccontextmanager
async def open_stdio() -> AsyncGenerator[tuple[anyio.abc.ByteReceiveStream, anyio.abc.ByteSendStream]]:
    """Yield ``(reader, writer)`` over the process's stdin and stdout, guarding stdout for the duration.

    On exit the streams are closed, buffered output of the old ``sys.stdout`` and of C stdio is flushed while fd 1
    still points at stderr (the MCP SDK's verified pitfall: a buffered ``print()`` flushed onto the wire at exit),
    and fd 0, fd 1, their blocking modes and ``sys.stdout`` are restored. The heap is then frozen (``gc.freeze``):
    the process exits next, and the interpreter's teardown would otherwise walk every object it holds in collections
    that free nothing worth the time (hundreds of milliseconds between input EOF and exit, on a loaded machine).
    """
    saved_in, saved_out = os.dup(0), os.dup(1)
    blocking_in, blocking_out = os.get_blocking(0), os.get_blocking(1)
    wire_in, wire_out = os.dup(0), os.dup(1)
    old_stdout = sys.stdout
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    _flush(old_stdout)  # anything printed before we started goes to stderr too
    try:
        async with contextlib.AsyncExitStack() as stack:
            try:
                reader = await _open_reader(wire_in)
            except BaseException:
                os.close(wire_out)
                raise
            stack.push_async_callback(_aclose_shielded, reader)
            writer = await _open_writer(wire_out)
            stack.push_async_callback(_aclose_shielded, writer)
            yield reader, writer
    finally:
        _flush(old_stdout)
        _flush(sys.stderr)
        _flush_c_stdio()
        sys.stdout = old_stdout
        for fd, saved, blocking in ((0, saved_in, blocking_in), (1, saved_out, blocking_out)):
            os.dup2(saved, fd)
            os.close(saved)
            os.set_blocking(fd, blocking)
        gc.freeze()


async def _aclose_shielded(stream: anyio.abc.AsyncResource) -> None:
    with anyio.CancelScope(shield=True):
        await stream.aclose()


def _flush(stream: IO[Any] | Any) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stream.flush()


def _flush_c_stdio() -> None:
    """Flush libc's buffers now: at exit they would be written to fd 1, which is the wire again by then."""
    import ctypes  # only here: a few ms, paid at exit

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).fflush(None)


def _uses_transport(fd: int) -> bool:
    """Pipes, FIFOs and sockets only: epoll refuses regular files and ``/dev/null`` (a transport on it hangs),
    and a terminal must not be switched to non-blocking mode under the user's shell."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def _open_reader(fd: int) -> anyio.abc.ByteReceiveStream:
    """A stream that owns ``fd`` (closed here if this fails)."""
    if not _uses_transport(fd):
        return _ThreadReader(fd)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2 * _READ_CHUNK, loop=loop)
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe)
    except BaseException:
        pipe.close()
        raise
    return _PipeReader(reader, transport)


async def _open_writer(fd: int) -> anyio.abc.ByteSendStream:
    """A stream that owns ``fd`` (closed here if this fails)."""
    if not _uses_transport(fd):
        return _ThreadWriter(fd)
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "wb", buffering=0)
    try:
        transport, protocol = await loop.connect_write_pipe(_WriteProtocol, pipe)
    except BaseException:
        pipe.close()
        raise
    return _PipeWriter(transport, protocol)


class _PipeReader(anyio.abc.ByteReceiveStream):
    """A pipe or socket read through an asyncio transport; the transport closes the fd."""

    def __init__(self, reader: asyncio.StreamReader, transport: asyncio.ReadTransport) -> None:
        self._reader = reader
        self._transport = transport

    async def receive(self, max_bytes: int = _READ_CHUNK) -> bytes:
        try:
            data = await self._reader.read(max_bytes)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc
        if not data:
            raise anyio.EndOfStream
        return data

    async def aclose(self) -> None:
        self._transport.close()
        await anyio.lowlevel.checkpoint()


class _WriteProtocol(asyncio.BaseProtocol):
    """Flow control for ``_PipeWriter``: the transport pauses us above its high-water mark."""

    def __init__(self) -> None:
        self.lost = False
        self.writable = asyncio.Event()
        self.writable.set()
        self.closed = asyncio.Event()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self.writable.set()
        self.closed.set()


class _PipeWriter(anyio.abc.ByteSendStream):
    """A pipe or socket written through an asyncio transport.

    ``send`` returns as soon as the transport has the bytes unless it is above its high-water mark, so a burst of
    small writes costs no event-loop round trip each.
    """

    def __init__(self, transport: asyncio.WriteTransport, protocol: _WriteProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    async def send(self, item: bytes) -> None:
        if self._protocol.lost or self._transport.is_closing():
            raise anyio.BrokenResourceError("stdout is closed")
        self._transport.write(item)
        if not self._protocol.writable.is_set():
            await self._protocol.writable.wait()
        if self._protocol.lost:
            raise anyio.BrokenResourceError("stdout is closed")

    async def aclose(self) -> None:
        if not self._transport.is_closing():
            self._transport.close()  # flushes its buffer, then closes the fd
        with anyio.move_on_after(_CLOSE_TIMEOUT_S):
            await self._protocol.closed.wait()
        if not self._protocol.lost:
            self._transport.abort()  # nobody reads what is left: exit anyway


class _ThreadReader(anyio.abc.ByteReceiveStream):
    """Blocking reads in a daemon thread (regular file, terminal, ``/dev/null``), one read per ``receive``.

    A cancelled ``receive`` leaves its read outstanding and the next one takes its result, so no input is lost.
    The thread closes the fd when it stops, never while a read on it may still start.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._requests: queue.SimpleQueue[int | None] = queue.SimpleQueue()
        self._results: asyncio.Queue[bytes | OSError] = asyncio.Queue()
        self._outstanding = False
        self._closed = False
        threading.Thread(target=self._work, name="awaken-stdio-stdin", daemon=True).start()

    def _work(self) -> None:
        try:
            while (max_bytes := self._requests.get()) is not None:
                result: bytes | OSError
                try:
                    result = os.read(self._fd, max_bytes)
                except OSError as exc:
                    result = exc
                try:
                    self._loop.call_soon_threadsafe(self._results.put_nowait, result)
                except RuntimeError:  # the event loop is gone
                    return
        finally:
            os.close(self._fd)

    async def receive(self, max_bytes: int = _READ_CHUNK) -> bytes:
        if self._closed:
            raise anyio.ClosedResourceError
        if not self._outstanding:
            self._requests.put(max_bytes)
            self._outstanding = True
        result = await self._results.get()
        self._outstanding = False
        if isinstance(result, OSError):
            raise anyio.BrokenResourceError from result
        if not result:
            raise anyio.EndOfStream
        return result

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            self._requests.put(None)
        await anyio.lowlevel.checkpoint()


class _ThreadWriter(anyio.abc.ByteSendStream):
    """Blocking writes (regular file, terminal, ``/dev/null``) in a worker thread: a paused terminal stalls only us."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._closed = False

    async def send(self, item: bytes) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        try:
            await anyio.to_thread.run_sync(_write_all, self._fd, item)
        except OSError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            os.close(self._fd)
        await anyio.lowlevel.checkpoint()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
