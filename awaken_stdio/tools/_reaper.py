"""The process guard: ends every session it was told about once the agent that started it is gone.

Each agent process starts one guard (``_processes.py``) the first time a tool starts a process, as
``python -I -S _reaper.py AGENT_PID [--pdeathsig]``, in its own session, with the read end of a pipe as stdin. Only
the agent holds the write end, so the guard reads end-of-file when the agent ends, however it ends: a clean exit,
SIGTERM, or kill -9. On Linux it also asks for ``PR_SET_PDEATHSIG`` (when the agent started it from its main thread),
in case the write end leaked into a process that outlives the agent.

The agent writes one line per event: ``+SID`` when it started a process as the leader of the new session ``SID``,
``-SID`` when it is done with it (the session is then forgotten once empty, so that a recycled number is never
killed). At the end the guard sends SIGTERM to every process of every session it holds (background jobs and
anything else that stayed in the session, found by scanning ``/proc``; elsewhere the session's process group), waits
``TERM_GRACE_S``, sends SIGKILL to what is left, and exits. A process that called ``setsid()`` itself has left the
session and is not found; nothing else escapes.

SIGTERM, SIGHUP and SIGINT (the death signal among them) end the watch like end-of-file, as an event: the handler
only wakes the ``select`` (``signal.set_wakeup_fd``), the guard reads what the agent wrote before it died, then ends.
A handler that raises could fire after end-of-file, outside any ``try``, and kill the guard before it ended
anything, or before a line already in the pipe was read. The agent starts the guard with these signals blocked, so
one that comes while Python starts waits for the handler instead of killing the guard.

Standard library only, no ``awaken_stdio`` import: it runs with ``-I -S`` and starts in a few milliseconds.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TERM_GRACE_S = 1.0  # between SIGTERM and SIGKILL, as ``run_command``'s own stop gives a command
_KILL_FOR_S = 1.0  # how long SIGKILL is repeated at processes that keep forking
_POLL_S = 0.02
_PRUNE_EVERY_S = 1.0  # how often released sessions are checked for being empty
_PR_SET_PDEATHSIG = 1
_LINUX = sys.platform.startswith("linux")
SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)  # each ends the watch like end-of-file


def _wake(signum: int, frame: object) -> None:
    """Nothing: the signal's byte on the wakeup fd is the event, and the end runs to completion whenever it comes."""


def main(argv: list[str]) -> None:
    parent = int(argv[1])
    woken, wake = os.pipe()
    os.set_blocking(wake, False)
    signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
    for sig in SIGNALS:
        signal.signal(sig, _wake)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    if _LINUX and "--pdeathsig" in argv:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    watched: set[int] = set()  # sessions the agent still uses
    released: set[int] = set()  # sessions the agent is done with, kept while something still runs in them
    # An agent that died before the death signal was armed left its lines in the pipe: read what is there.
    _watch(watched, released, woken, follow=os.getppid() == parent)
    _end(watched | released)


def _watch(watched: set[int], released: set[int], woken: int, *, follow: bool) -> None:
    """Follow the agent's lines until end-of-file or a signal on ``woken`` (``follow``), then until what is already
    written was read: lines the agent wrote just before it died are in the pipe when the death signal comes."""
    pending = b""
    next_prune = 0.0
    while True:
        wait = max(0.0, next_prune - time.monotonic()) if released else None
        ready, _, _ = select.select([0, woken], [], [], wait if follow else 0)
        follow = follow and woken not in ready
        if 0 not in ready and not follow:
            return
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:
                return
            *lines, pending = (pending + data).split(b"\n")
            for line in lines:
                sid = int(line[1:])
                if line.startswith(b"+"):
                    watched.add(sid)
                else:
                    watched.discard(sid)
                    released.add(sid)
        if released and time.monotonic() >= next_prune:  # one scan a second at most, whatever the traffic
            released &= _members(released).keys()
            next_prune = time.monotonic() + _PRUNE_EVERY_S


def _end(sessions: set[int]) -> None:
    """SIGTERM every process of ``sessions``, SIGKILL what is left after the grace period."""
    if not sessions:
        return
    _signal(sessions, signal.SIGTERM)
    deadline = time.monotonic() + TERM_GRACE_S
    while _members(sessions) and time.monotonic() < deadline:
        time.sleep(_POLL_S)
    deadline = time.monotonic() + _KILL_FOR_S
    while _members(sessions) and time.monotonic() < deadline:
        _signal(sessions, signal.SIGKILL)  # again each round: a process may have forked meanwhile
        time.sleep(_POLL_S)


def _signal(sessions: set[int], sig: int) -> None:
    for sid in sessions:
        try:
            os.killpg(sid, sig)
        except OSError:
            pass
    for pids in _members(sessions).values():
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def _members(sessions: set[int]) -> dict[int, list[int]]:
    """The live (not zombie) processes of each non-empty session. Without ``/proc``: its process group, if any."""
    if not _LINUX:
        alive: dict[int, list[int]] = {}
        for sid in sessions:
            try:
                os.killpg(sid, 0)
            except ProcessLookupError:
                continue
            except OSError:
                pass
            alive[sid] = []
        return alive
    found: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()  # state, ppid, pgrp, session, ...
        sid = int(fields[3])
        if sid in sessions and fields[0] not in (b"Z", b"X"):
            found.setdefault(sid, []).append(int(name))
    return found


if __name__ == "__main__":
    main(sys.argv)
