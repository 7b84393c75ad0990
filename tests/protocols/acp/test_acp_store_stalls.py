"""The real ``awaken-stdio acp`` process keeps answering while its SQLite store cannot write (issue 25): another
process holding the write lock, or the store's file system frozen (``fsfreeze``, on a loop-mounted ext4 image). During
a prompt, an approval and a cancel, an unknown method is answered within 1 s and ``session/list`` too, a cancel gets
the prompt answered ``cancelled`` within 2 s; once the store can write again, everything is stored and consistent:
the run is over, the approved edit happened at most once, and the session takes the next prompt.

The bounds carry margins (the failure mode is 11 s or forever). The frozen file system needs root, ``mkfs.ext4``
and ``fsfreeze``: it is skipped only where it cannot run outside CI (``CI=true`` makes a missing tool a failure).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from acp import RequestError, text_block

from .conftest import Agent, Harness

pytestmark = pytest.mark.anyio

UNKNOWN_S = 1.0  # an unknown method, session/list
CANCEL_S = 2.0  # a cancel, to the prompt's answer
WRITE = {"name": "write_file", "arguments": {"path": "a.txt", "content": "hi"}}


class ForeignLock:
    """Another process's connection holding the write lock (``BEGIN IMMEDIATE``) in a child process."""

    def __init__(self, database: Path) -> None:
        self.database = database
        self.child: subprocess.Popen[str] | None = None

    async def __aenter__(self) -> None:
        code = (
            "import sqlite3, sys\n"
            f"db = sqlite3.connect({str(self.database)!r}, isolation_level=None, timeout=30)\n"
            "db.execute('BEGIN IMMEDIATE')\n"
            "print('held', flush=True)\n"
            "sys.stdin.readline()\n"
            "db.rollback()\n"
        )
        self.child = subprocess.Popen(
            [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.child.stdout is not None
        line = await anyio.to_thread.run_sync(self.child.stdout.readline)
        assert line.strip() == "held"

    async def __aexit__(self, *exc: object) -> None:
        assert self.child is not None and self.child.stdin is not None and self.child.stdout is not None
        self.child.stdin.close()
        await anyio.to_thread.run_sync(self.child.wait)
        self.child.stdout.close()


class Freeze:
    """The store's file system frozen (``fsfreeze --freeze``), always thawed on the way out."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount

    async def __aenter__(self) -> None:
        subprocess.run(["fsfreeze", "--freeze", str(self.mount)], check=True)

    async def __aexit__(self, *exc: object) -> None:
        subprocess.run(["fsfreeze", "--unfreeze", str(self.mount)], check=True)


def _can_freeze() -> str | None:
    """Why a frozen file system cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root (mount, fsfreeze)"
    missing = [t for t in ("mkfs.ext4", "fsfreeze", "mount", "umount") if shutil.which(t) is None]
    return f"needs {', '.join(missing)} (e2fsprogs, util-linux)" if missing else None


@pytest.fixture
def ext4(tmp_path: Path) -> Iterator[Path]:
    """A loop-mounted ext4 file system of its own, unmounted (and thawed) at the end."""
    problem = _can_freeze()
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the frozen file system test must run in CI: it {problem}")
        pytest.skip(problem)
    image, mount = tmp_path / "ext4.img", tmp_path / "mnt"
    mount.mkdir()
    subprocess.run(["truncate", "-s", "64M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["fsfreeze", "--unfreeze", str(mount)], check=False, capture_output=True)
        subprocess.run(["umount", str(mount)], check=False)
        if os.path.ismount(mount):
            subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(params=["foreign lock", "frozen file system"])
def stall(request: pytest.FixtureRequest, harness: Harness, tmp_path: Path) -> Callable[[], Any]:
    """Where the test's agent keeps its store, and what stalls that store's writes."""
    if request.param == "foreign lock":
        database = tmp_path / "awaken.db"
        return lambda: ForeignLock(database)
    mount: Path = request.getfixturevalue("ext4")
    harness.store = f"sqlite:///{mount / 'awaken.db'}"
    return lambda: Freeze(mount)


async def within(seconds: float, what: Awaitable[Any]) -> Any:
    started = time.monotonic()
    with anyio.fail_after(seconds * 5):  # a clear failure rather than a hang when it is far off
        result = await what
    took = time.monotonic() - started
    assert took < seconds, f"answered after {took:.1f} s"
    return result


async def still_serving(agent: Agent) -> None:
    """An unknown method and ``session/list`` answered within ``UNKNOWN_S`` each."""
    with pytest.raises(RequestError) as info:
        await within(UNKNOWN_S, agent.raw("no/such_method", {}))
    assert info.value.code == -32601
    listed = await within(UNKNOWN_S, agent.conn.list_sessions(cwd=str(agent.workspace)))
    assert listed.sessions


@asynccontextmanager
async def prompting(agent: Agent, session_id: str, text: str) -> AsyncIterator[list[str]]:
    """A prompt in flight; its stop reason is in the list once answered."""
    answers: list[str] = []

    async def prompt() -> None:
        response = await agent.conn.prompt(session_id=session_id, prompt=[text_block(text)])
        answers.append(response.stop_reason)

    async with anyio.create_task_group() as tg:
        tg.start_soon(prompt)
        yield answers


async def cancelled_within(agent: Agent, session_id: str, answers: list[str]) -> None:
    started = time.monotonic()
    await agent.conn.cancel(session_id=session_id)
    with anyio.fail_after(CANCEL_S * 5):
        while not answers:
            await anyio.sleep(0.02)
    took = time.monotonic() - started
    assert answers == ["cancelled"] and took < CANCEL_S, f"{answers} after {took:.1f} s"


async def consistent_after(agent: Agent, session_id: str, database: Path) -> None:
    """Once the store writes again: the session takes the next prompt, no run of it is left running or waiting,
    the edit happened at most once, and the database is whole."""
    assert await agent.prompt(session_id, "again", timeout=60) == "end_turn"
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        statuses = [row[0] for row in db.execute("SELECT status FROM runs")]
        texts = [row[0] for row in db.execute("SELECT body FROM messages ORDER BY thread_id, seq")]
    assert statuses and set(statuses) == {"done"}, statuses
    assert sum('"again"' in t for t in texts) == 1  # the next prompt's message, stored once
    written = agent.workspace / "a.txt"
    assert not written.exists() or written.read_text() == "hi"


def _database(harness: Harness) -> Path:
    return Path(harness.store.removeprefix("sqlite://"))


async def test_a_prompt_while_the_store_cannot_write_is_served_and_cancelled_in_time(
    harness: Harness, stall: Callable[[], Any]
) -> None:
    harness.configure([{"text": "writing", "tool_calls": [WRITE]}, {"text": "done"}, {"text": "again, done"}])
    async with harness.spawn() as agent:
        session_id = await agent.new_session()
        async with stall(), prompting(agent, session_id, "write it") as answers:
            await anyio.sleep(0.5)  # the run is on its way to the store
            await still_serving(agent)
            await cancelled_within(agent, session_id, answers)
            await still_serving(agent)
        assert not agent.client.permissions  # never asked: the question could not be stored
        await consistent_after(agent, session_id, _database(harness))


async def test_an_approval_while_the_store_cannot_write_is_served_and_cancelled_in_time(
    harness: Harness, stall: Callable[[], Any]
) -> None:
    harness.configure([{"text": "writing", "tool_calls": [WRITE]}, {"text": "done"}, {"text": "again, done"}])
    async with harness.spawn() as agent:
        session_id = await agent.new_session()
        agent.client.hold_permission = held = anyio.Event()
        async with prompting(agent, session_id, "write it") as answers:
            with anyio.fail_after(20):
                await agent.client.permission_asked.wait()
            async with stall():
                held.set()  # allowed: the decision is on its way to the store
                await anyio.sleep(0.5)
                await still_serving(agent)
                await cancelled_within(agent, session_id, answers)
                await still_serving(agent)
        await consistent_after(agent, session_id, _database(harness))
