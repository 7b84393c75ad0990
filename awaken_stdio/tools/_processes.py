"""Process groups: signalling and ending a child started with ``start_new_session=True`` and all it started.

Shared by ``LocalProcessRunner`` (``run_command``) and the MCP client's stdio servers, which both start their child
as the leader of its own process group so that a grandchild cannot outlive a stop.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable
from contextlib import suppress

import anyio
import anyio.abc

__all__ = ["group_alive", "signal_group", "stop_process_group", "wait_until"]

_POLL_S = 0.02  # how often a process exit is checked


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
