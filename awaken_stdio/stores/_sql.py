"""The store logic both SQL backends share, written once against a four-method transaction seam.

A backend (``sqlite.py``, ``postgres.py``) supplies its dialect's statements as a :class:`Queries` (one named block
per statement, the same parameter order in both), a :class:`Tx` adapter over its driver, and ``_read``/``_write``,
which own transactions, retries and the translation of driver errors. Everything else (what a checkpoint does,
how pages are cut, how rows become records) lives here, so the two backends cannot drift apart.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, TypeVar

from awaken_stdio.contract.errors import VersionConflict
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import RunStatus
from awaken_stdio.contract.mailbox import EffectRecord, MailboxStore, RunDispatch
from awaken_stdio.contract.messages import Message, message_from_json, message_to_json
from awaken_stdio.contract.profile import ProfileEntry
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import (
    Checkpoint,
    LoadedThread,
    Page,
    PermissionGrant,
    RunRecord,
    SessionRecord,
    Store,
    ThreadForRun,
    ThreadRecord,
)
from awaken_stdio.stores._base import BaseStore
from awaken_stdio.stores._codec import (
    FAR,
    answered_calls,
    check_count,
    check_limit,
    check_run_thread,
    decode_cursor,
    dumps,
    grant_from_json,
    loads,
    page_from_rows,
    record_to_json,
    session_from_json,
)
from awaken_stdio.stores._tx import Tx
from awaken_stdio.stores.mailbox_core import Refused, check_fence, enqueue_and_claim_op, settle_with
from awaken_stdio.stores.mailbox_sql import SqlMailbox, open_effects_in, table_in

__all__ = ["THREAD_COLUMNS", "Queries", "SqlStore", "Tx"]

T = TypeVar("T")
CACHED_THREADS = 16  # conversations kept decoded, most recently used first out


@dataclass(frozen=True, slots=True, kw_only=True)
class Queries:
    """Every statement the SQL backends run, by name. Parameters are listed in each block's comment."""

    # -- schema bookkeeping (migrations.py) --
    list_tables: str  # -> (name)
    create_meta: str
    meta_all: str  # -> (key, value)
    meta_set: str  # key, value
    # -- threads --
    thread_bump: str  # added, updated_at, state|NULL, thread_id, expected_count
    thread_insert: str  # thread_id, agent_id, message_count, state|NULL, now, parent_thread_id   (no-op if present)
    thread_ensure: str  # thread_id, agent_id, now, parent_thread_id                             (no-op if present)
    thread_count: str  # thread_id -> (message_count)
    thread_get: str  # thread_id -> thread columns (see _thread)
    thread_probe: str  # thread_id, seq -> thread columns, state, latest run body, the message id at seq
    thread_save: str  # thread_id, title, agent_id, parent_thread_id, metadata, created_at, updated_at
    thread_state_get: str  # thread_id -> (state)
    thread_state_set: str  # state, thread_id
    threads_list: str  # after_updated_at, after_id, limit -> thread columns
    thread_delete: str  # thread_id (messages and runs cascade)
    # -- messages --
    messages_insert: str  # thread_id, seq, message_id, run_id, body
    messages_range: str  # thread_id, first_seq, end_seq -> (body)
    effects_settle: str  # now, thread_id, call_id: an open effect-ledger entry (its result appended) is finished
    # -- runs --
    run_upsert: str  # run_id, thread_id, status, created_at, updated_at, body
    run_get: str  # run_id -> (body)
    run_latest: str  # thread_id -> (body)
    runs_list: str  # statuses|NULL, after_updated_at, after_id, limit -> (body)
    runs_list_thread: str  # thread_id, statuses|NULL, after_updated_at, after_id, limit -> (body)
    # -- profiles --
    profile_get: str  # owner, key -> (value, updated_at)
    profile_set: str  # owner, key, value, updated_at
    profile_delete: str  # owner, key
    profile_list: str  # owner -> (key, value, updated_at)
    profile_clear: str  # owner
    # -- sessions --
    session_upsert: str  # session_id, thread_id, cwd, updated_at, body
    session_get: str  # session_id -> (body)
    sessions_list: str  # after_updated_at, after_id, limit -> (body)
    sessions_list_cwd: str  # cwd, after_updated_at, after_id, limit -> (body)
    session_delete: str  # session_id
    # -- permission grants --
    grant_upsert: str  # grant_id, workspace, created_at, expires_at, body
    grants_list: str  # workspace, now -> (body)
    grant_delete: str  # grant_id


