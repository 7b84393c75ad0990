"""Loading a thread again reads only what is new: the SQL stores keep the conversations they served decoded and,
at each load, read the thread row, its latest run and the messages appended since (issue 16: a turn must not cost
more as the conversation grows). What another handle (another process) wrote is always seen."""

from __future__ import annotations

import pytest

from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import Checkpoint, RunRecord, Store
from awaken_stdio.stores import _sql, open_store

pytestmark = pytest.mark.anyio


@pytest.fixture
def sql_url(store_url: str) -> str:
    if not store_url.startswith(("sqlite", "postgres")):
        pytest.skip("the SQL stores' decoded-thread cache")
    return store_url


async def append(store: Store, expected: int, *texts: str, run_id: str = "r1", state: int | None = None) -> None:
    run = RunRecord(run_id=run_id, thread_id="t", agent_id="coder", status="running", steps=expected)
    persisted = PersistedState(revision=state, extensions={"k": state}) if state is not None else None
    await store.checkpoint(
        Checkpoint(
            thread_id="t",
            expected_message_count=expected,
            messages=[Message.user(t) for t in texts],
            run=run,
            thread_state=persisted,
        )
    )


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_a_load_decodes_only_new_messages(sql_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    decoded: list[object] = []
    decode = _sql.message_from_json
    monkeypatch.setattr(_sql, "message_from_json", lambda d: decoded.append(d) or decode(d))
    async with open_store(sql_url) as ours, open_store(sql_url) as theirs:
        await append(ours, 0, *(f"m{i}" for i in range(50)))
        assert len((await ours.load_thread("t")).messages) == 50  # type: ignore[union-attr]
        decoded.clear()
        await append(ours, 50, "ours")
        loaded = await ours.load_thread("t")
        assert loaded is not None and texts(loaded.messages)[-2:] == ["m49", "ours"] and decoded == []
        await append(theirs, 51, "theirs", run_id="r2", state=7)
        decoded.clear()
        loaded = await ours.load_thread("t")
        assert loaded is not None and texts(loaded.messages)[-3:] == ["m49", "ours", "theirs"]
        assert len(decoded) == 1  # only the message the other handle appended
        assert loaded.thread.message_count == 52 and loaded.latest_run is not None
        assert loaded.latest_run.run_id == "r2" and loaded.state is not None and loaded.state.extensions == {"k": 7}
        loaded.messages.append(Message.user("not stored"))  # the caller's list, not the store's
        again = await ours.load_thread("t")
        assert again is not None and len(again.messages) == 52


async def test_a_thread_deleted_or_recreated_elsewhere_is_loaded_anew(sql_url: str) -> None:
    async with open_store(sql_url) as ours, open_store(sql_url) as theirs:
        await append(ours, 0, "a", "b")
        assert await ours.load_thread("t") is not None
        await theirs.delete_thread("t")
        assert await ours.load_thread("t") is None
        await append(ours, 0, "a", "b")
        assert await ours.load_thread("t") is not None
        await theirs.delete_thread("t")
        await append(theirs, 0, "c", "d", "e")  # as many messages and more, none of them the ones held
        loaded = await ours.load_thread("t")
        assert loaded is not None and texts(loaded.messages) == ["c", "d", "e"]
        await ours.delete_thread("t")
        await append(theirs, 0, "f")
        loaded = await ours.load_thread("t")
        assert loaded is not None and texts(loaded.messages) == ["f"]


async def test_loading_a_thread_begins_no_transaction(tmp_path: object) -> None:
    """One statement reads the thread, its state and latest run; the messages below its count never change."""
    url = f"sqlite://{tmp_path}/awaken.db"
    async with open_store(url) as ours, open_store(url) as theirs:
        statements: list[str] = []
        await ours._reader.call(lambda conn: conn.set_trace_callback(statements.append))  # type: ignore[attr-defined]
        assert await ours.load_thread("t") is None
        await append(theirs, 0, "a", "b")
        loaded = await ours.load_thread("t")  # not held yet: read whole
        assert loaded is not None and texts(loaded.messages) == ["a", "b"]
        await append(theirs, 2, "c")
        loaded = await ours.load_thread("t")
        assert loaded is not None and texts(loaded.messages) == ["a", "b", "c"]
        assert statements and not [s for s in statements if s.startswith("BEGIN")]
