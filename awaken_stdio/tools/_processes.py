"""Process groups: starting a child in its own session, signalling and ending it and all it started.

Shared by ``LocalProcessRunner`` (``run_command``) and the MCP client's stdio servers, which both start their child
with ``open_session_process``: the leader of a new session and process group, so that a grandchild cannot outlive a
stop, and watched by this process's guard (``_reaper.py``), so that nothing in the session outlives the agent either,
whether it exits, is stopped by a signal or is killed with -9. The guard is one small process per agent, started with
the first child; each child then costs two short writes to a pipe. Without ``posix_spawn``'s ``setsid`` (Windows)
there is no guard: every exit path of the agent stops its children itself, and a kill -9 leaves them running.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc

__all__ = [
    "group_alive",
    "open_session_process",
    "release_session",
    "signal_group",
    "stop_process_group",
    "wait_until",
]

logger = logging.getLogger(__name__)

_POLL_S = 0.02  # how often a process exit is checked
_GUARD_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_reaper.py")


async def open_session_process(command: Sequence[str], **kwargs: Any) -> anyio.abc.Process:
    """``anyio.open_process`` with the child leading a new session that the guard ends when this process ends.

    Call ``release_session(process.pid)`` once the child is done with; what it left running in its session (a
    background job) is still ended with the agent.
    """
    process = await anyio.open_process(command, start_new_session=True, **kwargs)
    _guard.send(b"+%d\n" % process.pid)
    return process


def release_session(pid: int) -> None:
    """The child ``pid`` is done with: the guard forgets its session once nothing runs in it any more."""
    _guard.send(b"-%d\n" % pid)


class _Guard:
    """This process's end of the guard: a pipe that only this process writes to, and what was sent on it.

    Started on first use from the caller's thread (the event loop's, a long-lived one); the death signal is armed
    only when that is the main thread, whose end is the process's end. A guard that died is started again with the
    sessions still watched, and a forked child of ours starts its own.
    """

    def __init__(self) -> None:
        self._owner = 0  # the pid that started the guard
        self._pid = 0
        self._fd = -1
        self._sessions: set[int] = set()

    def send(self, line: bytes) -> None:
        if not hasattr(os, "posix_spawn"):
            return
        pid = int(line[1:])
        if line.startswith(b"+"):
            self._sessions.add(pid)
        else:
            self._sessions.discard(pid)
        try:
            if self._owner != os.getpid():
                if self._fd >= 0:
                    os.close(self._fd)  # a forked copy of ours: its parent's guard must still see the end
                self._start()
            os.write(self._fd, line)
        except BrokenPipeError:
            self._restart()
        except OSError as exc:
            logger.warning("the process guard is not available: %s", exc)

    def _restart(self) -> None:
        """The guard died (and ended what it watched): start another with the sessions still in use."""
        os.close(self._fd)
        with suppress(ChildProcessError):
            os.waitpid(self._pid, os.WNOHANG)
        self._start()
        os.write(self._fd, b"".join(b"+%d\n" % sid for sid in self._sessions))

    def _start(self) -> None:
        from awaken_stdio.tools._reaper import SIGNALS  # not at import: no SIGHUP on Windows, which has no guard

        read, write = os.pipe()  # neither end is inherited by our other children
        argv = [sys.executable, "-I", "-S", _GUARD_SCRIPT, str(os.getpid())]
        if threading.current_thread() is threading.main_thread():
            argv.append("--pdeathsig")
        try:
            self._pid = os.posix_spawn(
                sys.executable,
                argv,
                {},
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, read, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
                ],
                setsid=True,  # a signal to the agent's process group does not reach it
                setsigmask=SIGNALS,  # held until the guard's handler is in place, not lost with the guard
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        self._fd, self._owner = write, os.getpid()


_guard = _Guard()


def signal_group(process: anyio.abc.Process, sig: int) -> None:
    """Send ``sig`` to the process's group; a group already gone is not an error. Windows: the process only."""
    with suppress(ProcessLookupError, PermissionError):
        if sys.platform != "win32":
            os.killpg(process.pid, sig)
        elif sig == signal.SIGTERM:  # no process groups
            process.terminate()
        else:
            process.kill()


async def stop_process_group(process: anyio.abc.Process, grace_s: float) -> bool:
    """End the process and everything in its group: stdin closed, then SIGTERM, then SIGKILL, each after
    ``grace_s``; whether the group is gone.

    The group is signalled even when the leader exited by itself on stdin EOF: a grandchild it left behind is still
    in the group.
    """
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if await wait_until(lambda: process.returncode is not None, grace_s) and not group_alive(process):
        return True
    for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        signal_group(process, sig)
        if await wait_until(lambda: not group_alive(process), grace_s):
            return True
    return False


async def wait_until(condition: Callable[[], bool], limit_s: float) -> bool:
    """Poll ``condition`` for up to ``limit_s``: process exits have no event (asyncio's ``wait()`` also waits for
    the pipes, which a grandchild may hold open)."""
    with anyio.move_on_after(limit_s):
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(_POLL_S)
    return condition()


def group_alive(process: anyio.abc.Process) -> bool:
    """Whether the process or anything in its group still runs; zombies do not count (nobody may reap them)."""
    if process.returncode is None:
        return True
    if sys.platform == "win32":
        return False
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not sys.platform.startswith("linux"):
        return True
    with os.scandir("/proc") as entries:
        return any(_running_in_group(entry.name, process.pid) for entry in entries if entry.name.isdigit())


def _running_in_group(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    fields = stat[stat.rindex(b")") + 2 :].split()  # after "pid (comm) ": state, ppid, pgrp, ...
    return int(fields[2]) == pgid and fields[0] not in (b"Z", b"X")
