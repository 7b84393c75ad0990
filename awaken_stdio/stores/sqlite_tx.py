"""Where an SQLite transaction runs: on the event loop's own thread when it is short, on its connection's thread
when it may wait or take long.

A hop to aiosqlite's thread costs two thread wake-ups, 60-100 µs on a loaded two-core machine: more than most of
this store's transactions take to run (a checkpoint of a ten-step run, 150 µs; an approval's claim, 60 µs). So a
transaction is first tried where the caller is (``run_inline``), within bounds that keep the event loop serving:

- it never waits for a lock: the connections' busy timeout is 0, and a lock held by another process sends the
  transaction to the thread (``run_waiting``), where SQLite's busy handler and the store's retries wait as before;
- it gets a budget: ``INLINE_INSTRUCTIONS`` SQLite VM instructions (a progress handler interrupts it past them),
  ``INLINE_ROWS`` rows read (they are decoded where they are read) and ``INLINE_BYTES`` of text written or read.
  Past any, the transaction is rolled back whole and runs again on the thread, as a transaction that met a busy
  lock is retried: only its statements ran;
- consecutive inline transactions that never let the loop turn yield to it once they have held it ``STREAK_S``.

Either way a transaction runs whole, synchronously, on one thread; nothing can interleave with it. The connection
(opened with ``check_same_thread=False``) is used by one thread at a time: the store's per-connection lock is held
across both kinds of run.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from awaken_stdio.stores._base import drive
from awaken_stdio.stores._sql import Tx

__all__ = ["Fn", "NotInline", "SqliteTx", "Streak", "run_inline", "run_transaction", "run_waiting", "transient"]

T = TypeVar("T")
Fn = Callable[[Tx], Coroutine[Any, Any, T]]

PROGRESS_EVERY = 500  # SQLite VM instructions between two looks at an inline transaction's budget
INLINE_INSTRUCTIONS = 10_000  # ~1-3 ms of writing; this store's usual transactions count 100-2,000
INLINE_ROWS = 500  # a long conversation's first load, a full listing: decoded on the thread instead
INLINE_BYTES = 256 << 10  # text written or read: a large tool result costs few instructions but many pages
STREAK_S = 0.005


class NotInline(Exception):
    """The transaction cannot run on the event loop (a lock held elsewhere, or past its budget) and was rolled back
    whole: it runs on the connection's thread instead."""


class SqliteTx(Tx):
    """Statements straight on the ``sqlite3`` connection, on whichever thread runs the transaction."""

    __slots__ = ("_conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    async def fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return self._conn.execute(sql, args).fetchone()

    async def fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return self._conn.execute(sql, args).fetchall()

    async def execute(self, sql: str, *args: Any) -> int:
        return self._conn.execute(sql, args).rowcount

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self._conn.executemany(sql, rows)

    def ending(self) -> None:
        """The transaction's statements are over; its COMMIT or ROLLBACK comes next."""


class _InlineTx(SqliteTx):
    """Statements within the budget: ``INLINE_INSTRUCTIONS`` in all (SQLite's progress handler counts them),
    ``INLINE_ROWS`` rows per read, ``INLINE_BYTES`` of text. Past any, the attempt ends (``NotInline``)."""

    __slots__ = ("bytes", "ticks")

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.ticks = self.bytes = 0
        conn.set_progress_handler(self._tick, PROGRESS_EVERY)

    def _carry(self, values: Sequence[Any]) -> None:
        self.bytes += sum([len(v) for v in values if type(v) is str])
        if self.bytes > INLINE_BYTES:
            raise NotInline(f"more than {INLINE_BYTES} bytes")

    def _tick(self) -> bool:
        self.ticks += 1
        return self.spent  # true interrupts the statement

    @property
    def spent(self) -> bool:
        return self.ticks * PROGRESS_EVERY > INLINE_INSTRUCTIONS

    async def fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None:
        row = self._conn.execute(sql, args).fetchone()
        if row is not None:
            self._carry(row)
        return row

    async def fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        rows = self._conn.execute(sql, args).fetchmany(INLINE_ROWS + 1)
        if len(rows) > INLINE_ROWS:
            raise NotInline(f"more than {INLINE_ROWS} rows")
        for row in rows:
            self._carry(row)
        return rows

    async def execute(self, sql: str, *args: Any) -> int:
        self._carry(args)
        return self._conn.execute(sql, args).rowcount

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        for row in rows:
            self._carry(row)
        self._conn.executemany(sql, rows)

    def ending(self) -> None:
        # Unbudgeted: a ROLLBACK refused for want of budget would leave the transaction open, and a COMMIT must not
        # be interrupted once it may have written (SQLite can look at the handler as a statement returns): it would
        # be done a second time on the thread.
        self._conn.set_progress_handler(None, 0)


def transient(exc: BaseException) -> bool:
    """A lock held by another connection: waiting (busy handler, retries) will get through."""
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


def run_transaction(conn: sqlite3.Connection, begin: str | None, fn: Fn[T], tx: SqliteTx | None = None) -> T:
    """One whole transaction: ``begin``, ``fn``, then COMMIT, or ROLLBACK on any error (``begin`` None: ``fn``'s
    statements in autocommit). A caller cancelled meanwhile leaves a transaction that is complete either way."""
    tx = tx or SqliteTx(conn)
    if begin is None:
        try:
            return drive(fn(tx))
        finally:
            tx.ending()
    try:
        conn.execute(begin)  # inside: interrupted as it returns, a BEGIN leaves its transaction open
        result = drive(fn(tx))
        tx.ending()
        conn.execute("COMMIT")
    except BaseException:
        tx.ending()
        if conn.in_transaction:
            conn.rollback()
        raise
    return result


def run_inline(conn: sqlite3.Connection, begin: str | None, fn: Fn[T]) -> T:
    """The transaction on the calling thread, within its budget and without waiting for a lock; ``NotInline``
    when it has to run on the connection's thread instead (it was rolled back). Other errors propagate."""
    tx = _InlineTx(conn)
    try:
        return run_transaction(conn, begin, fn, tx)
    except sqlite3.OperationalError as exc:
        if tx.spent or transient(exc):
            raise NotInline(str(exc)) from exc
        raise


def run_waiting(conn: sqlite3.Connection, begin: str | None, fn: Fn[T], busy_timeout_ms: int) -> T:
    """The transaction on the connection's thread, where it may wait ``busy_timeout_ms`` for another process's
    lock (the connection's timeout is 0 otherwise, for inline runs)."""
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
    try:
        return run_transaction(conn, begin, fn)
    finally:
        conn.execute("PRAGMA busy_timeout = 0")


class Streak:
    """Inline transactions the event loop has run without turning: past ``STREAK_S`` the next one yields first, so
    a caller looping over the store (a recovery, a bulk import) cannot hold the loop however many it runs."""

    __slots__ = ("_since",)

    def __init__(self) -> None:
        self._since: float | None = None

    def due(self) -> bool:
        now = time.perf_counter()
        if self._since is None:
            self._since = now
            asyncio.get_running_loop().call_soon(self._turned)
            return False
        return now - self._since > STREAK_S

    def _turned(self) -> None:
        self._since = None