# The column list behind every ``thread_get`` / ``threads_list`` row that ``_thread`` decodes.
THREAD_COLUMNS = "thread_id, title, agent_id, parent_thread_id, message_count, metadata, created_at, updated_at"


def _thread(row: Sequence[Any]) -> ThreadRecord:
    return ThreadRecord(
        thread_id=row[0],
        title=row[1],
        agent_id=row[2],
        parent_thread_id=row[3],
        message_count=row[4],
        metadata=loads(row[5]),
        created_at=row[6],
        updated_at=row[7],
    )


def _run(row: Sequence[Any]) -> RunRecord:
    return RunRecord.from_json(loads(row[0]))


def _run_row(run: RunRecord) -> tuple[Any, ...]:
    return run.run_id, run.thread_id, run.status, run.created_at, run.updated_at, dumps(run.to_json())


def _decoded(rows: list[Sequence[Any]]) -> list[Message]:
    return [message_from_json(loads(r[0])) for r in rows]


def _state(text: str | None) -> PersistedState | None:
    return PersistedState.from_json(loads(text)) if text is not None else None


# what a thread's load read in its transaction: the thread (False: deleted meanwhile), from which message on, and
# its open effect-ledger entries
_Read = tuple[LoadedThread | Literal[False] | None, int, list[EffectRecord]]


