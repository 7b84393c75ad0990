"""The ``store`` fixture: every contract test runs on memory, file, SQLite and PostgreSQL.

PostgreSQL needs a server: ``eval "$(make -s pg-up)"`` starts a throwaway one and sets ``AWAKEN_STDIO_TEST_PG``
(or point that variable at your own). Without one the PostgreSQL cases skip with that reason locally, and fail in
CI (``CI`` set), where they must run. Each PostgreSQL test gets a fresh database, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from awaken_stdio.contract.stores import Store
from awaken_stdio.stores import open_store

PG_ENV = "AWAKEN_STDIO_TEST_PG"
BACKENDS = ["memory", "file", "sqlite", "postgresql"]


def pg_server_url() -> str:
    url = os.environ.get(PG_ENV)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{PG_ENV} is not set: CI must run the PostgreSQL store tests (scripts/pg-test-server.sh)")
        pytest.skip(f'no PostgreSQL server: set {PG_ENV} (eval "$(scripts/pg-test-server.sh start)")')
    return url


@pytest.fixture
async def pg_url() -> AsyncIterator[str]:
    """A URL to a fresh, empty database on the test server."""
    import asyncpg

    server = pg_server_url()
    name = f"awaken_test_{uuid.uuid4().hex[:16]}"
    admin = await asyncpg.connect(server)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """One URL per backend, under this test's tmp_path (PostgreSQL: a fresh database). Opening it twice reopens
    the same store, except for ``memory://``."""
    backend: str = request.param
    if backend == "memory":
        return "memory://"
    if backend == "file":
        return f"file://{tmp_path}/files"
    if backend == "sqlite":
        return f"sqlite://{tmp_path}/awaken.db"
    return request.getfixturevalue("pg_url")


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    async with open_store(store_url) as s:
        yield s
