"""The mailbox of the SQL backends: the shared logic (``mailbox_core``) over one table seam, one set of statements.

The statements are written once with ``?`` placeholders, in SQL both SQLite and PostgreSQL accept, and numbered
(``$1``...) for PostgreSQL. Each operation is one transaction of the store (``SqlStore._write``): SQLite's runs
whole under ``BEGIN IMMEDIATE`` (every writer serialised: its "lock" on a thread only reads the epoch and writes
nothing but a missing epoch row, so a transaction dirties no page it does not change), PostgreSQL's locks the
thread's row in ``thread_dispatch_epochs`` (``lock_thread``) before it reads the thread's dispatches, so two
processes claiming the same thread take turns and the second sees the first's claim. Rows are validated again when
read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import (
    TERMINAL_STATUSES,
    DispatchRequest,
    EffectRecord,
    RunDispatch,
)
from awaken_stdio.stores._codec import FAR, dumps, loads
from awaken_stdio.stores.mailbox_core import MailboxBase, MailboxTable, Op

if TYPE_CHECKING:
    from awaken_stdio.stores._tx import Transactions, Tx

__all__ = ["SqlMailbox", "open_effects_in", "table_in"]

T = TypeVar("T")
Dialect = Literal["sqlite", "postgres"]

COLUMNS = (
    "dispatch_id, thread_id, run_id, request, priority, dedupe_key, dispatch_epoch, status, available_at, "
    "attempt_count, max_attempts, last_error, claim_token, claimed_by, lease_until, dispatch_instance_id, "
    "run_status, termination, run_response, run_error, completed_at, created_at, updated_at"
)
_NAMES = [c.strip() for c in COLUMNS.split(",")]  # each column is named as its RunDispatch field
_MUTABLE = _NAMES[4:]  # everything after request (priority ... updated_at)
EFFECT_COLUMNS = (
    "thread_id, call_id, run_id, tool_name, arguments, status, decision_id, result, started_at, updated_at, claim_token"
)
_ORDER = "ORDER BY priority, created_at, dispatch_id"


def _marks(n: int) -> str:
    return ", ".join("?" * n)


# -- statements (SQLite spelling; ``_numbered`` makes the PostgreSQL one) ----------------------------------------

LOCK_THREAD = """
    INSERT INTO thread_dispatch_epochs (thread_id, current_epoch) VALUES (?, 0)
    ON CONFLICT (thread_id) DO UPDATE SET current_epoch = thread_dispatch_epochs.current_epoch
    RETURNING current_epoch"""
LOCK_THREAD_OF = """
    INSERT INTO thread_dispatch_epochs (thread_id, current_epoch)
    SELECT thread_id, 0 FROM run_dispatches WHERE dispatch_id = ?
    ON CONFLICT (thread_id) DO UPDATE SET current_epoch = thread_dispatch_epochs.current_epoch
    RETURNING current_epoch"""
EPOCH = "SELECT current_epoch FROM thread_dispatch_epochs WHERE thread_id = ?"
# PostgreSQL only; a thread with rows to claim has its epoch row (``enqueue_and_claim_op`` makes it)
TRY_LOCK_THREAD = f"{EPOCH} FOR UPDATE SKIP LOCKED"
NEW_EPOCH = "INSERT INTO thread_dispatch_epochs (thread_id, current_epoch) VALUES (?, 0)"
SET_EPOCH = "UPDATE thread_dispatch_epochs SET current_epoch = ? WHERE thread_id = ?"
GET = f"SELECT {COLUMNS} FROM run_dispatches WHERE dispatch_id = ?"
GET_WITH_EPOCH = f"""
    SELECT {COLUMNS},
        COALESCE((SELECT current_epoch FROM thread_dispatch_epochs e WHERE e.thread_id = d.thread_id), 0)
    FROM run_dispatches d WHERE dispatch_id = ?"""
INSERT = f"INSERT INTO run_dispatches ({COLUMNS}) VALUES ({_marks(23)})"
UPDATE = f"UPDATE run_dispatches SET {', '.join(c + ' = ?' for c in _MUTABLE)} WHERE dispatch_id = ?"
DEDUPE = """
    SELECT 1 FROM run_dispatches WHERE thread_id = ? AND dedupe_key = ? AND status IN ('queued', 'claimed') LIMIT 1"""
EXPIRED = f"""
    SELECT {COLUMNS} FROM run_dispatches WHERE status = 'claimed' AND lease_until < ?
    ORDER BY lease_until, dispatch_id LIMIT ?"""
COUNTS = "SELECT status, COUNT(*) FROM run_dispatches GROUP BY status"
QUEUED_THREADS = (
    "SELECT DISTINCT thread_id FROM run_dispatches WHERE status = 'queued' AND available_at <= ? ORDER BY 1"
)
QUEUED_FOR_HOLDER = f"""
    SELECT {COLUMNS} FROM run_dispatches WHERE status = 'queued' AND thread_id IN (
        SELECT thread_id FROM run_dispatches WHERE status = 'claimed' AND claimed_by = ?)
    ORDER BY created_at, dispatch_id"""
_TERMINAL_LIST = ", ".join(repr(s) for s in sorted(TERMINAL_STATUSES))
PURGE = f"DELETE FROM run_dispatches WHERE status IN ({_TERMINAL_LIST}) AND updated_at < ?"
PURGE_EFFECTS = "DELETE FROM tool_effects WHERE status = 'finished' AND updated_at < ?"
EFFECT_PUT = f"""
    INSERT INTO tool_effects ({EFFECT_COLUMNS}) VALUES ({_marks(11)})
    ON CONFLICT (thread_id, call_id) DO UPDATE SET run_id = excluded.run_id, tool_name = excluded.tool_name,
        arguments = excluded.arguments, status = excluded.status, decision_id = excluded.decision_id,
        result = excluded.result, started_at = excluded.started_at, updated_at = excluded.updated_at,
        claim_token = excluded.claim_token"""
EFFECTS_OPEN = f"""
    SELECT {EFFECT_COLUMNS} FROM tool_effects WHERE thread_id = ? AND status IN ('started', 'unknown_after_crash')
    ORDER BY started_at, call_id"""
EFFECT_FINISH = (
    "UPDATE tool_effects SET status = 'finished', result = ?, updated_at = ? WHERE thread_id = ? AND call_id = ?"
)


@cache
def thread_rows_sql(n_statuses: int | None) -> str:
    where = "" if n_statuses is None else f" AND status IN ({_marks(n_statuses)})"
    return f"SELECT {COLUMNS} FROM run_dispatches WHERE thread_id = ?{where} {_ORDER} LIMIT ? OFFSET ?"


@cache
def by_status_sql(n: int) -> str:
    return f"""SELECT {COLUMNS} FROM run_dispatches WHERE status IN ({_marks(n)})
        ORDER BY created_at, dispatch_id LIMIT ? OFFSET ?"""


@cache
def effects_unknown_sql(n: int) -> str:
    return f"""UPDATE tool_effects SET status = 'unknown_after_crash', updated_at = ?
        WHERE thread_id = ? AND status = 'started' AND call_id IN ({_marks(n)})"""


@cache
def _numbered(sql: str) -> str:
    """``?`` placeholders as PostgreSQL's ``$1, $2...``."""
    counter = iter(range(1, 1 << 16))
    return re.sub(r"\?", lambda _: f"${next(counter)}", sql)