class SqlStore(BaseStore, Store):
    """The shared half of the SQLite and PostgreSQL stores."""

    q: Queries
    dialect: Literal["sqlite", "postgres"]
    # run inside a write that made work for pollers (``_tx.Transactions.notify``); SQLite has no one to tell: the
    # other processes' pollers find it at their next tick
    notify: str | None = None

    @cached_property
    def mailbox(self) -> MailboxStore:  # pyright: ignore[reportIncompatibleMethodOverride]  # read-only, as declared
        return SqlMailbox(self, self.dialect)

    async def _write(self, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        """Run ``fn`` in one write transaction, retried as a whole on transient contention."""
        raise NotImplementedError

    async def _write_urgent(self, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        """``_write`` ahead of the writes queued before it, where this backend queues them (``sqlite_thread``)."""
        return await self._write(fn)

    async def _read(self, fn: Callable[[Tx], Coroutine[Any, Any, T]], *, snapshot: bool = False) -> T:
        """Run ``fn`` on a reader; ``snapshot`` makes its statements see one consistent state."""
        raise NotImplementedError

    def _list_param(self, values: list[str] | None) -> Any:
        """A list as one statement parameter (a JSON array for SQLite, an array for PostgreSQL)."""
        raise NotImplementedError

    async def _fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return await self._read(lambda tx: tx.fetchone(sql, *args))

    async def _fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return await self._read(lambda tx: tx.fetchall(sql, *args))

    async def _execute(self, sql: str, *args: Any) -> None:
        await self._write(lambda tx: tx.execute(sql, *args))

    # -- threads ---------------------------------------------------------------------------------------------

    @cached_property
    def _threads(self) -> OrderedDict[str, list[Message]]:
        """The decoded conversations of the threads this process used last (messages are immutable): a load reads
        the thread row, its latest run and only the messages appended since, without a transaction, so a turn
        costs the same at any length. Validated at every load by the count and the id of the last message held, so
        another process's appends are read and a thread deleted and recreated meanwhile is loaded whole again."""
        return OrderedDict()

    def _remember(self, thread_id: str, messages: list[Message]) -> None:
        self._threads[thread_id] = messages
        self._threads.move_to_end(thread_id)
        if len(self._threads) > CACHED_THREADS:
            self._threads.popitem(last=False)

    async def load_thread(self, thread_id: str) -> LoadedThread | None:
        return (await self._load(thread_id, False))[0]

    async def load_thread_for_run(self, thread_id: str) -> ThreadForRun:
        return await self._load(thread_id, True)

    async def claim_for_run(
        self, dispatch: RunDispatch, consumer: str, lease_ms: int, now: int, *, queue_if_busy: bool = True
    ) -> tuple[RunDispatch | None, ThreadForRun | None]:
        claim, thread_id = (
            enqueue_and_claim_op(dispatch, consumer, lease_ms=lease_ms, now=now, queue_if_busy=queue_if_busy),
            dispatch.thread_id,
        )
        held, known, last = self._held(thread_id)

        async def both(tx: Tx) -> tuple[RunDispatch | Refused | None, _Read | None]:
            row = await claim(table_in(tx, self.dialect, self.notify))
            mine = isinstance(row, RunDispatch) and row.claimed_for(consumer)
            return row, await self._read_thread(tx, thread_id, known=known, last=last, effects=True) if mine else None

        row, read = await self._write(both)
        if isinstance(row, Refused):
            raise row.error
        if row is not None and row.status == "queued":
            self.mailbox.wakeup.set()  # for the thread's holder, here too (the claim's ``wake`` told the others)
        return row, await self._thread_read(thread_id, held, known, read) if read is not None else None

    async def _load(self, thread_id: str, effects: bool) -> ThreadForRun:
        held, known, last = self._held(thread_id)
        read = await self._read(lambda tx: self._read_thread(tx, thread_id, known=known, last=last, effects=effects))
        return await self._thread_read(thread_id, held, known, read)

    def _held(self, thread_id: str) -> tuple[list[Message], int, str | None]:
        """The decoded conversation held for the thread, its length and last message id, as a load begins."""
        held = self._threads.get(thread_id) or []
        return held, len(held), held[-1].id if held else None

    async def _read_thread(self, tx: Tx, thread_id: str, known: int, last: str | None, effects: bool) -> _Read:
        """A thread's load inside ``tx`` (a read, or a claim's write), reading only the messages after the ``known``
        ones held (the last being ``last``); ``effects``: with its open effect-ledger entries."""
        q = self.q
        open_effects: list[EffectRecord] = []
        if effects:  # before the thread: an entry settled meanwhile has its result in the messages read next
            open_effects = await open_effects_in(tx, self.dialect, thread_id)
        # No snapshot needed: one statement reads the thread, its state and latest run together, and the
        # messages below the count it saw are committed and never change (append-only, by seq).
        row = await tx.fetchone(q.thread_probe, thread_id, known - 1)
        if row is None:
            return None, 0, open_effects
        count = row[4]
        start = known if known and count >= known and row[10] == last else 0
        rows = await tx.fetchall(q.messages_range, thread_id, start, count) if count > start else []
        if len(rows) != count - start:
            return False, 0, open_effects  # deleted (and perhaps recreated) between the two statements
        latest = _run((row[9],)) if row[9] is not None else None
        return (
            LoadedThread(thread=_thread(row), messages=_decoded(rows), state=_state(row[8]), latest_run=latest),
            start,
            open_effects,
        )

    async def _thread_read(self, thread_id: str, held: list[Message], known: int, read: _Read) -> ThreadForRun:
        """What ``_read_thread`` read, joined to the messages held and kept for the next load."""
        loaded, start, open_effects = read
        if loaded is False or (start and (len(held) != known or self._threads.get(thread_id) is not held)):
            return await self._load_snapshot(thread_id), open_effects  # raced a delete, or a concurrent load of ours
        if loaded is None:
            self._threads.pop(thread_id, None)
            return None, open_effects
        if start:
            held.extend(loaded.messages)
            loaded.messages = list(held)
        self._remember(thread_id, held if start else list(loaded.messages))
        return loaded, open_effects

    async def _load_snapshot(self, thread_id: str) -> LoadedThread | None:
        q = self.q

        async def load(tx: Tx) -> LoadedThread | None:
            row = await tx.fetchone(q.thread_get, thread_id)
            if row is None:
                return None
            messages = await tx.fetchall(q.messages_range, thread_id, 0, FAR)
            latest = await tx.fetchone(q.run_latest, thread_id)
            return LoadedThread(
                thread=_thread(row),
                messages=_decoded(messages),
                state=_state(row[8]),
                latest_run=_run(latest) if latest is not None else None,
            )

        loaded = await self._read(load, snapshot=True)
        if loaded is None:
            self._threads.pop(thread_id, None)
        else:
            self._remember(thread_id, list(loaded.messages))
        return loaded

    async def load_messages(self, thread_id: str, *, offset: int = 0, limit: int | None = None) -> list[Message]:
        end = FAR if limit is None else offset + limit
        rows = await self._fetchall(self.q.messages_range, thread_id, offset, end)
        return _decoded(rows)

    async def checkpoint(self, cp: Checkpoint) -> None:
        check_run_thread(cp)
        q = self.q
        # Encode before the transaction: the write lock is held only for the statements.
        added = len(cp.messages)
        state = dumps(cp.thread_state.to_json()) if cp.thread_state is not None else None
        run_row = _run_row(cp.run)
        first = cp.expected_message_count
        rows = [(cp.thread_id, first + i, m.id, m.run_id, dumps(message_to_json(m))) for i, m in enumerate(cp.messages)]
        answered = answered_calls(cp)

        async def write(tx: Tx) -> bool:
            now = now_ms()
            table = table_in(
                tx, self.dialect, self.notify
            )  # one for the whole write: the settle reuses the fence's read
            if cp.fence is not None and (refused := await check_fence(table, cp.fence, now)):
                raise refused.error  # a holder that lost its claim writes nothing
            # The guarded bump is the version check: it matches only at the expected count, and (PostgreSQL)
            # row-locks the thread, so a concurrent checkpoint waits for us and then fails the same guard.
            # Only a first checkpoint (expected count 0) may create the thread, and tries that first (a new
            # conversation's usual case: one statement, not a bump that misses); any other miss is a conflict,
            # named with the count actually found.
            created = first == 0 and await tx.execute(
                q.thread_insert, cp.thread_id, cp.run.agent_id, added, state, now, cp.run.parent_thread_id
            )
            if not created and not await tx.execute(q.thread_bump, added, now, state, cp.thread_id, first):
                row = await tx.fetchone(q.thread_count, cp.thread_id)
                check_count(cp, row[0] if row is not None else 0)
                raise VersionConflict(f"messages of thread {cp.thread_id}", first, "created concurrently")
            if rows:
                await tx.executemany(q.messages_insert, rows)
            if answered:
                await tx.executemany(q.effects_settle, [(now, cp.thread_id, call_id) for call_id in answered])
            await tx.execute(q.run_upsert, *run_row)
            for mark in cp.marks:
                await table.effect_put(mark)
            if cp.settle is not None:
                await settle_with(table, cp.settle, cp.run, now)
            return table.woken

        if await self._write(write):
            self.mailbox.wakeup.set()  # the settle released the thread to someone waiting, here too
        held = self._threads.get(cp.thread_id)
        if held is not None and len(held) == first:
            held.extend(cp.messages)
        elif first == 0:
            self._remember(cp.thread_id, list(cp.messages))
        else:  # appended elsewhere too: the next load reads it whole
            self._threads.pop(cp.thread_id, None)

    async def save_thread(self, thread: ThreadRecord) -> None:
        await self._execute(
            self.q.thread_save,
            thread.thread_id,
            thread.title,
            thread.agent_id,
            thread.parent_thread_id,
            dumps(thread.metadata),
            thread.created_at,
            thread.updated_at,
        )

    async def load_thread_state(self, thread_id: str) -> PersistedState | None:
        row = await self._fetchone(self.q.thread_state_get, thread_id)
        return _state(row[0]) if row is not None else None

    async def save_thread_state(self, thread_id: str, state: PersistedState) -> None:
        q, text = self.q, dumps(state.to_json())

        async def write(tx: Tx) -> None:
            await tx.execute(q.thread_ensure, thread_id, None, now_ms(), None)
            await tx.execute(q.thread_state_set, text, thread_id)

        await self._write(write)

    async def list_threads(self, *, limit: int = 100, cursor: str | None = None) -> Page[ThreadRecord]:
        check_limit(limit)
        after = decode_cursor("threads", cursor)
        rows = await self._fetchall(self.q.threads_list, after[0], after[1], limit + 1)
        return page_from_rows([_thread(r) for r in rows], lambda t: (t.updated_at, t.thread_id), "threads", limit)

    async def delete_thread(self, thread_id: str) -> None:
        self._threads.pop(thread_id, None)
        await self._execute(self.q.thread_delete, thread_id)

    # -- runs ------------------------------------------------------------------------------------------------

    async def load_run(self, run_id: str) -> RunRecord | None:
        row = await self._fetchone(self.q.run_get, run_id)
        return _run(row) if row is not None else None

    async def save_run(self, run: RunRecord) -> None:
        q, row = self.q, _run_row(run)

        async def write(tx: Tx) -> None:
            await tx.execute(q.thread_ensure, run.thread_id, run.agent_id, now_ms(), run.parent_thread_id)
            await tx.execute(q.run_upsert, *row)

        await self._write(write)

    async def latest_run(self, thread_id: str) -> RunRecord | None:
        row = await self._fetchone(self.q.run_latest, thread_id)
        return _run(row) if row is not None else None

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        statuses: list[RunStatus] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        check_limit(limit)
        after = decode_cursor("runs", cursor)
        wanted = self._list_param(list(statuses) if statuses is not None else None)
        if thread_id is None:
            rows = await self._fetchall(self.q.runs_list, wanted, after[0], after[1], limit + 1)
        else:
            rows = await self._fetchall(self.q.runs_list_thread, thread_id, wanted, after[0], after[1], limit + 1)
        return page_from_rows([_run(r) for r in rows], lambda r: (r.updated_at, r.run_id), "runs", limit)

    # -- profiles --------------------------------------------------------------------------------------------

    async def get_profile(self, owner: str, key: str) -> ProfileEntry | None:
        row = await self._fetchone(self.q.profile_get, owner, key)
        return ProfileEntry(key=key, value=loads(row[0]), updated_at=row[1]) if row is not None else None

    async def set_profile(self, owner: str, key: str, value: Any) -> None:
        await self._execute(self.q.profile_set, owner, key, dumps(value), now_ms())

    async def delete_profile(self, owner: str, key: str) -> None:
        await self._execute(self.q.profile_delete, owner, key)

    async def list_profile(self, owner: str) -> list[ProfileEntry]:
        return [
            ProfileEntry(key=r[0], value=loads(r[1]), updated_at=r[2])
            for r in await self._fetchall(self.q.profile_list, owner)
        ]

    async def clear_profile_owner(self, owner: str) -> None:
        await self._execute(self.q.profile_clear, owner)

    # -- sessions --------------------------------------------------------------------------------------------

    async def save_session(self, session: SessionRecord) -> None:
        s = session
        await self._execute(
            self.q.session_upsert, s.session_id, s.thread_id, s.cwd, s.updated_at, dumps(record_to_json(s))
        )

    async def load_session(self, session_id: str) -> SessionRecord | None:
        row = await self._fetchone(self.q.session_get, session_id)
        return session_from_json(loads(row[0])) if row is not None else None

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[SessionRecord]:
        check_limit(limit)
        after = decode_cursor("sessions", cursor)
        if cwd is None:
            rows = await self._fetchall(self.q.sessions_list, after[0], after[1], limit + 1)
        else:
            rows = await self._fetchall(self.q.sessions_list_cwd, cwd, after[0], after[1], limit + 1)
        sessions = [session_from_json(loads(r[0])) for r in rows]
        return page_from_rows(sessions, lambda s: (s.updated_at, s.session_id), "sessions", limit)

    async def delete_session(self, session_id: str) -> None:
        await self._execute(self.q.session_delete, session_id)

    # -- permission grants -----------------------------------------------------------------------------------

    async def add_grant(self, grant: PermissionGrant) -> None:
        g = grant
        await self._execute(
            self.q.grant_upsert, g.grant_id, g.workspace, g.created_at, g.expires_at, dumps(record_to_json(g))
        )

    async def list_grants(self, workspace: str, *, now: int | None = None) -> list[PermissionGrant]:
        rows = await self._fetchall(self.q.grants_list, workspace, now_ms() if now is None else now)
        return [grant_from_json(loads(r[0])) for r in rows]

    async def delete_grant(self, grant_id: str) -> None:
        await self._execute(self.q.grant_delete, grant_id)
