"""One SQLite connection on a thread of its own, so that no statement, nor the lock or disk it may wait for, ever
runs on the event loop's thread: a frozen file system or another process's lock stalls this thread, never the loop.

The loop queues transactions (``urgent`` ones, a lease renewal, in a lane of their own that the thread takes first: a
renewal must not wait behind a burst of checkpoints until its lease has lapsed); the thread takes everything queued at
once (a batch, ``sqlite_tx.run_batch``: writes
queued together commit together) and hands the outcomes back in one loop callback per batch. A caller cancelled
before the thread took its transaction withdraws it (it never runs); once taken, a writer's caller waits until it
has committed or rolled back, so what it reads next is final (a reader's caller leaves at once: a read changes
nothing). The thread is a daemon: a process whose disk never answers can still exit.
"""

from __future__ import annotations

import asyncio
import collections
import queue
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio

from awaken_stdio.stores._sql import Tx
from awaken_stdio.stores.sqlite_tx import Fn, SqliteTx, Work, run_batch

__all__ = ["ConnectionThread"]

T = TypeVar("T")
BATCH_MAX = 64  # transactions taken at once (a group commit holds the write lock for all of them)
_QUEUED, _TAKEN, _WITHDRAWN = 0, 1, 2
_WAKE = "wake"  # queued after an urgent transaction: wakes the thread, which takes the urgent lane first


class _Work(Work):
    """A transaction on its way to the thread, and its outcome on the way back to the loop."""

    __slots__ = ("done", "future", "state", "waiter")

    def __init__(self, begin: str | None, fn: Fn[Any], future: asyncio.Future[Any]) -> None:
        super().__init__(begin, fn)
        self.future = future
        self.state = _QUEUED
        self.done = False  # its outcome reached the loop
        self.waiter: asyncio.Future[None] | None = None  # a cancelled caller waiting for a taken transaction


def _deliver(batch: list[_Work]) -> None:
    """On the loop: every outcome of a batch, in one callback."""
    for work in batch:
        work.done = True
        future = work.future
        if not future.done():  # cancelled callers' futures are
            if work.error is not None:
                future.set_exception(work.error)
            else:
                future.set_result(work.value)
        if work.waiter is not None:
            work.waiter.set_result(None)


def _settle(future: asyncio.Future[None], error: BaseException | None) -> None:
    if not future.done():
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(None)


class ConnectionThread:
    """A connection made and used on one thread; ``run`` a transaction there."""

    def __init__(self, name: str, *, cancelled_waits: bool = True) -> None:
        self._name = name
        self._cancelled_waits = cancelled_waits  # a reader's caller need not wait: nothing it started changes
        self._queue: queue.SimpleQueue[_Work | str | None] = queue.SimpleQueue()
        self._urgent: collections.deque[_Work] = collections.deque()  # taken before anything queued
        self._mutex = threading.Lock()  # a work's state changes (taken or withdrawn) under it
        self._loop = asyncio.get_running_loop()
        self._conn: sqlite3.Connection | None = None
        self._closed = True  # until opened

    async def open(self, connect: Callable[[], sqlite3.Connection]) -> None:
        """Make the connection on the thread (opening a file is disk work too); its error, if it cannot."""
        opened: asyncio.Future[None] = self._loop.create_future()
        threading.Thread(target=self._serve, args=(connect, opened), name=self._name, daemon=True).start()
        self._closed = False
        try:
            await opened
        except BaseException:
            self._closed = True
            self._queue.put(None)
            raise

    async def run(self, begin: str | None, fn: Fn[T], *, urgent: bool = False) -> T:
        """``fn`` in one transaction on the thread (``begin`` None: in autocommit); its result or its error.
        ``urgent``: ahead of everything queued that the thread has not taken yet."""
        if self._closed:
            raise sqlite3.ProgrammingError("the connection is closed")
        work = _Work(begin, fn, self._loop.create_future())
        if urgent:
            self._urgent.append(work)
            self._queue.put(_WAKE)
        else:
            self._queue.put(work)
        try:
            return await work.future
        except asyncio.CancelledError:
            await self._settled_or_withdrawn(work)
            raise

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` given the connection itself, on its thread (a trace callback, a pragma of a test)."""

        async def on(tx: Tx) -> T:
            assert isinstance(tx, SqliteTx)
            return fn(tx.conn)

        return await self.run(None, on)

    async def _settled_or_withdrawn(self, work: _Work) -> None:
        """A cancelled caller: withdraw a transaction the thread has not taken, else wait until it is complete."""
        with self._mutex:
            if work.state == _QUEUED:
                work.state = _WITHDRAWN
                return
        if work.done or not self._cancelled_waits:
            return
        work.waiter = self._loop.create_future()
        with anyio.CancelScope(shield=True):
            await work.waiter

    async def close(self) -> None:
        """Close the connection after everything queued; the thread ends."""
        if self._closed:
            return

        async def close(_: Any) -> None:
            if self._conn is not None:
                self._conn.close()

        try:
            await self.run(None, close)
        finally:
            self._closed = True
            self._queue.put(None)

    def _serve(self, connect: Callable[[], sqlite3.Connection], opened: asyncio.Future[None]) -> None:
        try:
            conn = self._conn = connect()
        except BaseException as exc:
            self._loop.call_soon_threadsafe(_settle, opened, exc)
            return
        self._loop.call_soon_threadsafe(_settle, opened, None)
        while True:
            first = self._queue.get()
            if first is None:
                return
            batch = [first] if isinstance(first, _Work) else []
            end = False
            while len(batch) < BATCH_MAX:
                try:
                    work = self._queue.get_nowait()
                except queue.Empty:
                    break
                if work is None:
                    end = True
                    break
                if isinstance(work, _Work):
                    batch.append(work)
            urgent: list[_Work] = []
            while self._urgent:  # appended before its wake-up was queued: all of them are here by now
                urgent.append(self._urgent.popleft())
            batch = urgent + batch
            with self._mutex:
                batch = [w for w in batch if w.state == _QUEUED]
                for w in batch:
                    w.state = _TAKEN
            if batch:
                run_batch(conn, batch)
                try:
                    self._loop.call_soon_threadsafe(_deliver, batch)
                except RuntimeError:  # the event loop is closed: nobody waits any more
                    return
            if end:
                return
