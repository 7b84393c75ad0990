"""``awaken-stdio chat`` as a person meets it: the real command on a pseudo-terminal, driving the real agent process.

:class:`Terminal` plays the terminal: it gives the chat a controlling tty (so Ctrl-C is a signal when no prompt has
the keyboard, and a key when one has) and draws everything the chat writes on a ``pyte`` screen, which also answers
prompt_toolkit's cursor-position queries. The screen is tall enough that a test's whole session stays on it, so
``expect`` reads what a person would see, spinner frames and prompts redrawn in place included.
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyte
import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS, COLUMNS = 300, 100
# The child takes the pty as its controlling terminal, then becomes the chat (no preexec_fn in a threaded parent).
_AS_CONTROLLING_TTY = (
    "import fcntl, os, sys, termios; fcntl.ioctl(0, termios.TIOCSCTTY, 0); "
    "os.execv(sys.executable, [sys.executable, '-m', 'awaken_stdio', 'chat', *sys.argv[1:]])"
)


def chat_env(data_home: Path) -> dict[str, str]:
    """No API keys from the developer's shell; history and data under ``data_home``; this checkout first."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "NO_COLOR"}
    return env | {"PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(data_home), "TERM": "xterm-256color"}


class _Screen(pyte.Screen):
    """A pyte screen whose answers (cursor position reports) go back to the program, as a terminal's do."""

    def __init__(self, fd: int) -> None:
        super().__init__(COLUMNS, ROWS)
        self._fd = fd

    def write_process_input(self, data: str) -> None:
        os.write(self._fd, data.encode())


class Terminal:
    """One ``awaken-stdio chat`` on a pseudo-terminal of :data:`ROWS` x :data:`COLUMNS`."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
        self.process = subprocess.Popen(
            [sys.executable, "-c", _AS_CONTROLLING_TTY, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        os.close(slave)
        self._fd = master
        self._screen = _Screen(master)
        self._stream = pyte.ByteStream(self._screen)
        self._eof = False
        self._seen = 0  # characters of the screen's text that earlier expects consumed
        self._changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while not self._eof:
            try:
                data = os.read(self._fd, 65536)
            except OSError:  # EIO: the chat closed the terminal
                data = b""
            with self._changed:
                self._stream.feed(data)
                self._eof = not data
                self._changed.notify_all()

    @property
    def text(self) -> str:
        """The screen, top to bottom, trailing blanks removed."""
        with self._changed:
            return "\n".join(line.rstrip() for line in self._screen.display).rstrip()

    def type(self, keys: str) -> None:
        os.write(self._fd, keys.encode())

    def line(self, text: str) -> None:
        self.type(text + "\r")

    def expect(self, pattern: str, timeout: float = 15, *, anywhere: bool = False) -> str:
        """Wait until ``pattern`` (a regex) shows below what earlier expects matched (``anywhere``: on the screen);
        the text up to its end."""
        deadline = time.monotonic() + timeout
        regex = re.compile(pattern)
        with self._changed:
            while (match := regex.search(self.text, 0 if anywhere else self._seen)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or self._eof:
                    raise AssertionError(f"{pattern!r} not shown; the screen:\n{self.text}")
                self._changed.wait(min(left, 0.2))
            start, self._seen = self._seen, max(self._seen, match.end())
            return self.text[start : match.end()]

    def exit_code(self, timeout: float = 10) -> int:
        return self.process.wait(timeout)

    def close(self) -> None:
        """Hang up, as closing the window does (the chat then removes a demo's workspace); kill what stays."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGHUP)
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        os.close(self._fd)


@pytest.fixture
def data_home(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def terminal(tmp_path: Path, data_home: Path) -> Iterator[Callable[..., Terminal]]:
    """Start ``awaken-stdio chat ARGS...`` on a terminal (killed at the end if still running)."""
    started: list[Terminal] = []

    def start(*args: str) -> Terminal:
        started.append(Terminal(list(args), chat_env(data_home), tmp_path))
        return started[-1]

    yield start
    for term in started:
        term.close()
