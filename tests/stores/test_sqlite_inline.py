"""Short SQLite transactions run on the event loop's thread, without the hop to aiosqlite's (issue 16), and only
within bounds: a lock held elsewhere, a transaction past its budget of instructions or rows, and a long streak of
them all leave the event loop serving; a transaction moved to the thread runs there once, whole. (A lock held by
another process: ``test_sqlite_store.test_a_writer_of_another_process_is_waited_out``.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord, ThreadRecord
from awaken_stdio.stores import open_store, sqlite, sqlite_tx
from awaken_stdio.stores.sqlite import SqliteStore

pytestmark = pytest.mark.anyio


def checkpoint(thread_id: str, expected: int, n: int) -> Checkpoint:
    messages = [Message.user(f"message {expected + i}") for i in range(n)]
    return Checkpoint(thread_id, expected, messages, RunRecord(f"r-{thread_id}", thread_id, "a"))


@pytest.fixture
def on_thread(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The ``begin`` of every transaction that ran on a connection's thread from now on."""
    seen: list[str | None] = []
    waiting = sqlite.run_waiting

    def counted(conn: Any, begin: str | None, fn: Any, busy_timeout_ms: int) -> Any:
        seen.append(begin)
        return waiting(conn, begin, fn, busy_timeout_ms)

    monkeypatch.setattr(sqlite, "run_waiting", counted)
    return seen


async def test_short_transactions_run_without_letting_the_loop_turn(
    tmp_path: Path, on_thread: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_tx, "STREAK_S", 60.0)  # a loaded machine may take longer than a streak lasts
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        turned: list[int] = []
        asyncio.get_running_loop().call_soon(turned.append, 1)
        await store.checkpoint(checkpoint("t1", 0, 3))
        loaded = await store.load_thread("t1")
        assert turned == [] and on_thread == []  # no hop to a thread, not even one loop iteration
        assert loaded is not None and len(loaded.messages) == 3


async def test_a_read_past_the_row_budget_is_done_on_the_thread(tmp_path: Path, on_thread: list[str]) -> None:
    url = f"sqlite://{tmp_path}/a.db"
    n = sqlite_tx.INLINE_ROWS + 10
    async with open_store(url) as store:
        await store.checkpoint(checkpoint("t1", 0, n))
    on_thread.clear()
    async with open_store(url) as store:  # a new process: the conversation is not held, it is read whole
        loaded = await store.load_thread("t1")
        assert loaded is not None and [m.text for m in loaded.messages] == [f"message {i}" for i in range(n)]
        assert on_thread == [None]
        assert len(await store.load_messages("t1", limit=5)) == 5  # a short read stays on the loop
        assert on_thread == [None]


async def test_a_write_past_the_instruction_budget_is_rolled_back_and_done_once_on_the_thread(
    tmp_path: Path, on_thread: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_tx, "PROGRESS_EVERY", 10)
    monkeypatch.setattr(sqlite_tx, "INLINE_INSTRUCTIONS", 100)
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        on_thread.clear()
        await store.checkpoint(checkpoint("t1", 0, 40))  # interrupted on the loop mid-way, then redone
        assert on_thread == ["BEGIN IMMEDIATE"]
        await store.checkpoint(checkpoint("t1", 40, 1))  # the count guard agrees: written exactly once
        loaded = await store.load_thread("t1")
        assert loaded is not None and loaded.thread.message_count == 41 == len(loaded.messages)
        assert [m.text for m in loaded.messages] == [f"message {i}" for i in range(41)]


async def test_a_streak_of_inline_transactions_lets_the_loop_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_tx, "STREAK_S", 0.001)  # without the streak, 300 writes would never yield
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        turns, pending = 0, False

        def turned() -> None:
            nonlocal turns, pending
            turns, pending = turns + 1, False

        for i in range(300):  # nothing here awaits anything but the store
            if not pending:
                pending = True
                asyncio.get_running_loop().call_soon(turned)
            await store.save_thread(ThreadRecord(f"t{i}"))
        assert turns >= 2  # the loop turned while the writes went on


async def test_a_budget_running_out_at_the_commit_never_writes_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever instruction the budget runs out at (the BEGIN, a statement, the COMMIT), the write is rolled back
    whole (its ROLLBACK is not refused for want of budget) and happens once, on the thread."""
    monkeypatch.setattr(sqlite_tx, "PROGRESS_EVERY", 1)
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        for budget in range(0, 400, 3):
            monkeypatch.setattr(sqlite_tx, "INLINE_INSTRUCTIONS", budget)
            await store.checkpoint(checkpoint(f"t{budget}", 0, 2))  # a second write would fail the count guard
            loaded = await store.load_thread(f"t{budget}")
            assert loaded is not None and loaded.thread.message_count == 2 == len(loaded.messages)


async def test_large_text_is_written_and_read_on_the_thread(tmp_path: Path, on_thread: list[str]) -> None:
    """A large tool result costs SQLite few instructions but many pages: past ``INLINE_BYTES`` it leaves the loop."""
    big = Message.user("x" * (sqlite_tx.INLINE_BYTES + 1))
    url = f"sqlite://{tmp_path}/a.db"
    async with open_store(url) as store:
        on_thread.clear()
        await store.checkpoint(Checkpoint("t1", 0, [big], RunRecord("r1", "t1", "a")))
        assert on_thread == ["BEGIN IMMEDIATE"]
    on_thread.clear()
    async with open_store(url) as store:
        loaded = await store.load_thread("t1")
        assert loaded is not None and loaded.messages[0].text == big.text
        assert on_thread == [None]
