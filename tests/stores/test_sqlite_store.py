"""What only the SQLite backend promises: WAL, 0600, refusing foreign files, waiting out other writers."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from awaken_stdio.contract.errors import StoreUnavailable
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord
from awaken_stdio.stores import open_store, sqlite
from awaken_stdio.stores.retry import RetryPolicy

pytestmark = pytest.mark.anyio


def checkpoint(thread_id: str, expected: int, n: int = 1) -> Checkpoint:
    return Checkpoint(
        thread_id=thread_id,
        expected_message_count=expected,
        messages=[Message.user(str(i)) for i in range(n)],
        run=RunRecord(run_id=f"r-{thread_id}", thread_id=thread_id, agent_id="a"),
    )


def hold_write_lock(path: Path, seconds: float, locked: threading.Event) -> None:
    """Another process's writer, as far as SQLite can tell: a second connection in BEGIN IMMEDIATE."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        locked.set()
        threading.Event().wait(seconds)
        db.execute("COMMIT")
    finally:
        db.close()


async def test_wal_foreign_keys_and_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "awaken.db"
    old_umask = os.umask(0o002)
    try:
        async with open_store(f"sqlite://{path}") as store:
            await store.checkpoint(checkpoint("t1", 0))
            assert path.stat().st_mode & 0o777 == 0o600
            assert (tmp_path / "awaken.db-wal").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old_umask)
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()


async def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "awaken.db"
    async with open_store(f"sqlite://{path}"):
        pass
    path.chmod(0o640)
    async with open_store(f"sqlite://{path}"):
        pass
    assert path.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("content", [b"hello, I am a text file\n", b"\x00" * 200])
async def test_a_file_that_is_not_sqlite_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    with pytest.raises(StoreUnavailable, match=rf"{path} is not an awaken-stdio database \(not an SQLite file\)"):
        await open_store(f"sqlite://{path}")
    assert path.read_bytes() == content
    assert not (tmp_path / "notes.txt-wal").exists()


async def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match="cannot open the database file"):
        await open_store(f"sqlite://{tmp_path}")


async def test_an_empty_file_becomes_a_database(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    async with open_store(f"sqlite://{path}") as store:
        await store.checkpoint(checkpoint("t1", 0))


async def test_a_writer_of_another_process_is_waited_out_while_the_event_loop_serves(tmp_path: Path) -> None:
    """The write first tried on the event loop gives up on the lock at once (busy timeout 0) and waits for it on
    the connection's thread: the loop goes on meanwhile."""
    path = tmp_path / "awaken.db"
    async with open_store(f"sqlite://{path}") as store:
        locked = threading.Event()
        holder = threading.Thread(target=hold_write_lock, args=(path, 0.3, locked))
        holder.start()
        locked.wait()
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(tick)
            with anyio.fail_after(5):
                await store.checkpoint(checkpoint("t1", 0))
            tg.cancel_scope.cancel()
        holder.join()
        assert ticks >= 5
        assert len(await store.load_messages("t1")) == 1


async def test_retries_after_the_busy_timeout_then_gives_up_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "awaken.db"
    monkeypatch.setattr(sqlite, "BUSY_TIMEOUT_MS", 10)
    monkeypatch.setattr(sqlite, "RETRY", RetryPolicy(attempts=40, first_delay_s=0.01, max_delay_s=0.02))
    async with open_store(f"sqlite://{path}") as store:
        locked = threading.Event()
        holder = threading.Thread(target=hold_write_lock, args=(path, 0.15, locked))
        holder.start()
        locked.wait()
        await store.checkpoint(checkpoint("t1", 0))  # busy timeouts of 10 ms: only the retries get it through
        holder.join()

        monkeypatch.setattr(sqlite, "RETRY", RetryPolicy(attempts=2, first_delay_s=0.001, max_delay_s=0.001))
        locked.clear()
        holder = threading.Thread(target=hold_write_lock, args=(path, 0.5, locked))
        holder.start()
        locked.wait()
        with pytest.raises(StoreUnavailable, match="stayed locked by another process after 2 attempts"):
            await store.checkpoint(checkpoint("t1", 1))
        holder.join()
        assert len(await store.load_messages("t1")) == 1
        await store.checkpoint(checkpoint("t1", 1))


async def test_a_cancelled_write_leaves_no_transaction_behind(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path / 'awaken.db'}") as store:
        count = 0
        for delay in (0, 0.0001, 0.0005, 0.001, 0.002):
            with anyio.move_on_after(delay):
                while True:
                    await store.checkpoint(checkpoint("t1", count, 5))
                    count += 5
            count = len(await store.load_messages("t1"))  # the cancelled one is either there or not
        await store.checkpoint(checkpoint("t1", count, 1))
        loaded = await store.load_thread("t1")
        assert loaded is not None and loaded.thread.message_count == count + 1 == len(loaded.messages)


async def test_many_tasks_write_at_once(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path / 'awaken.db'}") as store:

        async def writer(i: int) -> None:
            for n in range(10):
                await store.checkpoint(checkpoint(f"t{i}", n * 2, 2))

        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(writer, i)
        page = await store.list_threads(limit=100)
        assert len(page.items) == 20 and {t.message_count for t in page.items} == {20}
