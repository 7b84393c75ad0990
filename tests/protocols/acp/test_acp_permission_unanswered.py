"""An editor that cannot ask its person (no dialog: it answers ``session/request_permission`` with -32601, or with no
valid choice) ends the turn at once with a message saying how to decide, and the run stays waiting, decidable from
anywhere: the CLI, or a later prompt that asks again.

The real agent process over real pipes, the official ACP SDK as the editor, a real ``runs approve`` process.
"""

from __future__ import annotations

import anyio
import pytest

from awaken_stdio.stores import open_store

from .conftest import Agent, Harness
from .test_acp_approvals import approve, waiting_run

pytestmark = pytest.mark.anyio

WRITE = {"name": "write_file", "arguments": {"path": "out.txt", "content": "approved"}}


def told(agent: Agent, sid: str) -> str:
    """The agent's text to the person in this session."""
    chunks = [u for u in agent.updates(sid) if u["sessionUpdate"] == "agent_message_chunk"]
    return "".join(u["content"]["text"] for u in chunks)


async def status(harness: Harness, run_id: str) -> str:
    async with open_store(harness.store) as store:
        record = await store.load_run(run_id)
    assert record is not None
    return record.status


@pytest.mark.parametrize("answer", ["error", "id:no_such_option"])
async def test_a_question_the_editor_cannot_ask_ends_the_turn_and_the_run_waits(harness: Harness, answer: str):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Done."}])
    async with harness.spawn() as agent:
        agent.client.answers = [answer]
        sid = await agent.new_session()
        assert await agent.prompt(sid, "write it", timeout=30) == "end_turn"  # it hung forever before
        run_id = await waiting_run(harness.store, sid)
        text = told(agent, sid)
        assert "could not show the approval" in text and f"awaken-stdio runs approve {run_id}" in text, text
        assert await status(harness, run_id) == "waiting"

        done = approve(harness, run_id)  # decided from another surface while the editor is still open
        assert done.returncode == 0, done.stderr
    assert (harness.workspace / "out.txt").read_text() == "approved"
    assert await status(harness, run_id) == "done"


async def test_a_re_offered_question_the_editor_cannot_ask_ends_the_turn(harness: Harness):
    harness.configure([{"tool_calls": [WRITE]}, {"text": "Done."}, {"text": "Next."}])
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        await agent.killed_while_asked(sid, "write it")  # the run is left waiting in the store
    run_id = await waiting_run(harness.store, sid)

    async with harness.spawn() as agent:
        with anyio.fail_after(20):
            await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
        agent.client.answers = ["error", "allow_once"]  # then the editor's dialog is back: asked again, approved
        assert await agent.prompt(sid, "and now?", timeout=30) == "end_turn"
        assert f"awaken-stdio runs reject {run_id}" in told(agent, sid)
        assert await status(harness, run_id) == "waiting"
        assert await agent.prompt(sid, "again", timeout=30) == "end_turn"
        assert len(agent.client.permissions) == 2
    assert (harness.workspace / "out.txt").read_text() == "approved"
    assert await status(harness, run_id) == "done"
