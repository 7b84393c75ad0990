"""``awaken-stdio chat``: a small terminal ACP client of ``awaken-stdio acp``.

It launches the agent as a subprocess, exactly as an editor would, and talks to it over the same ``JsonRpcPeer``
the agent serves with: it renders streamed text, thoughts, tool calls, diffs and the plan, and asks y / a(lways) /
n when the agent wants permission. It advertises no ``fs`` or ``terminal`` capability, so the agent uses the local
disk and processes. ``--demo`` runs the bundled scripted agent in a fresh temporary workspace with an in-memory
store: no API key, nothing touched outside that directory. Ctrl-C cancels the running turn; Ctrl-D (end of input)
or ``/quit`` leaves.
"""

from __future__ import annotations

import argparse
import difflib
import os
import signal
import subprocess
import sys
import tempfile
import threading
from importlib.resources import files
from typing import Any, TextIO

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.protocols.jsonrpc import JsonRpcError, JsonRpcPeer, Params, RequestContext

__all__ = ["main"]

_ANSWERS = {"y": "allow_once", "yes": "allow_once", "a": "allow_always", "always": "allow_always", "n": "reject_once"}
_DIFF_LINES = 40
_OUTPUT_LINES = 6
_SETTLE_S = 0.03


class _Style:
    """ANSI styling, only when writing to a terminal."""

    def __init__(self, out: TextIO) -> None:
        self.on = out.isatty() and os.environ.get("NO_COLOR") is None

    def __call__(self, code: str, text: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on else text


class _Lines:
    """Lines of stdin from a daemon thread (a read blocked on a terminal must not hold up exit); None at EOF."""

    def __init__(self) -> None:
        self._send: MemoryObjectSendStream[str | None]
        self._receive: MemoryObjectReceiveStream[str | None]
        self._send, self._receive = anyio.create_memory_object_stream[str | None](64)

    def start(self) -> None:
        token = anyio.lowlevel.current_token()

        def read() -> None:
            for line in sys.stdin:
                anyio.from_thread.run_sync(self._send.send_nowait, line.rstrip("\n"), token=token)
            anyio.from_thread.run_sync(self._send.send_nowait, None, token=token)

        threading.Thread(target=read, name="chat-stdin", daemon=True).start()

    async def read(self) -> str | None:
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            return None


class ChatClient:
    """Renders updates and answers permission requests for one session."""

    def __init__(self, out: TextIO, lines: _Lines) -> None:
        self.out = out
        self.lines = lines
        self.style = _Style(out)
        self._streaming: str | None = None  # "agent_message_chunk" / "agent_thought_chunk" while text flows
        self._titles: dict[str, str] = {}
        self._last_update = 0.0
        self.eof = False

    async def settle(self) -> None:
        """Let updates that arrived before a request or an answer render first.

        The peer runs notification handlers in order in one worker but request handlers (and answers) at once,
        so a permission request or the prompt's answer can overtake updates the agent sent before it.
        """
        await anyio.sleep(_SETTLE_S)
        while anyio.current_time() - self._last_update < _SETTLE_S:  # noqa: ASYNC110 - a quiet period: no event says "no more updates"
            await anyio.sleep(_SETTLE_S)

    def write(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()

    def _break(self) -> None:
        if self._streaming is not None:
            self.write("\n")
            self._streaming = None

    async def on_update(self, params: Params, ctx: RequestContext) -> None:
        self._last_update = anyio.current_time()
        update = params.get("update", {}) if isinstance(params, dict) else {}
        kind = update.get("sessionUpdate")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = update.get("content", {}).get("text", "")
            if self._streaming != kind:
                self._break()
                self._streaming = kind
                if kind == "agent_thought_chunk":
                    self.write(self.style("2", "thinking: "))
            self.write(self.style("2;3", text) if kind == "agent_thought_chunk" else text)
            return
        self._break()
        if kind == "tool_call":
            self._titles[update["toolCallId"]] = update.get("title", "")
            self.write(
                self.style("36", f"⚙ {update.get('title', '')}") + self.style("2", f"  [{update.get('kind')}]\n")
            )
        elif kind == "tool_call_update":
            self._render_call_update(update)
        elif kind == "plan":
            marks = {"completed": "[x]", "in_progress": "[>]", "pending": "[ ]"}
            self.write(self.style("1", "Plan:\n"))
            for entry in update.get("entries", []):
                self.write(f"  {marks.get(entry.get('status'), '[ ]')} {entry.get('content')}\n")
        elif kind == "current_mode_update":
            self.write(self.style("2", f"(mode: {update.get('currentModeId')})\n"))
        elif kind == "session_info_update" and update.get("title"):
            self.write(self.style("2", f"(session: {update['title']})\n"))

    def _render_call_update(self, update: dict[str, Any]) -> None:
        status = update.get("status")
        if update.get("title"):
            self._titles[update["toolCallId"]] = update["title"]
        title = self._titles.get(update["toolCallId"], update["toolCallId"])
        for item in update.get("content") or []:
            if item.get("type") == "diff":
                self._render_diff(item)
            elif item.get("type") == "content" and status == "failed":
                text = item.get("content", {}).get("text", "")
                self.write(self.style("31", "\n".join(text.splitlines()[:_OUTPUT_LINES])) + "\n")
            elif item.get("type") == "content":
                lines = item.get("content", {}).get("text", "").splitlines()
                more = f"\n  … {len(lines) - _OUTPUT_LINES} more lines" if len(lines) > _OUTPUT_LINES else ""
                self.write(self.style("2", "  " + "\n  ".join(lines[:_OUTPUT_LINES]) + more) + "\n")
        if status == "completed":
            self.write(self.style("32", f"✓ {title}\n"))
        elif status == "failed":
            self.write(self.style("31", f"✗ {title}\n"))

    def _render_diff(self, diff: dict[str, Any]) -> None:
        old = (diff.get("oldText") or "").splitlines()
        new = (diff.get("newText") or "").splitlines()
        path = diff.get("path", "").lstrip("/")
        lines = list(difflib.unified_diff(old, new, f"a/{path}", f"b/{path}", lineterm=""))
        for line in lines[:_DIFF_LINES]:
            color = "32" if line.startswith("+") else "31" if line.startswith("-") else "36" if line[:2] == "@@" else ""
            self.write((self.style(color, line) if color else line) + "\n")
        if len(lines) > _DIFF_LINES:
            self.write(self.style("2", f"… {len(lines) - _DIFF_LINES} more diff lines\n"))

    async def on_permission(self, params: Params, ctx: RequestContext) -> dict[str, Any]:
        await self.settle()
        self._break()
        assert isinstance(params, dict)
        call = params.get("toolCall", {})
        title = call.get("title") or self._titles.get(call.get("toolCallId", ""), "a tool call")
        for item in call.get("content") or []:
            if item.get("type") == "diff":
                self._render_diff(item)
        options = {o["kind"]: o["optionId"] for o in params.get("options", [])}
        while True:
            self.write(self.style("33", f"Allow {title}? [y]es / [a]lways / [n]o: "))
            line = await self.lines.read()
            if line is None:
                self.eof = True
                self.write("\n")
                return {"outcome": {"outcome": "cancelled"}}
            kind = _ANSWERS.get(line.strip().lower())
            if kind in options:
                return {"outcome": {"outcome": "selected", "optionId": options[kind]}}


def _agent_command(args: argparse.Namespace, demo_dir: str | None) -> list[str]:
    command = [sys.executable, "-m", "awaken_stdio", "acp"]
    if demo_dir is not None:
        config = str(files("awaken_stdio").joinpath("data/demo-config.toml"))
        command += ["--config", config, "--store", args.store or "memory://"]
    else:
        command += ["--config", args.config] if args.config else []
        command += ["--store", args.store] if args.store else []
    if args.log_level:
        command += ["--log-level", args.log_level]
    return command


async def _chat(args: argparse.Namespace) -> int:
    demo_dir = tempfile.mkdtemp(prefix="awaken-demo-") if args.demo else None
    cwd = demo_dir or os.getcwd()
    out = sys.stdout
    lines = _Lines()
    lines.start()
    client = ChatClient(out, lines)
    if demo_dir is not None:
        client.write(client.style("1", f"awaken-stdio demo: a scripted agent working in {demo_dir}\n"))
        client.write("Ask it anything (it writes hello.py whatever you say); Ctrl-D or /quit to leave.\n")
    process = await anyio.open_process(_agent_command(args, demo_dir), cwd=cwd, stderr=None, start_new_session=True)
    assert process.stdin is not None and process.stdout is not None
    peer = JsonRpcPeer(eof_grace_s=0.2)
    peer.register_notification("session/update", client.on_update)
    peer.register("session/request_permission", client.on_permission)
    async with process, anyio.create_task_group() as tg:
        await tg.start(peer.run, process.stdout, process.stdin)
        try:
            return await _converse(peer, client, cwd)
        except JsonRpcError as exc:
            client.write(client.style("31", f"\nagent error: {exc.message}\n"))
            return 1
        finally:
            peer.close()
            with anyio.CancelScope(shield=True):
                await process.stdin.aclose()
                with anyio.move_on_after(3):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            tg.cancel_scope.cancel()


async def _converse(peer: JsonRpcPeer, client: ChatClient, cwd: str) -> int:
    with anyio.fail_after(30):
        await peer.request(
            "initialize",
            {
                "protocolVersion": 1,
                "clientCapabilities": {},
                "clientInfo": {"name": "awaken-stdio-chat", "version": "1"},
            },
        )
        session = await peer.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = session["sessionId"]
    while not client.eof:
        client.write(client.style("1", "> "))
        line = await client.lines.read()
        if line is None:
            client.write("\n")
            break
        text = line.strip()
        if not text:
            continue
        if text in ("/quit", "/exit"):
            break
        result = await _prompt(peer, client, session_id, text)
        await client.settle()
        client._break()
        if result != "end_turn":
            client.write(client.style("2", f"({result})\n"))
    return 0


async def _prompt(peer: JsonRpcPeer, client: ChatClient, session_id: str, text: str) -> str:
    """One turn; Ctrl-C sends ``session/cancel`` (the agent answers ``cancelled``) instead of killing the chat."""
    prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        async with anyio.create_task_group() as tg:

            async def cancel_on_interrupt() -> None:
                async for _ in signals:
                    await peer.notify("session/cancel", {"sessionId": session_id})

            tg.start_soon(cancel_on_interrupt)
            result = await peer.request("session/prompt", prompt)
            tg.cancel_scope.cancel()
    return str(result.get("stopReason"))


def main(args: argparse.Namespace) -> int:
    """The CLI entry (``awaken-stdio chat [--demo]``)."""
    try:
        return anyio.run(_chat, args)
    except (subprocess.SubprocessError, OSError) as exc:
        sys.stderr.write(f"awaken-stdio chat: cannot start the agent: {exc}\n")
        return 1
