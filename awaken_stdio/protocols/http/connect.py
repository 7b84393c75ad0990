"""``awaken-stdio connect URL``: an editor that launches its agents over stdio (Zed, JetBrains, Neovim) reaches an
``awaken-stdio serve`` running elsewhere, and shares its sessions, approvals and store with every other client.

Each line the editor writes goes to the server's ``/acp`` WebSocket as one text message; each message from the server
is one line on stdout, and nothing else is (``open_stdio``). A line that is not JSON is answered here with a parse
error: the server ignores such frames, and the editor must not wait forever for an answer.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

import anyio
import anyio.abc

from awaken_stdio.contract.errors import UsageError
from awaken_stdio.protocols.http.token import TOKEN_ENV, token_path
from awaken_stdio.protocols.stdio import open_stdio

if TYPE_CHECKING:
    from websockets.asyncio.client import ClientConnection

__all__ = ["client_token", "connect", "relay", "socket_url"]

log = logging.getLogger(__name__)

OPEN_TIMEOUT_S = 10.0
DRAIN_S = 10.0  # after stdin's end, how long the answers to requests already sent may take to come back


def connect(args: argparse.Namespace) -> int:
    """The ``connect`` command: exits 2 for a bad address or no token, 1 when the server fails it, 0 at stdin's end."""
    try:
        url, token = socket_url(args.url), client_token()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return anyio.run(relay, url, token, backend="asyncio")


def socket_url(url: str) -> str:
    """``ws[s]://host:port/acp`` for what a person may type: ``http[s]://`` becomes ``ws[s]://``; no path means
    ``/acp``. ``ValueError`` for anything else."""
    parts = urlsplit(url if "://" in url else f"ws://{url}")
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None or not parts.hostname:
        raise ValueError(f"{url!r} is not an ws://, wss://, http:// or https:// address of `awaken-stdio serve`")
    return urlunsplit((scheme, parts.netloc, parts.path if parts.path not in ("", "/") else "/acp", parts.query, ""))


def client_token() -> str:
    """The server's token: ``AWAKEN_STDIO_TOKEN``, else the file a ``serve`` on this machine made (never made here:
    a new token would not be the server's)."""
    given = os.environ.get(TOKEN_ENV)
    if given:
        return given
    path = token_path()
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ValueError(f"no token: set {TOKEN_ENV} to the server's token ({path} does not exist here)") from None
    if not token:
        raise ValueError(f"{path} is empty: set {TOKEN_ENV} to the server's token")
    return token


async def relay(url: str, token: str) -> int:
    """Carry the editor's lines to the server and its messages back until either side ends: 0 when the editor closed
    stdin, 1 when the server could not be reached or went away (said on stderr)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

    headers = {"Authorization": f"Bearer {token}"}
    async with open_stdio() as (reader, writer):
        try:
            async with connect(url, additional_headers=headers, max_size=None, open_timeout=OPEN_TIMEOUT_S) as socket:
                editor = _Editor(reader, writer, socket)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(editor.to_server)
                    try:
                        async for message in socket:
                            text = message if isinstance(message, str) else message.decode("utf-8", "replace")
                            editor.answered(text)
                            await writer.send(text.encode() + b"\n")
                    finally:
                        tg.cancel_scope.cancel()
                if editor.done:
                    return 0
                log.error("connect: the server closed the connection (%s)", socket.close_code)
        except InvalidStatus as exc:
            status = exc.response.status_code
            why = {401: "the token was refused", 403: "this Host or Origin is not allowed there"}.get(status, "")
            log.error("connect: %s answered %s%s", url, status, f": {why}" if why else "")
        except ConnectionClosed as exc:
            log.error("connect: the server closed the connection (%s)", exc)
        except (OSError, TimeoutError, WebSocketException) as exc:
            log.error("connect: cannot reach %s: %s", url, exc or type(exc).__name__)
    return 1


class _Editor:
    """The editor's side: its lines to the server, a parse error back for a line that is not JSON."""

    def __init__(
        self, reader: anyio.abc.ByteReceiveStream, writer: anyio.abc.ByteSendStream, socket: ClientConnection
    ) -> None:
        self.reader, self.writer, self.socket = reader, writer, socket
        self.done = False  # the editor closed stdin: the clean end
        self.pending: set[str] = set()  # ids of the editor's requests not answered yet
        self.drained = anyio.Event()

    async def to_server(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = await self.reader.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError):
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                await self._forward(line)
        await self._forward(buffer)
        self.done = True
        if self.pending:
            with anyio.move_on_after(DRAIN_S):
                await self.drained.wait()
        await self.socket.close()

    def answered(self, text: str) -> None:
        """Note the server's answer to one of the editor's requests (a cheap look; never a second parse)."""
        if not self.pending or '"method"' in text:
            return
        try:
            message = json.loads(text)
        except ValueError:
            return
        if isinstance(message, dict):
            self.pending.discard(json.dumps(message.get("id")))
        if not self.pending:
            self.drained.set()

    async def _forward(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            text = line.decode()
            message = json.loads(text)
        except ValueError as exc:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": f"Parse error: {exc}"}}
            await self.writer.send(json.dumps(error).encode() + b"\n")
            return
        if isinstance(message, dict) and "method" in message and "id" in message:
            self.pending.add(json.dumps(message["id"]))
        await self.socket.send(text)