# -- rows -----------------------------------------------------------------------------------------------------


def _row(d: RunDispatch) -> tuple[Any, ...]:
    return (
        d.dispatch_id,
        d.thread_id,
        d.run_id,
        dumps(d.request.to_json()),
        *_mutable(d),
    )


def _mutable(d: RunDispatch) -> tuple[Any, ...]:
    return (
        d.priority,
        d.dedupe_key,
        d.dispatch_epoch,
        d.status,
        d.available_at,
        d.attempt_count,
        d.max_attempts,
        d.last_error,
        d.claim_token,
        d.claimed_by,
        d.lease_until,
        d.dispatch_instance_id,
        d.run_status,
        dumps(d.termination.to_json()) if d.termination else None,
        d.run_response,
        d.run_error,
        d.completed_at,
        d.created_at,
        d.updated_at,
    )


@lru_cache(maxsize=64)  # the rows in flight (a cycle reads its row a few times within seconds), no more
def _request(text: str) -> DispatchRequest:
    """A row's request, decoded once: it never changes after the insert, and a row is read again by every step of
    its life (claim, fence checks, settle); the record is immutable, so every read may share it."""
    return DispatchRequest.from_json(loads(text))


def _dispatch(r: Sequence[Any]) -> RunDispatch:
    """The row's columns as a record; ``r`` may carry more after them (``GET_WITH_EPOCH``'s epoch)."""
    values: dict[str, Any] = dict(zip(_NAMES, r[: len(_NAMES)], strict=True))
    values["request"] = _request(r[3])
    values["termination"] = TerminationReason.from_json(loads(r[17])) if r[17] is not None else None
    d = RunDispatch(**values)
    d.validate()
    return d


