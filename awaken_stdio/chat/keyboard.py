"""Reading what the person types: messages and answers to the agent's questions.

On a terminal, ``prompt_toolkit`` gives line editing, a history kept between chats (``chat-history`` in the user
data directory) and completion of slash commands; one prompt at a time, so a question that was interrupted leaves
nothing reading behind it. Ctrl-C at a prompt raises ``KeyboardInterrupt`` and Ctrl-D ``EOFError``. On a pipe, lines
are read in a thread and handed out in order (end of input is ``EOFError``); Ctrl-C is then a signal, which the
client handles.
"""

from __future__ import annotations

import contextlib
import sys
import termios
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Protocol

import anyio
import anyio.lowlevel
from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from awaken_stdio.chat.commands import Commands

__all__ = ["Keyboard", "LineKeyboard", "TerminalKeyboard", "history_file"]

_PROMPT_STYLE = "bold"
_QUESTION_STYLE = "ansiyellow bold"


def history_file() -> Path:
    """Where the messages typed in earlier chats are kept (``~/.local/share/awaken-stdio/chat-history`` on Linux)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("awaken-stdio", appauthor=False)) / "chat-history"


class Keyboard(Protocol):
    async def message(self, prompt: str) -> str:
        """The next message (history and completion on)."""
        ...

    async def answer(self, question: str) -> str:
        """An answer to a question (no history, no completion)."""
        ...

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        """While the agent works: keys typed ahead wait for the next prompt instead of echoing into the output."""
        ...


class _SlashCompleter(Completer):
    """``/`` completes command names (with their descriptions), then the argument values a command takes."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if not text.startswith("/"):
            return
        name, space, argument = text[1:].partition(" ")
        if not space:
            for candidate, description in self.commands.names().items():
                if candidate.startswith(name):
                    yield Completion(candidate, start_position=-len(name), display_meta=description)
        elif " " not in argument:
            for value in self.commands.arguments.get(name, []):
                if value.startswith(argument):
                    yield Completion(value, start_position=-len(argument))


class TerminalKeyboard:
    """``prompt_toolkit`` prompts on the terminal."""

    def __init__(self, commands: Commands, history: Path) -> None:
        self._messages: PromptSession[str] = PromptSession(
            history=_history(history), completer=_SlashCompleter(commands), complete_while_typing=True
        )
        self._answers: PromptSession[str] = PromptSession()

    async def message(self, prompt: str) -> str:
        return await self._messages.prompt_async(FormattedText([(_PROMPT_STYLE, prompt)]))

    async def answer(self, question: str) -> str:
        return await self._answers.prompt_async(FormattedText([(_QUESTION_STYLE, question)]))

    @contextlib.contextmanager
    def quiet(self) -> Generator[None]:
        fd = sys.stdin.fileno()
        saved = termios.tcgetattr(fd)
        hushed = list(saved)
        hushed[3] &= ~termios.ECHO  # lflag: no echo; still line-buffered, and Ctrl-C still a signal
        termios.tcsetattr(fd, termios.TCSANOW, hushed)
        try:
            yield
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)


def _history(path: Path) -> History:
    """The persistent history, or one for this chat only when its directory cannot be created."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return InMemoryHistory()
    return FileHistory(path)


class LineKeyboard:
    """Lines from a pipe, read by one daemon thread (a blocked read must not hold up exit) and never lost."""

    def __init__(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str | None](64)
        self._started = self._ended = False

    async def message(self, prompt: str) -> str:
        return await self._line(prompt)

    async def answer(self, question: str) -> str:
        return await self._line(question)

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    async def _line(self, prompt: str) -> str:
        if not self._started:
            self._start()
        sys.stdout.write(prompt)
        sys.stdout.flush()
        line = None if self._ended else await self._receive.receive()
        if line is None:
            self._ended = True
            sys.stdout.write("\n")
            raise EOFError
        return line

    def _start(self) -> None:
        self._started = True
        token = anyio.lowlevel.current_token()

        def read() -> None:
            try:
                for line in sys.stdin:
                    anyio.from_thread.run(self._send.send, line.rstrip("\n"), token=token)
                anyio.from_thread.run(self._send.send, None, token=token)
            except RuntimeError:
                pass  # the chat has ended: nobody reads any more

        threading.Thread(target=read, name="chat-stdin", daemon=True).start()
