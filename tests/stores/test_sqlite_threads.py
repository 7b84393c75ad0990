"""Every SQLite statement runs on a connection's own thread, never on the event loop's (issue 25): a write waiting
for another process's lock leaves the loop and reads going; writes queued together commit together, each with an
outcome of its own (a group whose COMMIT fails is run again one by one); a cancelled caller withdraws a transaction
not yet started, waits for a write already started, and leaves a read at once. (A frozen file system, end to end:
``tests/protocols/acp/test_acp_store_stalls.py``.)"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from awaken_stdio.contract.errors import StoreError, VersionConflict
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord, ThreadRecord
from awaken_stdio.stores import open_store
from awaken_stdio.stores._sql import Tx
from awaken_stdio.stores.sqlite import SqliteStore

pytestmark = pytest.mark.anyio


def checkpoint(thread_id: str, expected: int = 0) -> Checkpoint:
    return Checkpoint(
        thread_id=thread_id,
        expected_message_count=expected,
        messages=[Message.user(f"in {thread_id}")],
        run=RunRecord(run_id=f"r-{thread_id}", thread_id=thread_id, agent_id="a"),
    )


class ForeignLock:
    """Another connection holding the write lock, as another process would, until ``release``."""

    def __init__(self, database: Path) -> None:
        self.db: sqlite3.Connection | None = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
        self.db.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        if self.db is not None:
            self.db.rollback()
            self.db.close()
            self.db = None


async def traced(store: SqliteStore, trace: Any) -> None:
    for db in (store._writer, store._reader, store._checkpointer):
        await db.call(lambda conn: conn.set_trace_callback(trace))


async def test_no_statement_runs_on_the_event_loops_thread(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        threads: set[int] = set()
        await traced(store, lambda sql: threads.add(threading.get_ident()))
        turned: list[int] = []
        for i in range(80):  # past CHECKPOINT_EVERY: a background checkpoint too
            asyncio.get_running_loop().call_soon(turned.append, i)
            await store.checkpoint(checkpoint(f"t{i}"))
            assert turned and turned[-1] == i  # the loop turned while the write ran
            assert await store.load_thread(f"t{i}") is not None
        await store.list_threads(limit=500)
        assert threads and threading.get_ident() not in threads


async def test_a_write_waiting_for_another_processs_lock_leaves_the_loop_and_reads_going(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        await store.checkpoint(checkpoint("before"))
        lock = ForeignLock(tmp_path / "a.db")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.checkpoint, checkpoint("during"))
                started = time.monotonic()
                for _ in range(10):
                    assert await store.load_thread("before") is not None  # the reader goes on beside the wait
                    await anyio.sleep(0.02)
                assert time.monotonic() - started < 1.0
                assert await store.load_thread("during") is None
                lock.release()  # the write waiting on the writer's thread commits
        finally:
            lock.release()
        assert await store.load_thread("during") is not None


async def test_writes_queued_together_commit_together_each_with_its_own_outcome(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        await store.checkpoint(checkpoint("taken"))
        begins: list[str] = []
        await traced(store, lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
        outcomes: dict[str, object] = {}

        async def write(thread_id: str) -> None:
            try:
                await store.checkpoint(checkpoint(thread_id))
                outcomes[thread_id] = "ok"
            except VersionConflict as exc:
                outcomes[thread_id] = exc

        lock = ForeignLock(tmp_path / "a.db")
        try:
            async with anyio.create_task_group() as tg:
                for i in range(20):
                    tg.start_soon(write, f"t{i}")
                    if i == 10:
                        tg.start_soon(write, "taken")  # a first checkpoint of a thread that has one: refused alone
                await anyio.sleep(0.3)  # all queued behind the first, which waits for the lock
                lock.release()
        finally:
            lock.release()
        assert isinstance(outcomes.pop("taken"), VersionConflict)
        assert set(outcomes.values()) == {"ok"} and len(outcomes) == 20
        for i in range(20):
            loaded = await store.load_thread(f"t{i}")
            assert loaded is not None and [m.text for m in loaded.messages] == [f"in t{i}"]
        assert len(begins) <= 3, begins  # the first alone, then the rest together


async def test_a_group_whose_commit_fails_is_run_again_one_by_one(tmp_path: Path) -> None:
    """A deferred foreign key fails only at COMMIT: the group's other writes are stored, the faulty one is not."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        await store._writer.call(
            lambda conn: conn.executescript(
                "CREATE TEMP TABLE parent (id TEXT PRIMARY KEY);"
                "CREATE TEMP TABLE child (p TEXT REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);"
            )
        )

        async def orphan(tx: Tx) -> None:
            await tx.execute("INSERT INTO child VALUES ('nobody')")

        failed: list[BaseException] = []

        async def faulty() -> None:
            try:
                await store._write(orphan)
            except StoreError as exc:
                failed.append(exc)

        lock = ForeignLock(tmp_path / "a.db")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(store.save_thread, ThreadRecord(thread_id="first"))  # waits for the lock; the rest queue
                await anyio.sleep(0.1)
                for i in range(5):
                    tg.start_soon(store.save_thread, ThreadRecord(thread_id=f"t{i}"))
                tg.start_soon(faulty)
                await anyio.sleep(0.2)
                lock.release()
        finally:
            lock.release()
        assert len(failed) == 1 and "FOREIGN KEY" in str(failed[0])
        stored = {t.thread_id for t in (await store.list_threads()).items}
        assert stored == {"first", *(f"t{i}" for i in range(5))}


