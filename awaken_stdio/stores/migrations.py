"""The schema of the SQL backends as a list of forward migrations, and the runner both backends share.

Version ``n`` is ``MIGRATIONS[n - 1]``. Adding tables (v2: the mailbox) is one more entry at the end, written once
per dialect; never edit a released entry. The runner stamps ``awaken_meta`` (``application``, ``schema_version``),
refuses a database it did not create and one written by a newer schema (``identify``, which only reads, so SQLite
also runs it on a read-only connection before opening a file for writing), and never downgrades. It runs inside the
backend's write transaction (SQLite ``BEGIN IMMEDIATE``, PostgreSQL under an advisory lock), so two processes
opening a fresh database at once migrate it once.

Both dialects hold the same logical schema: records as JSON text next to the columns that are filtered or sorted on,
timestamps as unix milliseconds, messages ordered by a per-thread ``seq`` (their position, from 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from awaken_stdio.contract.errors import SchemaTooNew, StoreUnavailable
from awaken_stdio.stores._sql import Queries, Tx

__all__ = ["APPLICATION", "MIGRATIONS", "Dialect", "Migration", "identify", "migrate"]

APPLICATION = "awaken-stdio"
Dialect = Literal["sqlite", "postgres"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """One step forward: statements run in order in one transaction (no multi-statement scripts: SQLite's
    ``executescript`` would commit the open transaction)."""

    version: int
    name: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]

    def statements(self, dialect: Dialect) -> tuple[str, ...]:
        return self.sqlite if dialect == "sqlite" else self.postgres


# -- v1: conversations, runs, profiles, sessions, permission grants -----------------------------------------------

_V1_SQLITE = (
    """CREATE TABLE threads (
        thread_id TEXT PRIMARY KEY,
        title TEXT,
        agent_id TEXT,
        parent_thread_id TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        metadata TEXT NOT NULL DEFAULT '{}',
        state TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    )""",
    "CREATE INDEX threads_by_update ON threads (updated_at DESC, thread_id DESC)",
    """CREATE TABLE messages (
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        message_id TEXT NOT NULL,
        run_id TEXT,
        body TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    ) WITHOUT ROWID""",
    """CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        status TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX runs_by_update ON runs (updated_at DESC, run_id DESC)",
    "CREATE INDEX runs_by_thread ON runs (thread_id, updated_at DESC, run_id DESC)",
    """CREATE TABLE profiles (
        owner TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        PRIMARY KEY (owner, key)
    ) WITHOUT ROWID""",
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        thread_id TEXT NOT NULL,
        cwd TEXT NOT NULL,
        updated_at INTEGER NOT NULL,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX sessions_by_update ON sessions (updated_at DESC, session_id DESC)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, session_id DESC)",
    """CREATE TABLE permission_grants (
        grant_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        body TEXT NOT NULL
    )""",
    "CREATE INDEX grants_by_workspace ON permission_grants (workspace, created_at, grant_id)",
)

_V1_POSTGRES = (
    """CREATE TABLE threads (
        thread_id TEXT COLLATE "C" PRIMARY KEY,
        title TEXT,
        agent_id TEXT,
        parent_thread_id TEXT,
        message_count BIGINT NOT NULL DEFAULT 0,
        metadata JSON NOT NULL DEFAULT '{}',
        state JSON,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL
    )""",
    "CREATE INDEX threads_by_update ON threads (updated_at DESC, thread_id DESC)",
    """CREATE TABLE messages (
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        seq BIGINT NOT NULL,
        message_id TEXT NOT NULL,
        run_id TEXT,
        body JSON NOT NULL,
        PRIMARY KEY (thread_id, seq)
    )""",
    """CREATE TABLE runs (
        run_id TEXT COLLATE "C" PRIMARY KEY,
        thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id) ON DELETE CASCADE,
        status TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        updated_at BIGINT NOT NULL,
        body JSON NOT NULL
    )""",
    "CREATE INDEX runs_by_update ON runs (updated_at DESC, run_id DESC)",
    "CREATE INDEX runs_by_thread ON runs (thread_id, updated_at DESC, run_id DESC)",
    """CREATE TABLE profiles (
        owner TEXT COLLATE "C" NOT NULL,
        key TEXT COLLATE "C" NOT NULL,
        value JSON NOT NULL,
        updated_at BIGINT NOT NULL,
        PRIMARY KEY (owner, key)
    )""",
    """CREATE TABLE sessions (
        session_id TEXT COLLATE "C" PRIMARY KEY,
        thread_id TEXT COLLATE "C" NOT NULL,
        cwd TEXT NOT NULL,
        updated_at BIGINT NOT NULL,
        body JSON NOT NULL
    )""",
    "CREATE INDEX sessions_by_update ON sessions (updated_at DESC, session_id DESC)",
    "CREATE INDEX sessions_by_cwd ON sessions (cwd, updated_at DESC, session_id DESC)",
    """CREATE TABLE permission_grants (
        grant_id TEXT COLLATE "C" PRIMARY KEY,
        workspace TEXT NOT NULL,
        created_at BIGINT NOT NULL,
        expires_at BIGINT,
        body JSON NOT NULL
    )""",
    "CREATE INDEX grants_by_workspace ON permission_grants (workspace, created_at, grant_id)",
)

