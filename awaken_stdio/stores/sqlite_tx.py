"""How SQLite transactions run on a connection's own thread: one at a time, or several writes committed together.

A transaction is a function over a ``Tx`` (``Fn``), run whole and synchronously (``_base.drive``: the shared store
logic never suspends). Write transactions queued while the writer was busy are committed together (group commit,
``run_batch``): one ``BEGIN IMMEDIATE``, each function inside a savepoint of its own, one ``COMMIT``. A function that
raises rolls back its savepoint only, so each caller gets its own outcome; none is told before the ``COMMIT`` that
makes its write durable. When the group as a whole fails (its ``COMMIT``, or an error that ended the transaction),
its functions run again one by one, each in its own transaction, as a busy retry would re-run them: only their
statements ran, and every function of this store can run twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from awaken_stdio.stores._base import drive
from awaken_stdio.stores._sql import Tx

__all__ = ["IMMEDIATE", "Fn", "SqliteTx", "Work", "run_batch", "run_transaction", "transient"]

T = TypeVar("T")
Fn = Callable[[Tx], Coroutine[Any, Any, T]]
IMMEDIATE = "BEGIN IMMEDIATE"  # a write: takes the write lock first, so it never fails half-way on an upgrade


class SqliteTx(Tx):
    """Statements straight on the ``sqlite3`` connection, on the thread that runs the transaction."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return self.conn.execute(sql, args).fetchone()

    async def fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return self.conn.execute(sql, args).fetchall()

    async def execute(self, sql: str, *args: Any) -> int:
        return self.conn.execute(sql, args).rowcount

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        self.conn.executemany(sql, rows)


class Work:
    """One transaction to run (``begin`` None: its statements in autocommit) and, once run, its outcome."""

    __slots__ = ("begin", "error", "fn", "value")

    def __init__(self, begin: str | None, fn: Fn[Any]) -> None:
        self.begin, self.fn = begin, fn
        self.value: Any = None
        self.error: BaseException | None = None

    def settle(self, value: Any, error: BaseException | None) -> None:
        self.value, self.error = value, error


def transient(exc: BaseException) -> bool:
    """A lock held by another connection: waiting (busy handler, retries) will get through."""
    return isinstance(exc, sqlite3.OperationalError) and exc.sqlite_errorcode & 0xFF in (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
    )


def run_transaction(conn: sqlite3.Connection, begin: str | None, fn: Fn[T]) -> T:
    """One whole transaction: ``begin``, ``fn``, then COMMIT, or ROLLBACK on any error."""
    tx = SqliteTx(conn)
    if begin is None:
        return drive(fn(tx))
    try:
        conn.execute(begin)
        result = drive(fn(tx))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.rollback()
        raise
    return result


def _run_alone(conn: sqlite3.Connection, work: Work) -> None:
    try:
        value = run_transaction(conn, work.begin, work.fn)
    except Exception as exc:
        work.settle(None, exc)
    else:
        work.settle(value, None)


def _run_group(conn: sqlite3.Connection, group: Sequence[Work]) -> None:
    """Writes committed together: each in a savepoint, settled only once the COMMIT has made them durable."""
    tx = SqliteTx(conn)
    outcomes: list[tuple[Any, Exception | None]] = []
    try:
        conn.execute(IMMEDIATE)
    except sqlite3.Error as exc:  # the lock stayed busy, the disk refused: nobody's transaction ran
        for work in group:
            work.settle(None, exc)
        return
    try:
        for work in group:
            conn.execute("SAVEPOINT w")
            try:
                value = drive(work.fn(tx))
            except Exception as exc:
                if not conn.in_transaction:
                    raise  # the error ended the whole transaction: the group's earlier writes went with it
                conn.execute("ROLLBACK TO w")
                outcomes.append((None, exc))
            else:
                outcomes.append((value, None))
            conn.execute("RELEASE w")
        conn.execute("COMMIT")
    except Exception:
        if conn.in_transaction:
            conn.rollback()
        for work in group:  # each on its own, for an outcome of its own
            _run_alone(conn, work)
        return
    for work, (value, error) in zip(group, outcomes, strict=True):
        work.settle(value, error)


def run_batch(conn: sqlite3.Connection, batch: Sequence[Work]) -> None:
    """Run what was queued, in order: consecutive writes (``IMMEDIATE``) as one group, anything else alone."""
    i = 0
    while i < len(batch):
        j = i
        while j < len(batch) and batch[j].begin == IMMEDIATE:
            j += 1
        if j - i > 1:
            _run_group(conn, batch[i:j])
            i = j
        else:
            _run_alone(conn, batch[i])
            i += 1
