"""The guard against signals, over its real pipe, started by a ``_Guard`` of this process as the agent starts it.

A death signal comes just after the agent's last line (and its end of the pipe, as with kill -9), or while the guard
is still starting; either way every session it was told about ends. These fail most of the time when the guard's
signal handler raises (a line still in the pipe is lost) or when a signal during start-up kills the guard.
"""

from __future__ import annotations

import array
import fcntl
import os
import signal
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from awaken_stdio.tools._processes import _Guard
from tests.process_sessions import GONE_WITHIN_S, session_members

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SPREAD_S = 300e-6  # the signal comes 0 to 300 µs after the last line: before, while and after the guard reads it


def settled(guard: _Guard) -> bool:
    """Whether the guard read every line and sleeps, which it does only in its ``select``."""
    unread = array.array("i", [0])
    fcntl.ioctl(guard._fd, termios.FIONREAD, unread)
    stat = Path(f"/proc/{guard._pid}/stat").read_bytes()
    return unread[0] == 0 and stat[stat.rindex(b")") + 2 :].split()[0] == b"S"


def wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while not condition():
        assert time.monotonic() < deadline, "the guard did not settle"
        time.sleep(0.01)


def spin(seconds: float) -> None:
    """Wait ``seconds`` without giving up the CPU: a sleep would last far longer than microseconds."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def left_running(sids: list[int]) -> list[int]:
    """The sessions of ``sids`` still running after ``GONE_WITHIN_S`` (none, once all emptied earlier)."""
    deadline = time.monotonic() + GONE_WITHIN_S
    while (left := [sid for sid in sids if session_members(sid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def sessions() -> Iterator[Callable[[], int]]:
    """Starts ``sleep 60`` as the leader of a new session, whose id it returns; kills what is left at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start() -> int:
        started.append(subprocess.Popen(["sleep", "60"], start_new_session=True))
        return started[-1].pid

    yield start
    for process in started:
        process.kill()
        process.wait(10)


@pytest.fixture
def guards() -> Iterator[list[_Guard]]:
    made: list[_Guard] = []
    yield made
    for guard in made:
        if guard._fd >= 0:
            os.close(guard._fd)
        if os.waitpid(guard._pid, os.WNOHANG)[0] == 0:  # our child: reaped here
            os.kill(guard._pid, signal.SIGKILL)
            os.waitpid(guard._pid, 0)


@pytest.mark.parametrize("eof", [False, True], ids=["signal", "eof-then-signal"])
def test_a_session_announced_just_before_a_death_signal_is_ended(
    sessions: Callable[[], int], guards: list[_Guard], eof: bool
) -> None:
    attempts = 8
    earlier, last = [sessions() for _ in range(attempts)], [sessions() for _ in range(attempts)]
    for sid in earlier:
        guards.append(_Guard())
        guards[-1].send(b"+%d\n" % sid)
    for guard in guards:
        wait_for(lambda guard=guard: settled(guard))
    for i, (guard, sid) in enumerate(zip(guards, last, strict=True)):
        guard.send(b"+%d\n" % sid)
        if eof:
            os.close(guard._fd)
            guard._fd = -1
        spin(SPREAD_S * i / attempts)
        os.kill(guard._pid, signal.SIGTERM)
    assert left_running(earlier + last) == []


def test_a_signal_while_the_guard_starts_waits_for_its_handler(
    sessions: Callable[[], int], guards: list[_Guard]
) -> None:
    sid = sessions()
    guards.append(_Guard())
    guards[0].send(b"+%d\n" % sid)  # starts the guard, which takes milliseconds to reach its handler
    os.kill(guards[0]._pid, signal.SIGTERM)  # not its death: the handler ends the session
    assert left_running([sid]) == []
