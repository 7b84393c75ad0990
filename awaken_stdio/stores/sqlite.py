"""``sqlite:///path.db``, the default store: one file that several awaken-stdio processes share.

Three connections, each on a thread of its own (``sqlite_thread``): a writer, a reader and a checkpointer. No
statement runs on the event loop's thread, so neither another process holding the write lock nor a slow or frozen
file system ever stops the loop: only the writes (or reads) waiting for them wait. A transaction runs whole and
synchronously on its connection's thread (the shared async store logic runs there unchanged: its statements never
suspend, ``_base.drive``); writes queued while the writer was busy commit together, each in a savepoint of its own
(``sqlite_tx.run_batch``), which is what keeps many runs writing at once fast. A caller cancelled before its
transaction started withdraws it; once started, a writer waits until it has committed or rolled back completely.
Writes run in ``BEGIN IMMEDIATE``, so a transaction takes the write lock before it reads and cannot fail half-way on
a lock upgrade. WAL lets readers run beside the writer (of this process and of others); ``synchronous=NORMAL`` keeps
every committed transaction across a killed process (the WAL is in the OS cache) and can lose only the last ones on
power loss, never consistency. Contention with other processes first waits in SQLite's busy handler
(``busy_timeout``, on the connection's thread), then the whole transaction is retried with backoff (``retry.py``);
only when both give up does a caller see ``StoreUnavailable``, never "database is locked".

Copying the WAL back into the database (a checkpoint, two fsyncs) is kept off the writer's path: the checkpointer
copies (``PASSIVE``: it never blocks a writer or a reader) every ``CHECKPOINT_EVERY`` write transactions while the
writer goes on, and once the store has had no write for ``IDLE_CHECKPOINT_S``: SQLite copies what is left when the
last connection closes, so a process that exits after its input ends would otherwise wait for those fsyncs. Under
sustained writing the WAL cannot restart by itself, so past ``WAL_BACKSTOP_PAGES`` the writer's thread truncates it
between two writes. The writer checkpoints itself only past twice ``WAL_BACKSTOP_PAGES``, where no
process's checkpointer ran.

The file is created here with mode 0600 (SQLite gives its -wal/-shm files the same mode). An existing file is first
identified on a read-only connection (``mode=ro``): one that is not an awaken-stdio database (a text file, someone
else's SQLite database) is refused before anything is written to it, not even the switch to WAL, which a read-write
connection would make at once. The same connection runs ``PRAGMA quick_check`` (a few milliseconds for thousands of
messages); a damaged database is refused with the way out, SQLite's own recovery into a new file::

    sqlite3 awaken.db ".recover" | sqlite3 fixed.db

then, with no awaken-stdio process using the store, keep the damaged file aside and move ``fixed.db`` in its place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import sqlite3
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

import anyio

from awaken_stdio.contract.errors import StoreError, StoreUnavailable
from awaken_stdio.stores._base import drive
from awaken_stdio.stores._codec import dumps
from awaken_stdio.stores._sql import THREAD_COLUMNS, Queries, SqlStore, Tx
from awaken_stdio.stores.migrations import identify, migrate
from awaken_stdio.stores.retry import RetryPolicy, retrying
from awaken_stdio.stores.sqlite_thread import ConnectionThread
from awaken_stdio.stores.sqlite_tx import IMMEDIATE, Fn, SqliteTx, transient

__all__ = ["QUERIES", "SqliteStore"]

T = TypeVar("T")
log = logging.getLogger(__name__)
BUSY_TIMEOUT_MS = 5000
CHECKPOINT_EVERY = 64  # write transactions (about 640 WAL pages at ten a transaction) between background checkpoints
IDLE_CHECKPOINT_S = 0.05  # no write for this long: the WAL is copied back meanwhile, not when the process exits
WAL_BACKSTOP_PAGES = 10_000  # ~40 MB: past it the checkpointer truncates the WAL, holding the write lock for ~30 ms
WAL_KEPT_BYTES = 4 << 20
RETRY = RetryPolicy(attempts=8)
_HEADER = b"SQLite format 3\x00"

QUERIES = Queries(
    list_tables="SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    create_meta="CREATE TABLE awaken_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    meta_all="SELECT key, value FROM awaken_meta",
    meta_set="""
        INSERT INTO awaken_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value""",
    thread_bump="""
        UPDATE threads SET message_count = message_count + ?, updated_at = ?, state = COALESCE(?, state)
        WHERE thread_id = ? AND message_count = ?""",
    thread_insert="""
        INSERT INTO threads (thread_id, agent_id, message_count, state, created_at, updated_at, parent_thread_id)
        VALUES (?1, ?2, ?3, ?4, ?5, ?5, ?6) ON CONFLICT (thread_id) DO NOTHING""",
    thread_ensure="""
        INSERT INTO threads (thread_id, agent_id, created_at, updated_at, parent_thread_id)
        VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (thread_id) DO NOTHING""",
    thread_count="SELECT message_count FROM threads WHERE thread_id = ?",
    thread_get=f"SELECT {THREAD_COLUMNS}, state FROM threads WHERE thread_id = ?",
    thread_probe=f"""
        SELECT {THREAD_COLUMNS}, state,
            (SELECT body FROM runs r WHERE r.thread_id = t.thread_id ORDER BY updated_at DESC, run_id DESC LIMIT 1),
            (SELECT message_id FROM messages m WHERE m.thread_id = t.thread_id AND m.seq = ?2)
        FROM threads t WHERE thread_id = ?1""",
    thread_save="""
        INSERT INTO threads (thread_id, title, agent_id, parent_thread_id, metadata, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (thread_id) DO UPDATE SET title = excluded.title, agent_id = excluded.agent_id,
            parent_thread_id = excluded.parent_thread_id, metadata = excluded.metadata,
            created_at = excluded.created_at, updated_at = excluded.updated_at""",
    thread_state_get="SELECT state FROM threads WHERE thread_id = ?",
    thread_state_set="UPDATE threads SET state = ? WHERE thread_id = ?",
    threads_list=f"""
        SELECT {THREAD_COLUMNS} FROM threads WHERE (updated_at, thread_id) < (?, ?)
        ORDER BY updated_at DESC, thread_id DESC LIMIT ?""",
    thread_delete="DELETE FROM threads WHERE thread_id = ?",
    messages_insert="INSERT INTO messages (thread_id, seq, message_id, run_id, body) VALUES (?, ?, ?, ?, ?)",
    messages_range="SELECT body FROM messages WHERE thread_id = ? AND seq >= ? AND seq < ? ORDER BY seq",
    effects_settle=(
        "UPDATE tool_effects SET status = 'finished', updated_at = ? WHERE thread_id = ? AND call_id = ? "
        "AND status IN ('started', 'unknown_after_crash')"
    ),
    run_upsert="""
        INSERT INTO runs (run_id, thread_id, status, created_at, updated_at, body) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (run_id) DO UPDATE SET thread_id = excluded.thread_id, status = excluded.status,
            created_at = excluded.created_at, updated_at = excluded.updated_at, body = excluded.body""",
    run_get="SELECT body FROM runs WHERE run_id = ?",
    run_latest="SELECT body FROM runs WHERE thread_id = ? ORDER BY updated_at DESC, run_id DESC LIMIT 1",
    runs_list="""
        SELECT body FROM runs
        WHERE (?1 IS NULL OR status IN (SELECT value FROM json_each(?1))) AND (updated_at, run_id) < (?2, ?3)
        ORDER BY updated_at DESC, run_id DESC LIMIT ?4""",
    runs_list_thread="""
        SELECT body FROM runs
        WHERE thread_id = ?1 AND (?2 IS NULL OR status IN (SELECT value FROM json_each(?2)))
            AND (updated_at, run_id) < (?3, ?4)
        ORDER BY updated_at DESC, run_id DESC LIMIT ?5""",
    profile_get="SELECT value, updated_at FROM profiles WHERE owner = ? AND key = ?",
    profile_set="""
        INSERT INTO profiles (owner, key, value, updated_at) VALUES (?, ?, ?, ?)
        ON CONFLICT (owner, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at""",
    profile_delete="DELETE FROM profiles WHERE owner = ? AND key = ?",
    profile_list="SELECT key, value, updated_at FROM profiles WHERE owner = ? ORDER BY key",
    profile_clear="DELETE FROM profiles WHERE owner = ?",
    session_upsert="""
        INSERT INTO sessions (session_id, thread_id, cwd, updated_at, body) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (session_id) DO UPDATE SET thread_id = excluded.thread_id, cwd = excluded.cwd,
            updated_at = excluded.updated_at, body = excluded.body""",
    session_get="SELECT body FROM sessions WHERE session_id = ?",
    sessions_list="""
        SELECT body FROM sessions WHERE (updated_at, session_id) < (?, ?)
        ORDER BY updated_at DESC, session_id DESC LIMIT ?""",
    sessions_list_cwd="""
        SELECT body FROM sessions WHERE cwd = ? AND (updated_at, session_id) < (?, ?)
        ORDER BY updated_at DESC, session_id DESC LIMIT ?""",
    session_delete="DELETE FROM sessions WHERE session_id = ?",
    grant_upsert="""
        INSERT INTO permission_grants (grant_id, workspace, created_at, expires_at, body) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (grant_id) DO UPDATE SET workspace = excluded.workspace, created_at = excluded.created_at,
            expires_at = excluded.expires_at, body = excluded.body""",
    grants_list="""
        SELECT body FROM permission_grants WHERE workspace = ? AND (expires_at IS NULL OR expires_at > ?)
        ORDER BY created_at, grant_id""",
    grant_delete="DELETE FROM permission_grants WHERE grant_id = ?",
)


def _translate(exc: sqlite3.Error, path: str) -> StoreError:
    """The one seam where SQLite errors become store errors."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    if transient(exc):
        return StoreUnavailable(f"{path} stayed locked by another process after {RETRY.attempts} attempts")
    if code == sqlite3.SQLITE_NOTADB:
        return StoreUnavailable(f"{path} is not an awaken-stdio database (not an SQLite file)")
    if code == sqlite3.SQLITE_CORRUPT:
        return _damaged(path, str(exc))
    if code in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PERM):
        return StoreUnavailable(f"cannot write the database {path}: {exc}")
    return StoreError(f"SQLite error on {path}: {exc}")


def _damaged(path: str, detail: str) -> StoreError:
    quoted = shlex.quote(path)
    return StoreError(
        f"{path} is damaged ({detail}); recover what it holds into a new file with "
        f'`sqlite3 {quoted} ".recover" | sqlite3 fixed.db`, then, with no awaken-stdio process using it, keep '
        f"{quoted} aside and move fixed.db in its place"
    )


def _prepare_file(path: str) -> None:
    """Create the directory and an empty 0600 database file, or identify the existing file (``_identify``)."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            fd = os.open(path, os.O_RDONLY)
            try:
                header = os.read(fd, len(_HEADER))
            finally:
                os.close(fd)
            if header and header != _HEADER:
                raise StoreUnavailable(f"{path} is not an awaken-stdio database (not an SQLite file)") from None
            if header:  # an empty file is one this process or another has just created
                _identify(path)
        else:
            os.fchmod(fd, 0o600)  # exactly 0600, whatever the umask
            os.close(fd)
    except OSError as exc:
        raise StoreUnavailable(f"cannot open the database file {path}: {exc.strerror or exc}") from exc


def _identify(path: str) -> None:
    """Refuse, on a read-only connection, a database that is someone else's, newer, or damaged (``quick_check``)."""
    uri = f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            drive(identify(SqliteTx(db), QUERIES, path))
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise _translate(exc, path) from exc
    if problems != ["ok"]:
        raise _damaged(path, "PRAGMA quick_check: " + "; ".join(problems[:3]))


def _connect(path: str, *, pragmas: tuple[str, ...]) -> sqlite3.Connection:
    """A connection whose every wait for another process's lock is SQLite's busy handler, on its own thread."""
    db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        for pragma in (f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}", "PRAGMA foreign_keys = ON", *pragmas):
            db.execute(pragma)
    except BaseException:
        db.close()
        raise
    return db


async def _pragma(tx: Tx, pragma: str) -> Sequence[Any] | None:
    return await tx.fetchone(pragma)


async def _truncate(tx: Tx) -> Sequence[Any] | None:
    """``TRUNCATE`` on the writer's connection (so no write of ours runs meanwhile), giving up at once when another
    process reads an older snapshot, instead of waiting for it."""
    await tx.execute("PRAGMA busy_timeout = 0")
    try:
        return await tx.fetchone("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        await tx.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


class SqliteStore(SqlStore):
    q = QUERIES
    dialect = "sqlite"
    durable = True

    def __init__(
        self, url: str, path: str, writer: ConnectionThread, reader: ConnectionThread, checkpointer: ConnectionThread
    ) -> None:
        self.url, self.path = url, path
        self._writer, self._reader, self._checkpointer = writer, reader, checkpointer
        self._writes = 0
        self._checkpointed = 0  # ``_writes`` when the last checkpoint started
        self._last_write = 0.0  # the event loop's time of the last write
        self._idle: asyncio.TimerHandle | None = None  # the check for an idle store, while one is due
        self._checkpointing: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, url: str, path: str) -> SqliteStore:
        await anyio.to_thread.run_sync(_prepare_file, path)
        writer, reader = ConnectionThread("sqlite-writer"), ConnectionThread("sqlite-reader", cancelled_waits=False)
        checkpointer = ConnectionThread("sqlite-checkpointer")
        threads = [writer, reader, checkpointer]
        try:
            try:
                await writer.open(
                    partial(
                        _connect,
                        path,
                        pragmas=(
                            "PRAGMA journal_mode = WAL",
                            "PRAGMA synchronous = NORMAL",
                            # ``_checkpoint`` keeps the WAL short; this backstop acts only when no process's
                            # checkpointer runs (short-lived processes that each write less than ``CHECKPOINT_EVERY``
                            # times)
                            f"PRAGMA wal_autocheckpoint = {2 * WAL_BACKSTOP_PAGES}",
                            f"PRAGMA journal_size_limit = {WAL_KEPT_BYTES}",
                        ),
                    )
                )
                await reader.open(partial(_connect, path, pragmas=("PRAGMA query_only = ON",)))
                await checkpointer.open(partial(_connect, path, pragmas=("PRAGMA synchronous = NORMAL",)))
            except sqlite3.Error as exc:
                raise _translate(exc, path) from exc
            store = cls(url, path, writer=writer, reader=reader, checkpointer=checkpointer)
            store.schema_version = await store._write(lambda tx: migrate(tx, QUERIES, "sqlite", path))
        except BaseException:
            with anyio.CancelScope(shield=True):
                for thread in threads:
                    await thread.close()
            raise
        return store

    async def _close(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
        with anyio.CancelScope(shield=True):
            if self._checkpointing is not None:  # closed: no write starts another
                await asyncio.wait({self._checkpointing})
            for thread in (self._checkpointer, self._reader, self._writer):
                await thread.close()

    def _wrote(self) -> None:
        """Count a committed write; every ``CHECKPOINT_EVERY`` start a background checkpoint unless one runs, and
        have one start once the store is idle (``_when_idle``). An asyncio task of its own (anyio has no detached
        task): ``_close`` waits for it."""
        self._writes += 1
        loop = asyncio.get_running_loop()
        self._last_write = loop.time()
        if self._checkpointing is not None or self._closed:
            return
        if self._writes % CHECKPOINT_EVERY == 0:
            self._start_checkpoint()
        elif self._idle is None:  # one timer per quiet spell, not one per write
            self._idle = loop.call_later(IDLE_CHECKPOINT_S, self._when_idle)

    def _when_idle(self) -> None:
        """Checkpoint when no write came for ``IDLE_CHECKPOINT_S``; else look again when that much has passed."""
        self._idle = None
        if self._closed or self._checkpointing is not None or self._checkpointed == self._writes:
            return
        loop = asyncio.get_running_loop()
        quiet = loop.time() - self._last_write
        if quiet < IDLE_CHECKPOINT_S:
            self._idle = loop.call_later(IDLE_CHECKPOINT_S - quiet, self._when_idle)
        else:
            self._start_checkpoint(idle=True)

    def _start_checkpoint(self, *, idle: bool = False) -> None:
        self._checkpointed = self._writes
        self._checkpointing = asyncio.get_running_loop().create_task(self._checkpoint(idle=idle))

    async def _checkpoint(self, *, idle: bool = False) -> None:
        """Copy the WAL back (``PASSIVE``: beside the writer and the readers). Under sustained writing the WAL never
        restarts by itself (the writer has always appended past the copy by the time it ends), so past
        ``WAL_BACKSTOP_PAGES`` the rest is copied by the writer's thread and the WAL truncated (``_truncate``). An
        ``idle`` store's WAL is truncated too, all of it copied by then: a burst of writes leaves no file behind that
        is as large as the burst (nothing to copy: no fsync, a moment of the writer's thread)."""
        try:
            row = await self._checkpointer.run(None, partial(_pragma, pragma="PRAGMA wal_checkpoint(PASSIVE)"))
            if row is not None and (row[1] >= WAL_BACKSTOP_PAGES or (idle and row[1] > 0 and row[1] == row[2])):
                await self._writer.run(None, _truncate)
        except Exception as exc:  # another process's checkpoint, a full disk: the next one tries again
            log.debug("background checkpoint of %s: %s", self.path, exc)
        finally:
            self._checkpointing = None
            if self._idle is None and self._checkpointed != self._writes and not self._closed:  # written meanwhile
                self._idle = asyncio.get_running_loop().call_later(IDLE_CHECKPOINT_S, self._when_idle)

    async def _guarded(self, op: Callable[[], Awaitable[T]]) -> T:
        try:
            return await retrying(op, transient, RETRY)
        except sqlite3.Error as exc:
            raise _translate(exc, self.path) from exc

    async def _write(self, fn: Fn[T]) -> T:
        self._check_open()
        result = await self._guarded(lambda: self._writer.run(IMMEDIATE, fn))
        self._wrote()
        return result

    async def _write_urgent(self, fn: Fn[T]) -> T:
        self._check_open()
        result = await self._guarded(lambda: self._writer.run(IMMEDIATE, fn, urgent=True))
        self._wrote()
        return result

    async def _read(self, fn: Fn[T], *, snapshot: bool = False) -> T:
        self._check_open()
        return await self._guarded(lambda: self._reader.run("BEGIN" if snapshot else None, fn))

    def _list_param(self, values: list[str] | None) -> Any:
        return dumps(values) if values is not None else None