# -- v2: the mailbox (run dispatches, thread epochs) and the effect ledger -----------------------------------------


def _v2(integer: str, text: str) -> tuple[str, ...]:
    """The mailbox tables in one dialect: ``integer`` for unix-ms columns, ``text`` for ids (collation)."""
    return (
        f"""CREATE TABLE run_dispatches (
        dispatch_id {text} PRIMARY KEY,
        thread_id {text} NOT NULL,
        run_id {text} NOT NULL,
        request TEXT NOT NULL,
        priority INTEGER NOT NULL DEFAULT 128,
        dedupe_key TEXT,
        dispatch_epoch {integer} NOT NULL DEFAULT 0,
        status TEXT NOT NULL DEFAULT 'queued',
        available_at {integer} NOT NULL DEFAULT 0,
        attempt_count INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL DEFAULT 5,
        last_error TEXT,
        claim_token TEXT,
        claimed_by TEXT,
        lease_until {integer},
        dispatch_instance_id TEXT,
        run_status TEXT,
        termination TEXT,
        run_response TEXT,
        run_error TEXT,
        completed_at {integer},
        created_at {integer} NOT NULL,
        updated_at {integer} NOT NULL
    )""",
        "CREATE INDEX run_dispatches_by_thread ON run_dispatches (thread_id, status)",
        "CREATE INDEX run_dispatches_by_dedupe ON run_dispatches (thread_id, dedupe_key) WHERE dedupe_key IS NOT NULL",
        "CREATE INDEX run_dispatches_by_lease ON run_dispatches (status, lease_until) WHERE status = 'claimed'",
        "CREATE INDEX run_dispatches_queued ON run_dispatches (status, available_at) WHERE status = 'queued'",
        "CREATE INDEX run_dispatches_terminal ON run_dispatches (status, updated_at)",
        f"""CREATE TABLE thread_dispatch_epochs (
        thread_id {text} PRIMARY KEY,
        current_epoch {integer} NOT NULL DEFAULT 0
    )""",
        f"""CREATE TABLE tool_effects (
        thread_id {text} NOT NULL,
        call_id {text} NOT NULL,
        run_id TEXT NOT NULL,
        tool_name TEXT NOT NULL,
        arguments TEXT NOT NULL,
        status TEXT NOT NULL,
        decision_id TEXT,
        result TEXT,
        started_at {integer} NOT NULL,
        updated_at {integer} NOT NULL,
        PRIMARY KEY (thread_id, call_id)
    )""",
        "CREATE INDEX tool_effects_open ON tool_effects (thread_id, status)",
    )


MIGRATIONS: list[Migration] = [
    Migration(
        version=1,
        name="conversations, runs, profiles, sessions, permission grants",
        sqlite=_V1_SQLITE,
        postgres=_V1_POSTGRES,
    ),
    Migration(
        version=2,
        name="mailbox: run dispatches, thread epochs, effect ledger",
        sqlite=_v2("INTEGER", "TEXT"),
        postgres=_v2("BIGINT", 'TEXT COLLATE "C"'),
    ),
    Migration(
        version=3,
        name="effect ledger: the claim each effect started under (a running call is told from an abandoned one)",
        sqlite=("ALTER TABLE tool_effects ADD COLUMN claim_token TEXT",),
        postgres=("ALTER TABLE tool_effects ADD COLUMN claim_token TEXT",),
    ),
]


async def identify(tx: Tx, q: Queries, location: str) -> int | None:
    """The schema version of the awaken-stdio database in ``tx``, or None when it has no tables (ours to stamp).

    Only reads. ``StoreUnavailable`` for anyone else's database, ``SchemaTooNew`` for one of a newer awaken-stdio.
    Reads ``MIGRATIONS`` at call time (tests append a step to exercise an upgrade).
    """
    latest = len(MIGRATIONS)
    tables = {row[0] for row in await tx.fetchall(q.list_tables)}
    if "awaken_meta" not in tables:
        if tables:
            shown = ", ".join(sorted(tables)[:5])
            raise StoreUnavailable(
                f"{location} is not an awaken-stdio database (it has tables {shown} but no awaken_meta)"
            )
        return None
    meta = {row[0]: row[1] for row in await tx.fetchall(q.meta_all)}
    if meta.get("application") != APPLICATION:
        raise StoreUnavailable(
            f"{location} is not an awaken-stdio database (awaken_meta names {meta.get('application')!r})"
        )
    try:
        found = int(meta["schema_version"])
    except (KeyError, ValueError) as exc:
        raise StoreUnavailable(f"{location} has no valid schema version in awaken_meta") from exc
    if found > latest:
        raise SchemaTooNew(location, found, latest)
    return found


async def migrate(tx: Tx, q: Queries, dialect: Dialect, location: str) -> int:
    """Bring the database in ``tx`` to the newest known version (after ``identify``), and return it."""
    found = await identify(tx, q, location)
    if found is None:
        await tx.execute(q.create_meta)
        await tx.execute(q.meta_set, "application", APPLICATION)
        await tx.execute(q.meta_set, "schema_version", "0")
        found = 0
    for step in MIGRATIONS[found:]:
        for statement in step.statements(dialect):
            await tx.execute(statement)
        await tx.execute(q.meta_set, "schema_version", str(step.version))
    return len(MIGRATIONS)
