"""A stdio server's first request, read and answered before the event loop exists.

``import asyncio`` (with ssl) and anyio cost more than everything else a server loads before its first answer, and
the first request of a session is the handshake, which the raw config can answer. So ``acp`` and ``mcp`` read the
first line of input here with blocking reads of fd 0, answer it on fd 1 when it is their ``initialize`` with plain
params, and only then start the event loop, handing the JSON-RPC peer every byte read and not answered
(``JsonRpcPeer.run``'s ``unread`` and ``ended``). Anything else as the first line (another method, a line that is
not JSON or not a plain request, input that ends before a newline) is left whole to the peer, so its answer is the
one it always was.

While it waits, the process behaves as the peer would: SIGTERM stops it with exit 0, SIGINT is Python's
``KeyboardInterrupt`` (130), and a parent that dies ends the input. Standard library only.
"""

from __future__ import annotations

import os
import select
import signal
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, Protocol, TypeVar

from awaken_stdio.protocols.jsonrpc_wire import RequestId, decode_line, encode_frame, valid_id

__all__ = ["Answer", "answer_first_request"]

_READ_CHUNK = 64 * 1024
_MAX_FIRST_LINE = 1024 * 1024  # a longer first line is the peer's (its line limit, its answer)
_PARENT_POLL_S = 0.5


class Answer(Protocol):
    """What answering the first request produced: the result written, and whatever the server keeps of it."""

    @property
    def result(self) -> dict[str, Any]: ...


A = TypeVar("A", bound=Answer)


class _Stopped(Exception):
    """SIGTERM arrived before the first line: the server stops as it would have with the event loop running."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _FirstLine:
    """What was read from fd 0 before the event loop: ``data`` up to and past the first newline, or to EOF."""

    data: bytes
    ended: bool  # fd 0 reached EOF (or the parent died): the peer must not read it again

    @property
    def rest(self) -> bytes:
        """What follows the first line (what the peer reads once that line is answered)."""
        end = self.data.find(b"\n")
        return self.data[end + 1 :] if end >= 0 else self.data

    def request(self, method: str) -> tuple[RequestId, dict[str, Any] | None] | None:
        """``(id, params)`` when the first line is a ``method`` request that the peer would dispatch as it is;
        ``None`` for anything else, whose answer (an error, or another method's) stays the peer's."""
        end = self.data.find(b"\n")
        if end < 0:
            return None  # EOF before a newline: the peer reads it as its last line
        try:
            message = decode_line(self.data[:end].decode())
        except (ValueError, RecursionError):
            return None
        if type(message) is not dict or message.get("jsonrpc") != "2.0" or message.get("method") != method:
            return None
        request_id, params = message.get("id"), message.get("params")
        if not valid_id(request_id) or (params is not None and type(params) is not dict):
            return None
        return request_id, params


def answer_first_request(
    method: str, answer: Callable[[dict[str, Any] | None], A | None]
) -> tuple[bytes, bool, A | None] | None:
    """Read the first line and, when it is a ``method`` request that ``answer`` answers from its params, write the
    answer; ``answer`` returns ``None``, or raises, to leave it to the peer. What the peer then needs: the bytes read
    and not answered, whether input ended, and the answer given; ``None`` when the process should exit 0 at once
    (SIGTERM, or nobody reads the output)."""
    try:
        first = _read_first_line()
    except _Stopped:
        return None
    answered = None
    request = first.request(method)
    if request is not None:
        request_id, params = request
        try:
            answered = answer(params)
        except Exception:  # the peer's handler raises it again, and answers with its error
            answered = None
        if answered is not None and not _write_answer(request_id, answered.result):
            return None
    return (first.data if answered is None else first.rest), first.ended, answered


def _read_first_line(fd: int = 0) -> _FirstLine:
    """Blocking reads of ``fd`` until a newline, EOF, a dead parent or ``_MAX_FIRST_LINE`` bytes; ``_Stopped`` on
    SIGTERM. A read error ends nothing here: the peer reads again and reports it as always."""
    data = b""
    parent = os.getppid()
    try:
        previous = signal.signal(signal.SIGTERM, _stop)
    except ValueError:  # not the main thread: no handler of ours, none to restore
        previous = None
    try:
        while b"\n" not in data and len(data) <= _MAX_FIRST_LINE:
            try:
                if not select.select([fd], [], [], _PARENT_POLL_S)[0]:
                    if os.getppid() != parent:  # orphaned: nobody will write, and the peer's watch came too late
                        return _FirstLine(data=data, ended=True)
                    continue
                chunk = os.read(fd, _READ_CHUNK)
            except BlockingIOError:  # an inherited non-blocking fd 0 that select called readable too early
                continue
            except (OSError, ValueError):
                break
            if not chunk:
                return _FirstLine(data=data, ended=True)
            data += chunk
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    return _FirstLine(data=data, ended=False)


def _write_answer(request_id: RequestId, result: Any, fd: int = 1) -> bool:
    """Write the answer to the first request, framed as the peer frames it; ``False`` when the output is closed."""
    view = memoryview(encode_frame({"jsonrpc": "2.0", "id": request_id, "result": result}))
    try:
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                select.select([], [fd], [])
    except OSError:
        return False
    return True


def _stop(signum: int, frame: FrameType | None) -> None:
    raise _Stopped
