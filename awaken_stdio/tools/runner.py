"""Running a shell command for a tool: the ``ProcessRunner`` seam and the local one (a session of its own, output
streamed and kept to a tail, the whole process group stopped on timeout or cancellation, nothing left behind)."""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import anyio
import anyio.abc
import anyio.to_thread

from awaken_stdio.tools._processes import open_session_process, release_session, signal_group

__all__ = [
    "TERMINAL_ACTIVITY",
    "LocalProcessRunner",
    "OutputCallback",
    "ProcessResult",
    "ProcessRunner",
    "TerminalCallback",
    "default_shell",
]

# After the shell exits, background jobs it started may hold the output pipe open for ever: read this long, then stop.
_DRAIN_S = 0.3


# -- processes -------------------------------------------------------------------------------------------------

OutputCallback = Callable[[str], Awaitable[None]]
TerminalCallback = Callable[[str], Awaitable[None]]  # given a client terminal's id as soon as it exists
TERMINAL_ACTIVITY = "terminal"  # the tool call activity naming the client terminal it runs in: ``{"terminal_id": ...}``


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessResult:
    """How a command ended. ``output`` is stdout and stderr interleaved, its beginning cut when over the limit."""

    exit_code: int | None  # None when killed by a signal or stopped at the timeout
    output: str
    omitted_chars: int = 0  # cut from the beginning of ``output``
    signal: str | None = None
    timed_out: bool = False
    terminal_id: str | None = None  # an ACP terminal the client shows; None for local processes


async def default_shell() -> str:
    """The shell that runs commands: ``bash`` when it is on the PATH, else ``/bin/sh``."""
    return await anyio.to_thread.run_sync(lambda: shutil.which("bash") or "/bin/sh")


class ProcessRunner(Protocol):
    """Runs shell commands for ``run_command``.

    An implementation streams output to ``on_output`` as it comes, keeps at most ``output_limit`` characters (the
    end, as ACP ``terminal/output`` does), and on timeout or cancellation stops the command and everything it
    started before returning or re-raising. ``env`` adds variables to the agent's environment. One that runs the
    command in a client's terminal names it to ``on_terminal`` first, while the client can still show it.
    """

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
    ) -> ProcessResult: ...


class LocalProcessRunner(ProcessRunner):
    """``ProcessRunner`` on local subprocesses: ``bash -c`` (else ``sh -c``) in a new session, stdin closed.

    The command leads its own session and process group, so a timeout or a cancellation signals the whole group
    (SIGTERM, then SIGKILL after a grace period): a ``sleep`` a script started in the background dies with it.
    Background jobs still running when the shell exits normally are left alone, their output no longer read, until
    the agent ends: the process guard (``tools/_processes.py``) then ends everything left in the session, on any
    exit, kill -9 included. POSIX only.

    Args:
        shell: The shell that runs commands, default ``bash`` when on the PATH, else ``/bin/sh``.
        kill_grace_s: How long a stopped command has between SIGTERM and SIGKILL.
    """

    def __init__(self, shell: str | None = None, *, kill_grace_s: float = 2.0) -> None:
        self._shell = shell
        self._kill_grace_s = kill_grace_s

    async def run(
        self,
        command: str,
        *,
        cwd: Path,
        timeout_s: float,
        output_limit: int,
        env: Mapping[str, str] | None = None,
        on_output: OutputCallback | None = None,
        on_terminal: TerminalCallback | None = None,  # no client terminal here
    ) -> ProcessResult:
        if self._shell is None:
            self._shell = await default_shell()
        process = await open_session_process(
            [self._shell, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
        output = _TailBuffer(output_limit)
        try:
            with anyio.move_on_after(timeout_s) as deadline:
                await _pump_until_exit(process, output, on_output)
        finally:
            with anyio.CancelScope(shield=True):
                if process.returncode is None:
                    await _stop_group(process, self._kill_grace_s)
                await process.aclose()
            release_session(process.pid)
        code = process.returncode
        return ProcessResult(
            exit_code=None if deadline.cancelled_caught or code is None or code < 0 else code,
            output=output.text,
            omitted_chars=output.omitted,
            signal=signal.Signals(-code).name if code is not None and code < 0 else None,
            timed_out=deadline.cancelled_caught,
        )


async def _pump_until_exit(process: anyio.abc.Process, output: _TailBuffer, on_output: OutputCallback | None) -> None:
    assert process.stdout is not None
    stdout = process.stdout
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    drained = anyio.Event()

    async def pump() -> None:
        async for data in stdout:
            text = decoder.decode(data)
            output.append(text)
            if text and on_output is not None:
                await on_output(text)
        output.append(decoder.decode(b"", final=True))
        drained.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(pump)
        await process.wait()
        with anyio.move_on_after(_DRAIN_S):
            await drained.wait()
        tg.cancel_scope.cancel()


async def _stop_group(process: anyio.abc.Process, grace_s: float) -> None:
    """SIGTERM the command's process group, SIGKILL it if the leader is still there after ``grace_s``."""
    signal_group(process, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        await process.wait()
    signal_group(process, signal.SIGKILL)  # also reaches children that outlived the shell
    await process.wait()


class _TailBuffer:
    """Keeps the last ``limit`` characters of a stream and counts what it dropped."""

    __slots__ = ("_chunks", "_size", "limit", "omitted")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.omitted = 0
        self._chunks: list[str] = []
        self._size = 0

    def append(self, text: str) -> None:
        self._chunks.append(text)
        self._size += len(text)
        if self._size > 2 * self.limit:  # compact now and then, not on every chunk
            self._trim()

    def _trim(self) -> None:
        if self._size > self.limit:
            joined = "".join(self._chunks)
            self.omitted += self._size - self.limit
            self._chunks, self._size = [joined[-self.limit :]], self.limit

    @property
    def text(self) -> str:
        self._trim()
        return "".join(self._chunks)
