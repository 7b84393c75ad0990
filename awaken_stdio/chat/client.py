"""The ACP side of the chat: launch ``awaken-stdio acp``, open a session, play turns, answer permission requests.

The agent runs as a subprocess, exactly as an editor would launch it, over the same ``JsonRpcPeer`` it serves with.
The chat advertises no ``fs`` or ``terminal`` capability, so the agent uses the local disk and processes; its
stderr (log lines) is shown dimmed through the same console, so it never tears the live area.

Interrupting is one path (:meth:`Chat.interrupt`): ``session/cancel``, and the pending permission question, if any,
answered ``cancelled`` (ACP asks clients to do both). Ctrl-C reaches it as a key at a question on a terminal and as
SIGINT while a turn runs; SIGINT is only caught during a turn.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import traceback
from importlib.resources import files
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from rich.console import Console
from rich.text import Text

from awaken_stdio.chat.commands import Commands
from awaken_stdio.chat.keyboard import Keyboard, LineKeyboard, TerminalKeyboard, history_file
from awaken_stdio.chat.view import View
from awaken_stdio.protocols.jsonrpc import ConnectionClosedError, JsonRpcError, JsonRpcPeer, Params, RequestContext

__all__ = ["AgentLog", "Chat", "ChatError", "main"]

_ANSWERS = {
    **dict.fromkeys(("y", "yes"), "allow_once"),
    **dict.fromkeys(("a", "always"), "allow_always"),
    **dict.fromkeys(("n", "no"), "reject_once"),
}
_SETTLE_S = 0.03
_START_TIMEOUT_S = 30
_EXIT_GRACE_S = 3
_CANCELLED = {"outcome": {"outcome": "cancelled"}}


class ChatError(Exception):
    """A problem that ends the chat, said in one line."""


class Chat:
    """One session with the agent: the conversation loop and the handlers of what the agent sends."""

    def __init__(self, peer: JsonRpcPeer, view: View, keyboard: Keyboard, commands: Commands, log: AgentLog) -> None:
        self.peer = peer
        self.log = log
        self.view = view
        self.keyboard = keyboard
        self.commands = commands
        self.session_id = ""
        self._last_update = 0.0
        self._interrupted = False  # in the current turn
        self._question: anyio.CancelScope | None = None
        self._leaving = False
        peer.register_notification("session/update", self.on_update)
        peer.register("session/request_permission", self.on_permission)

    async def open(self, cwd: str) -> None:
        try:
            with anyio.fail_after(_START_TIMEOUT_S):
                await self.peer.request(
                    "initialize",
                    {
                        "protocolVersion": 1,
                        "clientCapabilities": {},
                        "clientInfo": {"name": "awaken-stdio-chat", "version": "1"},
                    },
                )
                session = await self.peer.request("session/new", {"cwd": cwd, "mcpServers": []})
        except TimeoutError:
            raise ChatError(f"the agent did not answer within {_START_TIMEOUT_S} s") from None
        except ConnectionClosedError:
            raise await self.log.stopped() from None
        except JsonRpcError as exc:
            raise ChatError(exc.message) from None
        self.session_id = session["sessionId"]
        self.commands.options(session.get("configOptions") or [])

    async def converse(self) -> None:
        """Messages until Ctrl-D, end of input or ``/quit``."""
        while not self._leaving:
            try:
                line = (await self.keyboard.message("> ")).strip()
            except KeyboardInterrupt:
                continue  # Ctrl-C at the prompt clears the line, as in a shell
            except EOFError:
                return
            if not line:
                continue
            kind, value = self.commands.classify(line)
            if kind == "local" and value == "quit":
                return
            if kind == "local":
                self.view.markdown(self.commands.help())
            elif kind == "unknown":
                self.view.error(f"unknown command /{value}; /help lists the commands")
            else:
                await self.turn(value)

    async def turn(self, text: str) -> None:
        """One prompt turn; SIGINT (Ctrl-C while the agent works) interrupts it instead of ending the chat."""
        self._interrupted = False
        self.view.start_turn()
        stop: str | None = None
        prompt = {"sessionId": self.session_id, "prompt": [{"type": "text", "text": text}]}
        with self.keyboard.quiet(), anyio.open_signal_receiver(signal.SIGINT) as signals:
            async with anyio.create_task_group() as tg:

                async def interrupt_on_signal() -> None:
                    async for _ in signals:
                        await self.interrupt()

                tg.start_soon(interrupt_on_signal)
                try:
                    stop = str((await self.peer.request("session/prompt", prompt)).get("stopReason"))
                except ConnectionClosedError:
                    raise await self.log.stopped() from None
                except JsonRpcError as exc:
                    self.view.pause()
                    self.view.error(f"agent error: {exc.message}")
                finally:
                    tg.cancel_scope.cancel()
        await self.settle()
        self.view.end_turn(stop)

    async def interrupt(self) -> None:
        """Cancel the turn, and the question being asked if there is one."""
        if self._question is not None:
            self._question.cancel()
        if not self._interrupted:
            self._interrupted = True
            self.view.note("(stopping the turn…)")
            await self.peer.notify("session/cancel", {"sessionId": self.session_id})

    async def settle(self) -> None:
        """Let updates that arrived before a request or an answer render first.

        The peer runs notification handlers in order in one worker but request handlers (and answers) at once,
        so a permission request or the prompt's answer can overtake updates the agent sent before it.
        """
        await anyio.sleep(_SETTLE_S)
        while anyio.current_time() - self._last_update < _SETTLE_S:  # noqa: ASYNC110 - a quiet period: no event says "no more updates"
            await anyio.sleep(_SETTLE_S)

    async def on_update(self, params: Params, ctx: RequestContext) -> None:
        self._last_update = anyio.current_time()
        update = params.get("update", {}) if isinstance(params, dict) else {}
        kind = update.get("sessionUpdate")
        if kind == "available_commands_update":
            self.commands.advertise(update.get("availableCommands") or [])
        elif kind == "config_option_update":
            self.commands.options(update.get("configOptions") or [])
        else:
            self.view.update(update)

    async def on_permission(self, params: Params, ctx: RequestContext) -> dict[str, Any]:
        await self.settle()
        if not isinstance(params, dict) or self._interrupted:
            return _CANCELLED
        title = self.view.question(params.get("toolCall") or {})
        options: dict[str, str] = {}
        for option in params.get("options", []):  # the first of a kind: "yes" to an unknown outcome runs it again
            options.setdefault(option.get("kind"), option.get("optionId"))
        try:
            with anyio.CancelScope() as self._question:
                while True:
                    answer = await self.keyboard.answer(f"Allow {title}? [y]es / [a]lways / [n]o: ")
                    kind = _ANSWERS.get(answer.strip().lower())
                    if kind in options:
                        return {"outcome": {"outcome": "selected", "optionId": options[kind]}}
        except KeyboardInterrupt:
            await self.interrupt()
        except EOFError:
            self._leaving = True
            await self.interrupt()
        finally:
            self._question = None
            self.view.resume()
        return _CANCELLED


def _agent_command(args: argparse.Namespace, demo: bool) -> list[str]:
    command = [sys.executable, "-m", "awaken_stdio", "acp"]
    if demo:
        config = str(files("awaken_stdio").joinpath("data/demo-config.toml"))
        command += ["--config", config, "--store", args.store or "memory://"]
    else:
        command += ["--config", args.config] if args.config else []
        command += ["--store", args.store] if args.store else []
    command += ["--log-level", args.log_level] if args.log_level else []
    command += ["--log-file", args.log_file] if args.log_file else []
    return command


def _demo_workspace() -> str:
    """A fresh temporary directory holding a copy of ``data/demo-workspace``."""
    root = tempfile.mkdtemp(prefix="awaken-demo-")
    for item in files("awaken_stdio").joinpath("data/demo-workspace").iterdir():
        Path(root, item.name).write_bytes(item.read_bytes())
    return root


def _demo_env() -> dict[str, str]:
    """This Python first on PATH, so the tour's ``python hello.py`` runs where ``python`` is not installed."""
    return {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


class AgentLog:
    """The agent's stderr (its log lines), shown dimmed; its last line says why an agent stopped."""

    def __init__(self, view: View) -> None:
        self.view = view
        self.last = ""
        self._closed = anyio.Event()

    async def forward(self, stream: anyio.abc.ByteReceiveStream) -> None:
        buffer = b""
        try:
            async for chunk in stream:
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if text := line.decode(errors="replace").rstrip():
                        self.last = text
                        self.view.agent_log(text)
        finally:
            self._closed.set()

    async def stopped(self) -> ChatError:
        """The error for an agent that went away, once its last words have been read."""
        with anyio.move_on_after(_EXIT_GRACE_S):
            await self._closed.wait()
        return ChatError(f"the agent stopped: {self.last}" if self.last else "the agent stopped")


async def _chat(args: argparse.Namespace) -> int:
    """The chat until the person leaves, or until its terminal hangs up (the window closed) or it is told to stop:
    then the chat ends as when the person leaves, with the shell's 128 + the signal's number."""
    cwd = _demo_workspace() if args.demo else os.getcwd()
    stopped_by: list[int] = []
    code = 0
    try:
        async with anyio.create_task_group() as tg:
            await tg.start(_stop_on_hang_up, tg.cancel_scope, stopped_by)
            code = await _chat_in(args, cwd)
            tg.cancel_scope.cancel()
    finally:
        if args.demo:  # the tour's copy of its sample project: nothing in it is the person's
            shutil.rmtree(cwd, ignore_errors=True)
    return 128 + stopped_by[0] if stopped_by else code


async def _stop_on_hang_up(
    scope: anyio.CancelScope,
    stopped_by: list[int],
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    with anyio.open_signal_receiver(signal.SIGHUP, signal.SIGTERM) as signals:
        task_status.started()
        async for signum in signals:
            stopped_by.append(signum)
            scope.cancel()
            return


async def _chat_in(args: argparse.Namespace, cwd: str) -> int:
    console = Console(highlight=False)
    view = View(console, cwd)
    commands = Commands()
    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    keyboard = TerminalKeyboard(commands, history_file()) if terminal else LineKeyboard()
    if args.demo:
        console.print(Text.assemble(("awaken-stdio demo", "bold"), f": a scripted agent working in {cwd}"))
        console.print("Type anything and press Enter to start the tour; /help lists the commands, Ctrl-D leaves.")
    try:
        process = await anyio.open_process(
            _agent_command(args, args.demo), cwd=cwd, env=_demo_env() if args.demo else None, start_new_session=True
        )
    except OSError as exc:
        raise ChatError(f"cannot start the agent: {exc}") from None
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    peer = JsonRpcPeer(eof_grace_s=0.2)
    log = AgentLog(view)
    chat = Chat(peer, view, keyboard=keyboard, commands=commands, log=log)
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(log.forward, process.stderr)
        await tg.start(peer.run, process.stdout, process.stdin)
        try:
            await chat.open(cwd)
            await chat.converse()
        finally:
            view.pause()
            peer.close()
            with anyio.CancelScope(shield=True):
                await process.stdin.aclose()
                with anyio.move_on_after(_EXIT_GRACE_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
            tg.cancel_scope.cancel()
    return 0


def _one(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def main(args: argparse.Namespace) -> int:
    """The CLI entry (``awaken-stdio chat [--demo]``): exit 0 when the person leaves, 1 with one line on a problem.

    ``--debug`` (when the command line has it) also prints the traceback.
    """
    try:
        return anyio.run(_chat, args)
    except BaseException as exc:
        problem = _one(exc)
        if isinstance(problem, KeyboardInterrupt):
            return 130
        if not isinstance(problem, Exception):
            raise
        if getattr(args, "debug", False):
            traceback.print_exception(exc)
        what = str(problem) if isinstance(problem, ChatError) else f"{type(problem).__name__}: {problem}"
        sys.stderr.write(f"awaken-stdio chat: {what}\n")
        return 1
