"""Store URLs, the default location, and the one-line errors the CLI turns into exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from awaken_stdio.contract.errors import ConfigError, StoreUnavailable
from awaken_stdio.stores import StoreURL, default_store_url, open_store, parse_store_url

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("memory://", StoreURL(backend="memory", url="memory://")),
        ("memory:", StoreURL(backend="memory", url="memory://")),
        ("  MEMORY://  ", StoreURL(backend="memory", url="memory://")),
        ("file:///var/lib/awaken", StoreURL(backend="file", url="file:///var/lib/awaken", path="/var/lib/awaken")),
        (
            "file://localhost/var/lib/awaken/",
            StoreURL(backend="file", url="file:///var/lib/awaken", path="/var/lib/awaken"),
        ),
        ("sqlite:///abs/path.db", StoreURL(backend="sqlite", url="sqlite:///abs/path.db", path="/abs/path.db")),
        ("sqlite:////abs/path.db", StoreURL(backend="sqlite", url="sqlite:///abs/path.db", path="/abs/path.db")),
        (
            "sqlite:///abs/with%20space.db",
            StoreURL(backend="sqlite", url="sqlite:///abs/with space.db", path="/abs/with space.db"),
        ),
        (
            "postgresql://u:pw@db.example:5432/awaken",
            StoreURL(backend="postgresql", url="postgresql://u:pw@db.example:5432/awaken"),
        ),
        ("postgres://localhost/awaken", StoreURL(backend="postgresql", url="postgres://localhost/awaken")),
    ],
)
def test_parse_store_url(url: str, expected: StoreURL) -> None:
    assert parse_store_url(url) == expected


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("awaken.db", "no scheme"),
        ("mysql://localhost/db", "unknown store URL scheme 'mysql'"),
        ("memory://named", "takes nothing"),
        ("sqlite:relative.db", "must start with sqlite:///"),
        ("sqlite://relative.db", "names a host"),
        ("sqlite:///", "no usable file path"),
        ("file://server/share", "names a host"),
        ("postgresql://host:port/db", "cannot be parsed"),
        ("postgresql://", "names no server"),
    ],
)
def test_bad_urls_raise_config_error_naming_the_problem(url: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as info:
        parse_store_url(url)
    assert "\n" not in str(info.value)


def test_default_store_url_is_sqlite_in_the_user_data_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    url = default_store_url()
    assert url == f"sqlite://{tmp_path}/data/awaken-stdio/awaken.db"
    assert parse_store_url(url).path == f"{tmp_path}/data/awaken-stdio/awaken.db"


async def test_the_default_store_is_created_with_its_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    async with open_store(default_store_url()) as store:
        await store.set_profile("system", "k", 1)
    db = tmp_path / "data" / "awaken-stdio" / "awaken.db"
    assert db.stat().st_mode & 0o777 == 0o600
    assert db.parent.stat().st_mode & 0o777 == 0o700


async def test_open_store_is_awaitable_and_a_context_manager() -> None:
    store = await open_store("memory://")
    await store.set_profile("o", "k", 1)
    await store.aclose()
    async with open_store("memory://") as other:
        assert await other.get_profile("o", "k") is None  # each memory:// store is its own


async def test_unknown_scheme_fails_at_open() -> None:
    with pytest.raises(ConfigError, match="unknown store URL scheme"):
        await open_store("redis://localhost")


@pytest.mark.parametrize("scheme", ["file", "sqlite"])
async def test_a_location_that_cannot_be_written_is_one_clear_line(scheme: str, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable, match=str(blocker)) as info:
        await open_store(f"{scheme}://{blocker}/sub/store")
    assert "\n" not in str(info.value)


async def test_an_unreachable_postgresql_server_is_store_unavailable_without_the_password() -> None:
    with pytest.raises(
        StoreUnavailable, match=r"cannot reach PostgreSQL at postgresql://u:\*\*\*@127.0.0.1:1/db"
    ) as info:
        await open_store("postgresql://u:secret@127.0.0.1:1/db")
    assert "secret" not in str(info.value)


def test_drivers_load_only_for_their_urls(tmp_path: Path) -> None:
    code = (
        "import sys, anyio\n"
        "import awaken_stdio.stores as s\n"
        "assert 'sqlite3' not in sys.modules and 'asyncpg' not in sys.modules\n"
        "async def main():\n"
        f"    async with s.open_store('sqlite://{tmp_path}/x.db'):\n"
        "        pass\n"
        "anyio.run(main)\n"
        "assert 'sqlite3' in sys.modules and 'asyncpg' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "PYTHONWARNINGS": "error"})