async def test_a_cancelled_write_is_withdrawn_if_not_started_and_waited_for_if_started(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        lock = ForeignLock(tmp_path / "a.db")
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    store.save_thread, ThreadRecord(thread_id="started")
                )  # taken: waits for the lock on the thread
                await anyio.sleep(0.1)
                tg.start_soon(store.save_thread, ThreadRecord(thread_id="queued"))
                await anyio.sleep(0.1)
                threading.Timer(0.3, lock.release).start()
                tg.cancel_scope.cancel()  # both callers: the queued write never runs, the started one completes
        finally:
            lock.release()
        assert {t.thread_id for t in (await store.list_threads()).items} == {"started"}


async def test_a_cancelled_read_leaves_at_once(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        async with anyio.create_task_group() as tg:
            tg.start_soon(store._reader.call, lambda _: time.sleep(0.5))  # the reader's thread busy (a slow disk)
            await anyio.sleep(0.05)
            started = time.monotonic()
            with anyio.move_on_after(0.05):
                await store.load_thread("t")
            assert time.monotonic() - started < 0.3


async def test_an_urgent_write_goes_ahead_of_the_writes_queued_before_it(tmp_path: Path) -> None:
    """A lease renewal (``extend_lease``) must not wait behind a burst of checkpoints until its lease lapses."""
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        hold, order = threading.Event(), list[str]()

        async def busy(tx: Tx) -> None:
            hold.wait(10)  # on the writer's thread: what follows queues meanwhile

        def writing(name: str) -> Any:
            async def write(tx: Tx) -> None:
                order.append(name)

            return write

        async with anyio.create_task_group() as tg:
            tg.start_soon(store._write, busy)
            await anyio.sleep(0.05)
            for i in range(BULK := 100):  # more than one batch (``BATCH_MAX``)
                tg.start_soon(store._write, writing(f"bulk {i}"))
            await anyio.sleep(0.05)
            tg.start_soon(store._write_urgent, writing("urgent"))
            await anyio.sleep(0.05)
            hold.set()
        assert order[0] == "urgent" and len(order) == BULK + 1, order[:3]


async def test_a_lease_is_renewed_in_the_urgent_lane(tmp_path: Path) -> None:
    async with open_store(f"sqlite://{tmp_path}/a.db") as store:
        assert isinstance(store, SqliteStore)
        urgent: list[bool] = []
        run = store._writer.run

        async def traced(begin: str | None, fn: Any, **kw: Any) -> Any:
            urgent.append(bool(kw.get("urgent")))
            return await run(begin, fn, **kw)

        store._writer.run = traced  # type: ignore[method-assign]
        assert not await store.mailbox.extend_lease("nobody", "token", 1000, 0)
        assert urgent == [True]