def _effect_row(e: EffectRecord) -> tuple[Any, ...]:
    result = dumps(e.result) if e.result is not None else None
    return (
        e.thread_id,
        e.call_id,
        e.run_id,
        e.tool_name,
        dumps(e.arguments),
        e.status,
        e.decision_id,
        result,
        e.started_at,
        e.updated_at,
        e.claim_token,
    )


def _effect(r: Sequence[Any]) -> EffectRecord:
    result = loads(r[7]) if r[7] is not None else None
    return EffectRecord(
        thread_id=r[0],
        call_id=r[1],
        run_id=r[2],
        tool_name=r[3],
        arguments=loads(r[4]),
        status=r[5],
        decision_id=r[6],
        result=result,
        started_at=r[8],
        updated_at=r[9],
        claim_token=r[10],
    )


class _SqlTable(MailboxTable):
    __slots__ = ("_notify", "_pg", "_read", "_sql", "_tx", "woken")

    def __init__(self, tx: Tx, dialect: Dialect, notify: str | None = None) -> None:
        self._tx = tx
        self._pg = dialect == "postgres"
        self._sql = _numbered if self._pg else str
        self._notify = notify
        self.woken = False
        # the last row ``locked_get`` read (id, columns, epoch), current until this table writes a row: a checkpoint
        # that checks its fence and then settles the same dispatch reads it once
        self._read: tuple[str, Sequence[Any], int] | None = None

    async def wake(self) -> None:
        if not self.woken and self._notify is not None:
            await self._tx.execute(self._notify)  # PostgreSQL delivers it at the commit, and only then
        self.woken = True

    async def _all(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._tx.fetchall(self._sql(sql), *args)

    async def _one(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return await self._tx.fetchone(self._sql(sql), *args)

    async def _run(self, sql: str, *args: Any) -> int:
        return await self._tx.execute(self._sql(sql), *args)

    async def lock_thread(self, thread_id: str) -> int:
        if not self._pg:
            if (row := await self._one(EPOCH, thread_id)) is not None:
                return int(row[0])
            await self._run(NEW_EPOCH, thread_id)
            return 0
        row = await self._one(LOCK_THREAD, thread_id)
        assert row is not None
        return int(row[0])

    async def try_lock_thread(self, thread_id: str) -> int | None:
        if not self._pg:  # SQLite's writers take turns for the whole transaction: there is no row lock to skip
            return await self.lock_thread(thread_id)
        row = await self._one(TRY_LOCK_THREAD, thread_id)
        return int(row[0]) if row is not None else None

    async def locked_get(self, dispatch_id: str) -> tuple[RunDispatch | None, int]:
        if self._read is not None and self._read[0] == dispatch_id:
            return _dispatch(self._read[1]), self._read[2]
        if not self._pg:  # one statement: the row and its thread's epoch (0 while the thread has no epoch row)
            row = await self._one(GET_WITH_EPOCH, dispatch_id)
            epoch = int(row[23]) if row is not None else 0
        else:
            locked = await self._one(LOCK_THREAD_OF, dispatch_id)
            row = await self._one(GET, dispatch_id) if locked is not None else None
            epoch = int(locked[0]) if locked is not None else 0
        if row is None:
            return None, 0
        self._read = (dispatch_id, row, epoch)
        return _dispatch(row), epoch

    async def epoch(self, thread_id: str) -> int:
        row = await self._one(EPOCH, thread_id)
        return int(row[0]) if row is not None else 0

    async def set_epoch(self, thread_id: str, epoch: int) -> None:
        self._read = None
        await self._run(SET_EPOCH, epoch, thread_id)

    async def get(self, dispatch_id: str) -> RunDispatch | None:
        row = await self._one(GET, dispatch_id)
        return _dispatch(row) if row is not None else None

    async def insert(self, d: RunDispatch) -> None:
        self._read = None
        await self._run(INSERT, *_row(d))

    async def update(self, d: RunDispatch) -> None:
        self._read = None
        await self._run(UPDATE, *_mutable(d), d.dispatch_id)

    async def thread_rows(
        self, thread_id: str, statuses: tuple[str, ...] | None, limit: int | None = None, offset: int = 0
    ) -> list[RunDispatch]:
        sql = thread_rows_sql(None if statuses is None else len(statuses))
        rows = await self._all(sql, thread_id, *(statuses or ()), FAR if limit is None else limit, offset)
        return [_dispatch(r) for r in rows]

    async def dedupe_taken(self, thread_id: str, key: str) -> bool:
        return await self._one(DEDUPE, thread_id, key) is not None

    async def expired(self, now: int, limit: int) -> list[RunDispatch]:
        return [_dispatch(r) for r in await self._all(EXPIRED, now, limit)]

    async def by_status(self, statuses: tuple[str, ...], limit: int, offset: int) -> list[RunDispatch]:
        return [_dispatch(r) for r in await self._all(by_status_sql(len(statuses)), *statuses, limit, offset)]

    async def counts(self) -> dict[str, int]:
        return {r[0]: int(r[1]) for r in await self._all(COUNTS)}

    async def queued_threads(self, now: int | None) -> list[str]:
        return [r[0] for r in await self._all(QUEUED_THREADS, FAR if now is None else now)]

    async def queued_for_holder(self, consumer: str) -> list[RunDispatch]:
        return [_dispatch(r) for r in await self._all(QUEUED_FOR_HOLDER, consumer)]

    async def purge(self, older_than: int) -> int:
        self._read = None
        count = await self._run(PURGE, older_than)
        await self._run(PURGE_EFFECTS, older_than)
        return count

    async def effect_put(self, e: EffectRecord) -> None:
        await self._run(EFFECT_PUT, *_effect_row(e))

    async def effect_finish(self, thread_id: str, call_id: str, result: dict[str, Any] | None, now: int) -> None:
        await self._run(EFFECT_FINISH, dumps(result), now, thread_id, call_id)

    async def effects_open(self, thread_id: str) -> list[EffectRecord]:
        return [_effect(r) for r in await self._all(EFFECTS_OPEN, thread_id)]

    async def effects_unknown(self, thread_id: str, call_ids: list[str], now: int) -> None:
        await self._run(effects_unknown_sql(len(call_ids)), now, thread_id, *call_ids)


class SqlMailbox(MailboxBase):
    """The mailbox of an SQLite or PostgreSQL store, in the store's own transactions."""

    def __init__(self, store: Transactions, dialect: Dialect) -> None:
        self._store = store
        self._dialect: Dialect = dialect

    async def _write(self, fn: Op[T]) -> T:
        return await self._store._write(lambda tx: fn(_SqlTable(tx, self._dialect, self._store.notify)))

    async def _read(self, fn: Op[T]) -> T:
        return await self._store._read(lambda tx: fn(_SqlTable(tx, self._dialect)))

    async def _write_urgent(self, fn: Op[T]) -> T:
        return await self._store._write_urgent(lambda tx: fn(_SqlTable(tx, self._dialect)))  # renewals wake nobody


def table_in(tx: Tx, dialect: Dialect, notify: str | None = None) -> MailboxTable:
    """The mailbox's rows inside the caller's transaction (a claim that loads the thread it claims, in one);
    ``notify``: the store's ``Transactions.notify``, where the caller's writes may ``wake`` pollers."""
    return _SqlTable(tx, dialect, notify)


async def open_effects_in(tx: Tx, dialect: Dialect, thread_id: str) -> list[EffectRecord]:
    """``open_effects`` inside the caller's transaction (a thread load's: one hop for both)."""
    return await _SqlTable(tx, dialect).effects_open(thread_id)
