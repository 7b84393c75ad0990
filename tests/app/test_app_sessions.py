"""Sessions as the surfaces see them: deleting one takes its thread along; its history is its thread's messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, open_store
from awaken_stdio.app.sessions import Sessions
from awaken_stdio.contract.stores import SessionRecord


@pytest.mark.anyio
async def test_a_deleted_session_takes_its_thread_along(tmp_path: Path) -> None:
    async with open_store(f"sqlite:///{tmp_path}/awaken.db") as store:
        runtime = AgentRuntime(
            agents=[AgentSpec(id="a", model="m")], models={"m": ScriptedModel({"turns": [{"text": "hi"}]})}, store=store
        )
        result = await runtime.run_to_completion("hello")
        sessions = Sessions(store=store)
        record = SessionRecord(session_id="sess_1", thread_id=result.thread_id, cwd=str(tmp_path))
        await sessions.save(record)
        assert [m.text for m in await sessions.history(record)] == ["hello", "hi"]
        assert [s.session_id for s in (await sessions.list(cwd=str(tmp_path))).items] == ["sess_1"]
        assert [r.run_id for r in (await sessions.runs(record)).items] == [result.run_id]
        assert (await sessions.runs(record, statuses=["waiting"])).items == []

        assert await sessions.delete("sess_1") == record
        assert await sessions.load("sess_1") is None
        assert await store.load_thread(result.thread_id) is None
        assert (await store.list_runs(thread_id=result.thread_id)).items == []
        assert await sessions.delete("sess_1") is None
