"""``postgresql://user:pw@host:port/db``: the shared store for teams, on asyncpg with a connection pool.

Imported only when such a URL is opened (``stores.open_store``), so asyncpg costs nothing elsewhere. The schema and
the migration runner are the SQLite backend's (``migrations.py``); migrations run under a transaction-scoped
advisory lock so processes starting together migrate once. Transactions are READ COMMITTED: a checkpoint's guarded
``UPDATE ... WHERE message_count = $n`` locks the thread row, so a concurrent checkpoint waits and then sees the new
count (a ``VersionConflict``), never a lost append. Serialization failures and deadlocks are retried as a whole
transaction; connection failures become ``StoreUnavailable``.

The tables live in the connection's current schema, which must hold only awaken-stdio's tables (anything else is
refused as "not an awaken-stdio database"): give it a database of its own, or a schema of its own with
``postgresql://.../db?search_path=awaken`` (asyncpg passes unknown query parameters on as server settings).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg  # pyright: ignore[reportMissingTypeStubs]  # asyncpg ships no type information

from awaken_stdio.contract.errors import StoreError, StoreUnavailable
from awaken_stdio.contract.ids import new_id
from awaken_stdio.stores._sql import THREAD_COLUMNS, Queries, SqlStore, Tx
from awaken_stdio.stores.migrations import migrate
from awaken_stdio.stores.retry import RetryPolicy, retrying

__all__ = ["QUERIES", "PostgresStore", "redact"]

T = TypeVar("T")
RETRY = RetryPolicy(attempts=8)
POOL_MAX_SIZE = 10
CONNECT_TIMEOUT_S = 10.0
MAILBOX_CHANNEL = "awaken_mailbox"  # NOTIFY in a mailbox write that made work another process's pollers act on
# A lost LISTEN connection is retried after these pauses (the last one repeats); meanwhile the pollers poll.
RELISTEN_S = (1.0, 2.0, 5.0, 10.0, 30.0)
log = logging.getLogger(__name__)
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(7241955873)"  # any constant shared by every awaken-stdio

QUERIES = Queries(
    list_tables="SELECT tablename FROM pg_tables WHERE schemaname = current_schema()",
    create_meta="CREATE TABLE awaken_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    meta_all="SELECT key, value FROM awaken_meta",
    meta_set="""
        INSERT INTO awaken_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value""",
    thread_bump="""
        UPDATE threads SET message_count = message_count + $1, updated_at = $2, state = COALESCE($3::json, state)
        WHERE thread_id = $4 AND message_count = $5""",
    thread_insert="""
        INSERT INTO threads (thread_id, agent_id, message_count, state, created_at, updated_at, parent_thread_id)
        VALUES ($1, $2, $3, $4, $5, $5, $6) ON CONFLICT (thread_id) DO NOTHING""",
    thread_ensure="""
        INSERT INTO threads (thread_id, agent_id, created_at, updated_at, parent_thread_id)
        VALUES ($1, $2, $3, $3, $4) ON CONFLICT (thread_id) DO NOTHING""",
    thread_count="SELECT message_count FROM threads WHERE thread_id = $1",
    thread_get=f"SELECT {THREAD_COLUMNS}, state FROM threads WHERE thread_id = $1",
    thread_probe=f"""
        SELECT {THREAD_COLUMNS}, state,
            (SELECT body FROM runs r WHERE r.thread_id = t.thread_id ORDER BY updated_at DESC, run_id DESC LIMIT 1),
            (SELECT message_id FROM messages m WHERE m.thread_id = t.thread_id AND m.seq = $2)
        FROM threads t WHERE thread_id = $1""",
    thread_save="""
        INSERT INTO threads (thread_id, title, agent_id, parent_thread_id, metadata, created_at, updated_at)
        VALUES ($1, $2, $3, $4, $5, $6, $7)
        ON CONFLICT (thread_id) DO UPDATE SET title = EXCLUDED.title, agent_id = EXCLUDED.agent_id,
            parent_thread_id = EXCLUDED.parent_thread_id, metadata = EXCLUDED.metadata,
            created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at""",
    thread_state_get="SELECT state FROM threads WHERE thread_id = $1",
    thread_state_set="UPDATE threads SET state = $1 WHERE thread_id = $2",
    threads_list=f"""
        SELECT {THREAD_COLUMNS} FROM threads WHERE (updated_at, thread_id) < ($1, $2)
        ORDER BY updated_at DESC, thread_id DESC LIMIT $3""",
    thread_delete="DELETE FROM threads WHERE thread_id = $1",
    messages_insert="INSERT INTO messages (thread_id, seq, message_id, run_id, body) VALUES ($1, $2, $3, $4, $5)",
    messages_range="SELECT body FROM messages WHERE thread_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq",
    effects_settle=(
        "UPDATE tool_effects SET status = 'finished', updated_at = $1 WHERE thread_id = $2 AND call_id = $3 "
        "AND status IN ('started', 'unknown_after_crash')"
    ),
    run_upsert="""
        INSERT INTO runs (run_id, thread_id, status, created_at, updated_at, body) VALUES ($1, $2, $3, $4, $5, $6)
        ON CONFLICT (run_id) DO UPDATE SET thread_id = EXCLUDED.thread_id, status = EXCLUDED.status,
            created_at = EXCLUDED.created_at, updated_at = EXCLUDED.updated_at, body = EXCLUDED.body""",
    run_get="SELECT body FROM runs WHERE run_id = $1",
    run_latest="SELECT body FROM runs WHERE thread_id = $1 ORDER BY updated_at DESC, run_id DESC LIMIT 1",
    runs_list="""
        SELECT body FROM runs
        WHERE ($1::text[] IS NULL OR status = ANY($1::text[])) AND (updated_at, run_id) < ($2, $3)
        ORDER BY updated_at DESC, run_id DESC LIMIT $4""",
    runs_list_thread="""
        SELECT body FROM runs
        WHERE thread_id = $1 AND ($2::text[] IS NULL OR status = ANY($2::text[])) AND (updated_at, run_id) < ($3, $4)
        ORDER BY updated_at DESC, run_id DESC LIMIT $5""",
    profile_get="SELECT value, updated_at FROM profiles WHERE owner = $1 AND key = $2",
    profile_set="""
        INSERT INTO profiles (owner, key, value, updated_at) VALUES ($1, $2, $3, $4)
        ON CONFLICT (owner, key) DO UPDATE SET value = EXCLUDED.value, updated_at = EXCLUDED.updated_at""",
    profile_delete="DELETE FROM profiles WHERE owner = $1 AND key = $2",
    profile_list="SELECT key, value, updated_at FROM profiles WHERE owner = $1 ORDER BY key",
    profile_clear="DELETE FROM profiles WHERE owner = $1",
    session_upsert="""
        INSERT INTO sessions (session_id, thread_id, cwd, updated_at, body) VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (session_id) DO UPDATE SET thread_id = EXCLUDED.thread_id, cwd = EXCLUDED.cwd,
            updated_at = EXCLUDED.updated_at, body = EXCLUDED.body""",
    session_get="SELECT body FROM sessions WHERE session_id = $1",
    sessions_list="""
        SELECT body FROM sessions WHERE (updated_at, session_id) < ($1, $2)
        ORDER BY updated_at DESC, session_id DESC LIMIT $3""",
    sessions_list_cwd="""
        SELECT body FROM sessions WHERE cwd = $1 AND (updated_at, session_id) < ($2, $3)
        ORDER BY updated_at DESC, session_id DESC LIMIT $4""",
    session_delete="DELETE FROM sessions WHERE session_id = $1",
    grant_upsert="""
        INSERT INTO permission_grants (grant_id, workspace, created_at, expires_at, body) VALUES ($1, $2, $3, $4, $5)
        ON CONFLICT (grant_id) DO UPDATE SET workspace = EXCLUDED.workspace, created_at = EXCLUDED.created_at,
            expires_at = EXCLUDED.expires_at, body = EXCLUDED.body""",
    grants_list="""
        SELECT body FROM permission_grants WHERE workspace = $1 AND (expires_at IS NULL OR expires_at > $2)
        ORDER BY created_at, grant_id""",
    grant_delete="DELETE FROM permission_grants WHERE grant_id = $1",
)


def redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[1]}"))


class _PgTx(Tx):
    __slots__ = ("_conn",)

    def __init__(self, conn: asyncpg.pool.PoolConnectionProxy) -> None:
        self._conn = conn

    async def fetchone(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return await self._conn.fetchrow(sql, *args)

    async def fetchall(self, sql: str, *args: Any) -> list[Sequence[Any]]:
        return list(await self._conn.fetch(sql, *args))

    async def execute(self, sql: str, *args: Any) -> int:
        status: str = await self._conn.execute(sql, *args)  # "UPDATE 1", "INSERT 0 1", "CREATE TABLE"
        count = status.rsplit(" ", 1)[-1]
        return int(count) if count.isdigit() else 0

    async def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        await self._conn.executemany(sql, rows)


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, asyncpg.SerializationError | asyncpg.DeadlockDetectedError)


_UNREACHABLE = (
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.InvalidAuthorizationSpecificationError,  # bad user or password
    asyncpg.InvalidCatalogNameError,  # no such database
    OSError,
    TimeoutError,
)
_DRIVER_ERRORS = (asyncpg.PostgresError, *_UNREACHABLE)


def _translate(exc: BaseException, where: str) -> StoreError:
    """The one seam where asyncpg and socket errors become store errors."""
    if _transient(exc):
        return StoreUnavailable(f"PostgreSQL at {where} kept failing with conflicts after {RETRY.attempts} attempts")
    if isinstance(exc, _UNREACHABLE):
        return StoreUnavailable(f"cannot reach PostgreSQL at {where}: {exc or type(exc).__name__}")
    return StoreError(f"PostgreSQL error at {where}: {exc}")


class PostgresStore(SqlStore):
    q = QUERIES
    dialect = "postgres"
    durable = True

    def __init__(self, url: str, pool: asyncpg.Pool) -> None:
        self.url = url
        self._where = redact(url)
        self._pool = pool
        self._listener: asyncpg.Connection | None = None  # LISTENs for the other processes' mailbox changes
        self._relisten: asyncio.Task[None] | None = None
        self._origin = new_id()  # its own NOTIFYs' payload: what this process wrote, it has already been told
        self.notify = f"NOTIFY {MAILBOX_CHANNEL}, '{self._origin}'"

    @classmethod
    async def open(cls, url: str) -> PostgresStore:
        where = redact(url)
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=POOL_MAX_SIZE, timeout=CONNECT_TIMEOUT_S)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, where) from exc
        store = cls(url, pool)
        try:

            async def migrate_locked(tx: Tx) -> int:
                await tx.fetchone(MIGRATION_LOCK)
                return await migrate(tx, QUERIES, "postgres", where)

            store.schema_version = await store._write(migrate_locked)
            if not await store._listen():
                store._listen_later()
        except BaseException:
            await store.aclose()
            raise
        return store

    async def _close(self) -> None:
        if self._relisten is not None:
            self._relisten.cancel()
        if self._listener is not None:
            await self._listener.close()
        await self._pool.close()

    async def _listen(self) -> bool:
        """One connection of its own LISTENs on the mailbox channel: another process's decision, cancel or released
        claim wakes this one's pollers at once, and while it is up they wait for nothing else (``Wakeup.pushed``).
        One that cannot connect, or is lost, leaves them polling (:meth:`_lost`)."""
        listener = None
        try:
            listener = await asyncpg.connect(self.url, timeout=int(CONNECT_TIMEOUT_S))
            await listener.add_listener(MAILBOX_CHANNEL, self._heard)
        except _DRIVER_ERRORS as exc:
            if listener is not None:
                await listener.close()
            log.warning("PostgreSQL at %s: cannot LISTEN (%s); the mailbox is polled", self._where, exc)
            return False
        listener.add_termination_listener(self._lost)
        self._listener = listener
        self.mailbox.wakeup.push(True)  # and a look: what was announced while nobody listened
        return True

    def _heard(self, _conn: object, _pid: int, _channel: str, origin: str) -> None:
        if origin != self._origin:
            self.mailbox.wakeup.set()

    def _lost(self, _conn: object) -> None:
        """The LISTEN connection closed under us: poll until it is back (each retry per :data:`RELISTEN_S`)."""
        self._listener = None
        if self._closed:
            return
        log.warning("PostgreSQL at %s: lost the LISTEN connection; the mailbox is polled until it is back", self._where)
        self.mailbox.wakeup.push(False)
        self._listen_later()

    def _listen_later(self) -> None:
        self._relisten = asyncio.get_running_loop().create_task(self._listen_again())

    async def _listen_again(self) -> None:
        for attempt in itertools.count():
            await asyncio.sleep(RELISTEN_S[min(attempt, len(RELISTEN_S) - 1)])
            if self._closed or await self._listen():
                return

    async def _guarded(self, op: Callable[[], Awaitable[T]]) -> T:
        try:
            return await retrying(op, _transient, RETRY)
        except _DRIVER_ERRORS as exc:
            raise _translate(exc, self._where) from exc

    async def _write(self, fn: Callable[[Tx], Coroutine[Any, Any, T]]) -> T:
        self._check_open()

        async def attempt() -> T:
            async with self._pool.acquire() as conn, conn.transaction():
                return await fn(_PgTx(conn))

        return await self._guarded(attempt)

    async def _read(self, fn: Callable[[Tx], Coroutine[Any, Any, T]], *, snapshot: bool = False) -> T:
        self._check_open()

        async def attempt() -> T:
            async with self._pool.acquire() as conn:
                if not snapshot:
                    return await fn(_PgTx(conn))
                async with conn.transaction(isolation="repeatable_read", readonly=True):
                    return await fn(_PgTx(conn))

        return await self._guarded(attempt)

    def _list_param(self, values: list[str] | None) -> Any:
        return values
