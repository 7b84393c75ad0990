"""The editor as the tools' file system and terminal: ``fs/*`` and ``terminal/*`` behind the workspace seam.

Built per session from what the client advertised, and never calling a method it did not (ACP-CLIENTCAP-001/002):
without ``fs.readTextFile`` reads stay local, and so on. Reading through the editor shows the model unsaved
buffers; writing through it lets the editor review the edit; a command in a client terminal is shown live in the
tool call. Listing and search have no ACP method, so they are always local (inherited from ``LocalFileSystem``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio

from awaken_stdio.app.tooling import LocalFileSystem, default_shell
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.workspace import OutputCallback, ProcessResult, ProcessRunner, TerminalCallback, TextWindow
from awaken_stdio.protocols.acp.codes import RESOURCE_NOT_FOUND
from awaken_stdio.protocols.acp.tracing import with_meta
from awaken_stdio.protocols.jsonrpc import JsonRpcError, JsonRpcPeer

__all__ = ["AcpFileSystem", "AcpProcessRunner"]

log = logging.getLogger(__name__)

_RELEASE_TIMEOUT_S = 5.0
Meta = Callable[[], dict[str, str] | None]  # the trace fields of the session's run, for the ``_meta`` of a request


def _tool_error(method: str, exc: JsonRpcError) -> ToolFailure:
    return ToolFailure(f"the editor refused {method}: {exc.message}")


class AcpFileSystem(LocalFileSystem):
    """Reads and writes through the client when it offers them; everything else on the local disk."""

    def __init__(
        self, peer: JsonRpcPeer, session_id: str, *, read: bool, write: bool, meta: Meta | None = None
    ) -> None:
        self._peer = peer
        self._session_id = session_id
        self._read = read
        self._write = write
        self._meta = meta

    async def read_text(self, path: Path, *, line: int | None = None, limit: int | None = None) -> TextWindow:
        if not self._read:
            return await super().read_text(path, line=line, limit=limit)
        try:
            params = with_meta({"sessionId": self._session_id, "path": str(path)}, self._meta)
            answer = await self._peer.request("fs/read_text_file", params)
        except JsonRpcError as exc:
            # Editors differ in how they say "no such file" (-32002, -32603 with a message...): ask the disk.
            if exc.code == RESOURCE_NOT_FOUND or not await anyio.Path(path).exists():
                raise ToolFailure(f"{path} does not exist", "not_found") from None
            raise _tool_error("fs/read_text_file", exc) from None
        text = answer.get("content", "") if isinstance(answer, dict) else ""
        # The whole buffer, then the window here: the tools need the total line count for "N more lines" notes.
        lines = text.splitlines(keepends=True)
        start = (line or 1) - 1
        end = None if limit is None else start + limit
        return TextWindow(text="".join(lines[start:end]), total_lines=len(lines))

    async def write_text(self, path: Path, content: str) -> None:
        if not self._write:
            return await super().write_text(path, content)
        try:
            params = {"sessionId": self._session_id, "path": str(path), "content": content}
            await self._peer.request("fs/write_text_file", with_meta(params, self._meta))
        except JsonRpcError as exc:
            raise _tool_error("fs/write_text_file", exc) from None


class AcpProcessRunner(ProcessRunner):
    """Runs a command in a client terminal: create, embed it (``on_terminal``), wait (bounded), kill on timeout, read
    the output, release.

    The terminal is always released, even when the call is cancelled; a cancelled or timed-out command is killed
    first. Output is not streamed to ``on_output``: the client shows the terminal itself, which it can only once the
    terminal is embedded in the tool call, before ``terminal/release`` (the ACP schema's order).
    """

    def __init__(self, peer: JsonRpcPeer, session_id: str, meta: Meta | None = None) -> None:
        self._peer = peer
        self._session_id = session_id
        self._shell: str | None = None
        self._meta = meta

    async def _call(self, method: str, **params: Any) -> Any:
        return await self._peer.request(method, with_meta({"sessionId": self._session_id, **params}, self._meta))

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        output_limit: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        on_terminal: TerminalCallback | None = None,
    ) -> ProcessResult:
        if self._shell is None:
            self._shell = await default_shell()
        try:
            created = await self._call(
                "terminal/create",
                command=self._shell,
                args=["-c", command],
                cwd=str(cwd),
                env=[{"name": k, "value": v} for k, v in (env or {}).items()],
                outputByteLimit=output_limit,
            )
        except JsonRpcError as exc:
            raise _tool_error("terminal/create", exc) from None
        terminal_id = created["terminalId"]
        exited: dict[str, Any] | None = None
        try:
            if on_terminal is not None:
                await on_terminal(terminal_id)
            with anyio.move_on_after(timeout_s):
                exited = await self._call("terminal/wait_for_exit", terminalId=terminal_id)
            if exited is None:
                await self._call("terminal/kill", terminalId=terminal_id)
            output = await self._call("terminal/output", terminalId=terminal_id)
        except BaseException:
            await self._quietly("terminal/kill", terminal_id)  # cancelled or failed: the command must not outlive us
            raise
        finally:
            await self._quietly("terminal/release", terminal_id)
        status = output.get("exitStatus") or exited or {}
        text = output.get("output", "")
        if output.get("truncated"):
            text = "[earlier output was cut by the editor]\n" + text
        return ProcessResult(
            exit_code=None if exited is None else status.get("exitCode"),
            output=text,
            signal=status.get("signal"),
            timed_out=exited is None,
            terminal_id=terminal_id,
        )

    async def _quietly(self, method: str, terminal_id: str) -> None:
        """Clean-up calls: shielded, bounded, and never masking the error that led here."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(_RELEASE_TIMEOUT_S):
            try:
                await self._call(method, terminalId=terminal_id)
            except JsonRpcError as exc:
                log.debug("%s failed: %s", method, exc)
