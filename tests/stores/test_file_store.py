"""What only the file backend promises: its marker, its format version, and a crash between its two writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from awaken_stdio.contract.errors import SchemaTooNew, StoreUnavailable
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, RunRecord
from awaken_stdio.stores import open_store
from awaken_stdio.stores.file import FileStore

pytestmark = pytest.mark.anyio


def checkpoint(expected: int, *texts: str) -> Checkpoint:
    return Checkpoint(
        thread_id="t1",
        expected_message_count=expected,
        messages=[Message.user(t) for t in texts],
        run=RunRecord(run_id="r1", thread_id="t1", agent_id="a"),
    )


async def test_a_directory_of_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(StoreUnavailable, match="not an awaken-stdio store directory"):
        await open_store(f"file://{tmp_path}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["photo.jpg"]


async def test_a_newer_format_is_refused(tmp_path: Path) -> None:
    async with open_store(f"file://{tmp_path}"):
        pass
    (tmp_path / "awaken-store.json").write_text(json.dumps({"application": "awaken-stdio", "format": 7}))
    with pytest.raises(SchemaTooNew, match="version 7"):
        await open_store(f"file://{tmp_path}")


async def test_files_are_plain_json(tmp_path: Path) -> None:
    async with open_store(f"file://{tmp_path}") as store:
        await store.checkpoint(checkpoint(0, "hello"))
        await store.set_profile("agent:global", "locale", "fr")
    commit = json.loads((tmp_path / "threads" / "t1" / "commit.json").read_text())
    assert commit["thread"]["message_count"] == 1 and commit["chunks"] == [[0, 1]] and "r1" in commit["runs"]
    line = (tmp_path / "threads" / "t1" / "m000000000000.jsonl").read_text()
    assert json.loads(line)["content"] == [{"type": "text", "text": "hello"}]
    entry = json.loads((tmp_path / "profiles" / "agent%3Aglobal" / "locale.json").read_text())
    assert entry["value"] == "fr"


async def test_a_crash_between_messages_and_commit_leaves_the_checkpoint_absent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(f"file://{tmp_path}") as store:
        await store.checkpoint(checkpoint(0, "a"))

        def killed(self: FileStore, thread_id: str, c: dict[str, object]) -> None:
            raise KeyboardInterrupt  # the process dies after the chunk file, before commit.json

        with monkeypatch.context() as m:
            m.setattr(FileStore, "_save_commit", killed)
            with pytest.raises(KeyboardInterrupt):
                await store.checkpoint(checkpoint(1, "torn-1", "torn-2", "torn-3"))
    assert (tmp_path / "threads" / "t1" / "m000000000001.jsonl").exists()  # the orphan
    async with open_store(f"file://{tmp_path}") as store:
        assert [m.text for m in await store.load_messages("t1")] == ["a"]
        await store.checkpoint(checkpoint(1, "b"))
        await store.checkpoint(checkpoint(2, "c"))
        assert [m.text for m in await store.load_messages("t1")] == ["a", "b", "c"]
