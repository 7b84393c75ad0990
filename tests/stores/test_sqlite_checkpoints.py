"""The SQLite store copies its WAL back into the database off the writer's path (issue 16): a background connection
checkpoints every ``CHECKPOINT_EVERY`` writes, so the WAL restarts after a burst without the writer ever paying for
a checkpoint (SQLite's default puts one, with two fsyncs, on every hundredth write); a WAL that sustained writing
kept from restarting is truncated past ``WAL_BACKSTOP_PAGES`` by the writer's thread, between two writes."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from awaken_stdio.contract.stores import ThreadRecord
from awaken_stdio.stores import open_store, sqlite
from awaken_stdio.stores.sqlite import CHECKPOINT_EVERY, SqliteStore

pytestmark = pytest.mark.anyio


def wal_restarts(wal: Path) -> int:
    """The WAL header's checkpoint sequence number: SQLite bumps it each time a writer restarts the WAL."""
    return struct.unpack(">I", wal.read_bytes()[12:16])[0]


async def burst(store: SqliteStore) -> asyncio.Task[None] | None:
    """Write until a write starts a background checkpoint (seen at once: it is made as the write returns)."""
    for i in range(CHECKPOINT_EVERY):
        await store.save_thread(ThreadRecord(thread_id=f"t{i}", title="x" * 200))
        if store._checkpointing is not None:
            return store._checkpointing
    return None


async def test_a_burst_of_writes_is_checkpointed_behind_the_writer_and_the_wal_restarts(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        wal = tmp_path / "a.db-wal"
        before = wal_restarts(wal)
        running = await burst(store)
        assert running is not None  # started by the writes, on its own connection
        await running
        await store.save_thread(ThreadRecord(thread_id="after"))  # finds the WAL copied back: starts it again
        assert wal_restarts(wal) == before + 1
        rows = await store._writer.call(lambda conn: conn.execute("PRAGMA wal_autocheckpoint").fetchall())
        assert rows == [(2 * sqlite.WAL_BACKSTOP_PAGES,)]  # the writer's own: a backstop only


async def test_closing_waits_for_a_checkpoint_in_flight(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        running = await burst(store)
        assert running is not None and not running.done()
    assert running.done() and running.exception() is None
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert len((await store.list_threads(limit=500)).items) == CHECKPOINT_EVERY - 1  # one write migrated


async def test_a_wal_past_the_backstop_is_truncated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "WAL_BACKSTOP_PAGES", 20)
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        wal = tmp_path / "a.db-wal"
        running = await burst(store)
        assert running is not None
        await running
        assert wal.stat().st_size == 0  # truncated, not just copied back
        await store.save_thread(ThreadRecord(thread_id="after"))
        await store.save_thread(ThreadRecord(thread_id="later"))
        assert {t.thread_id for t in (await store.list_threads(limit=500)).items} >= {"after", "later", "t0"}


async def test_short_lived_writers_beside_a_long_lived_one_keep_the_wal_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Processes that each write fewer than ``CHECKPOINT_EVERY`` times never start a background checkpoint, and the
    long-lived one keeps the file open: the writer's backstop is what still restarts the WAL."""
    monkeypatch.setattr(sqlite, "WAL_BACKSTOP_PAGES", 25)
    url = f"sqlite://{tmp_path}/a.db"
    async with open_store(url):
        for p in range(30):
            async with open_store(url) as short:
                for i in range(20):
                    await short.save_thread(ThreadRecord(thread_id=f"p{p}-{i}", title="x" * 3000))
        pages = (tmp_path / "a.db-wal").stat().st_size // 4120
        assert pages <= 4 * sqlite.WAL_BACKSTOP_PAGES, pages  # 600 writes of a page or more without it


async def test_an_idle_store_copies_its_wal_back_so_closing_it_has_nothing_to_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite checkpoints when the last connection closes (two fsyncs, paid by a process exiting after its input
    ended): the store does it meanwhile, once it had no write for ``IDLE_CHECKPOINT_S``, and only once, and truncates
    the WAL it copied (a burst of writes leaves no file as large as the burst)."""
    monkeypatch.setattr(sqlite, "IDLE_CHECKPOINT_S", 0.02)
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        ran: list[int] = []
        checkpoint = store._checkpoint

        async def counted(*, idle: bool = False) -> None:
            assert idle
            ran.append(store._writes)
            await checkpoint(idle=idle)

        monkeypatch.setattr(store, "_checkpoint", counted)
        for i in range(3):
            await store.save_thread(ThreadRecord(thread_id=f"t{i}"))
        assert ran == []  # not while it writes
        await asyncio.sleep(0.3)
        assert ran == [store._writes]
        await asyncio.sleep(0.1)
        assert len(ran) == 1  # nothing written since: no second one
        assert (tmp_path / "a.db-wal").stat().st_size == 0  # all in the database, the WAL truncated
        await store.save_thread(ThreadRecord(thread_id="after"))  # and the store writes on as ever
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert len((await store.list_threads()).items) == 4
