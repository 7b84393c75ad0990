"""Fixtures of the end-to-end tests that drive several real processes over one store."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from tests.contract.conftest import pg_server_url


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[Path], str]]:
    """A fresh store URL per call (a SQLite file under the given directory, or a new PostgreSQL database)."""
    if request.param == "sqlite":
        yield lambda where: f"sqlite://{where}/awaken.db"
        return
    import asyncpg

    server = pg_server_url()
    made: list[str] = []

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(server)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def fresh(_: Path) -> str:
        name = f"awaken_race_{uuid.uuid4().hex[:12]}"
        anyio.run(admin, f'CREATE DATABASE "{name}"')
        made.append(name)
        return f"{server.rsplit('/', 1)[0]}/{name}"

    yield fresh
    for name in made:
        anyio.run(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
