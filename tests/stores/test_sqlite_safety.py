"""The SQLite store and files that are not its own, or no longer sound (issue 13): someone else's database is
identified read-only and left byte for byte as it was; a damaged one is refused with the way to recover it."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from awaken_stdio.contract.errors import StoreError, StoreUnavailable
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord
from awaken_stdio.stores import open_store

pytestmark = pytest.mark.anyio


def sidecars(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir() if p.name != path.name)


def journal_mode(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        db.close()


@pytest.mark.parametrize(
    ("statements", "refusal"),
    [
        (["CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)", "INSERT INTO customers VALUES (1, 'a')"],
         r"it has tables customers but no awaken_meta"),
        (["CREATE TABLE awaken_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
          "INSERT INTO awaken_meta VALUES ('application', 'another-tool')"],
         r"awaken_meta names 'another-tool'"),
    ],
)  # fmt: skip
async def test_a_foreign_database_is_refused_and_left_exactly_as_it_was(
    tmp_path: Path, statements: list[str], refusal: str
) -> None:
    path = tmp_path / "theirs.db"
    db = sqlite3.connect(path)
    for statement in statements:
        db.execute(statement)
    db.commit()
    db.close()
    before = path.read_bytes()
    assert journal_mode(path) == "delete"
    with pytest.raises(StoreUnavailable, match=rf"{path} is not an awaken-stdio database \({refusal}\)"):
        await open_store(f"sqlite://{path}")
    assert path.read_bytes() == before
    assert sidecars(path) == []  # no -wal, -shm or -journal was made beside it
    assert journal_mode(path) == "delete"


async def make_database(path: Path) -> None:
    async with open_store(f"sqlite://{path}") as store:
        for t in range(10):
            messages = [Message.user(f"message {i} " + "x" * 200) for i in range(100)]
            await store.checkpoint(
                Checkpoint(
                    thread_id=f"t{t}",
                    expected_message_count=0,
                    messages=messages,
                    run=RunRecord(run_id=f"r{t}", thread_id=f"t{t}", agent_id="a"),
                )
            )


def damage(path: Path) -> None:
    """Garbage over a page in the middle of the file, as a bad disk or a stray write would leave it."""
    db = sqlite3.connect(path)
    try:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size, pages = db.execute("PRAGMA page_size").fetchone()[0], db.execute("PRAGMA page_count").fetchone()[0]
    finally:
        db.close()
    with path.open("r+b") as f:
        f.seek(page_size * (pages // 2))
        f.write(b"\xa5garbage\x00" * (page_size // 9))


async def test_a_damaged_database_is_refused_with_the_way_to_recover_it(tmp_path: Path) -> None:
    path = tmp_path / "awaken.db"
    await make_database(path)
    damage(path)
    with pytest.raises(StoreError) as info:
        await open_store(f"sqlite://{path}")
    message = str(info.value)
    assert message.startswith(f"{path} is damaged (")
    assert f'`sqlite3 {path} ".recover" | sqlite3 fixed.db`' in message


def shell_recovers(tmp_path: Path) -> bool:
    """Whether there is a ``sqlite3`` shell with ``.recover`` (some distributions build it without sqlite_dbpage)."""
    if shutil.which("sqlite3") is None:
        return False
    sqlite3.connect(tmp_path / "probe.db").close()
    return subprocess.run(["sqlite3", str(tmp_path / "probe.db"), ".recover"], capture_output=True).returncode == 0


async def test_the_documented_recovery_gives_a_database_the_store_opens(tmp_path: Path) -> None:
    if not shell_recovers(tmp_path):
        pytest.skip("needs a sqlite3 shell whose .recover works")
    path = tmp_path / "awaken.db"
    await make_database(path)
    damage(path)
    recovered = subprocess.run(["sqlite3", str(path), ".recover"], capture_output=True, check=True).stdout
    subprocess.run(["sqlite3", str(tmp_path / "fixed.db")], input=recovered, check=True)
    async with open_store(f"sqlite://{tmp_path / 'fixed.db'}") as store:
        loaded = [t for t in range(10) if await store.load_thread(f"t{t}") is not None]
    assert loaded  # what the damaged page did not hold is back
