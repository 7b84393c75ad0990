"""The migration machinery both SQL backends share: stamping, forward migration, refusals."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from awaken_stdio.contract.errors import SchemaTooNew, StoreUnavailable
from awaken_stdio.stores import migrations, open_store
from awaken_stdio.stores.migrations import MIGRATIONS, Migration

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgresql"])
def sql_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/awaken.db"
    return request.getfixturevalue("pg_url")


async def raw(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Run one statement with the bare driver, outside the store."""
    if url.startswith("sqlite://"):
        with sqlite3.connect(url.removeprefix("sqlite://")) as db:
            rows = [tuple(r) for r in db.execute(sql.replace("$1", "?"), args).fetchall()]
        db.close()
        return rows
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        return [tuple(r) for r in await conn.fetch(sql, *args)]
    finally:
        await conn.close()


async def schema(url: str) -> list[tuple[Any, ...]]:
    if url.startswith("sqlite://"):
        return await raw(url, "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    columns = await raw(
        url,
        "SELECT table_name, column_name, data_type, is_nullable, column_default, collation_name "
        "FROM information_schema.columns WHERE table_schema = current_schema() ORDER BY table_name, column_name",
    )
    indexes = await raw(
        url, "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1"
    )
    return columns + indexes


async def meta(url: str) -> dict[str, str]:
    return dict(await raw(url, "SELECT key, value FROM awaken_meta"))  # type: ignore[arg-type]


@pytest.fixture
def extra_migration(monkeypatch: pytest.MonkeyPatch) -> Iterator[Migration]:
    """A made-up version 2, as the mailbox issue will add one."""
    step = Migration(
        version=len(MIGRATIONS) + 1,
        name="probe",
        sqlite=("CREATE TABLE probe (id TEXT PRIMARY KEY)", "ALTER TABLE threads ADD COLUMN probe_flag INTEGER"),
        postgres=("CREATE TABLE probe (id TEXT PRIMARY KEY)", "ALTER TABLE threads ADD COLUMN probe_flag INTEGER"),
    )
    monkeypatch.setattr(migrations, "MIGRATIONS", [*MIGRATIONS, step])
    yield step


def test_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    for m in MIGRATIONS:
        assert len(m.sqlite) == len(m.postgres), f"migration {m.version} differs between dialects"


async def test_a_fresh_database_is_stamped(sql_url: str) -> None:
    async with open_store(sql_url):
        pass
    assert await meta(sql_url) == {"application": "awaken-stdio", "schema_version": str(len(MIGRATIONS))}


async def test_an_older_database_migrates_forward_keeping_its_data(
    sql_url: str, tmp_path: Path, extra_migration: Migration, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as m:
        m.setattr(migrations, "MIGRATIONS", MIGRATIONS)  # first, the database as released
        async with open_store(sql_url) as s:
            await s.set_profile("system", "k", "kept")
    assert (await meta(sql_url))["schema_version"] == str(len(MIGRATIONS))
    async with open_store(sql_url) as s:
        entry = await s.get_profile("system", "k")
        assert entry is not None and entry.value == "kept"
    assert (await meta(sql_url))["schema_version"] == str(extra_migration.version)
    assert await raw(sql_url, "SELECT count(*) FROM probe") == [(0,)]
    if sql_url.startswith("sqlite://"):  # fresh == migrated (PostgreSQL's catalog names differ per database)
        fresh = f"sqlite://{tmp_path}/fresh.db"
        async with open_store(fresh):
            pass
        assert await schema(fresh) == await schema(sql_url)


async def test_a_newer_database_is_refused_and_left_alone(sql_url: str) -> None:
    async with open_store(sql_url):
        pass
    await raw(sql_url, "UPDATE awaken_meta SET value = '99' WHERE key = 'schema_version'")
    before = await schema(sql_url)
    with pytest.raises(SchemaTooNew, match=r"schema version 99, this one knows up to \d+.*will not downgrade"):
        await open_store(sql_url)
    assert (await meta(sql_url))["schema_version"] == "99"
    assert await schema(sql_url) == before


async def test_another_programs_database_is_refused_untouched(sql_url: str) -> None:
    await raw(sql_url, "CREATE TABLE customers (id INTEGER PRIMARY KEY)")
    with pytest.raises(StoreUnavailable, match=r"is not an awaken-stdio database .*customers"):
        await open_store(sql_url)
    assert [r for r in await schema(sql_url) if "awaken_meta" in str(r)] == []


async def test_a_meta_table_of_another_application_is_refused(sql_url: str) -> None:
    await raw(sql_url, "CREATE TABLE awaken_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    await raw(sql_url, "INSERT INTO awaken_meta VALUES ('application', 'other')")
    with pytest.raises(StoreUnavailable, match="not an awaken-stdio database"):
        await open_store(sql_url)
