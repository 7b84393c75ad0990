"""``session/fork`` (unstable) end to end, through the official SDK client: the fork is a new session whose
conversation is a copy of the source's (whole, or up to a message), independent afterwards, and durable like any
session (a new process reloads both as they are). Answers are checked against the pinned unstable schema.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp import RequestError

from .conftest import Harness

pytestmark = pytest.mark.anyio

ANSWERS = ["first answer", "second answer", "third answer", "fourth answer"]


def texts(updates: list[dict[str, Any]], kind: str) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == kind]


async def replay(agent: Any, session_id: str) -> list[dict[str, Any]]:
    seen = len(agent.wire.incoming())
    await agent.conn.load_session(cwd=str(agent.workspace), session_id=session_id, mcp_servers=[])
    await anyio.sleep(0.1)
    before, _ = agent.wire.around_answer("session/load", seen)
    return [m["params"]["update"] for m in before]


async def test_a_fork_copies_the_conversation_and_goes_its_own_way(harness: Harness) -> None:
    harness.configure([{"text": t} for t in ANSWERS])
    async with harness.spawn(unstable=True) as agent:
        assert agent.init.agent_capabilities.session_capabilities.fork is not None
        source = await agent.new_session()
        assert await agent.prompt(source, "one") == "end_turn"
        assert await agent.prompt(source, "two") == "end_turn"
        forked = await agent.conn.fork_session(cwd=str(agent.workspace), session_id=source, mcp_servers=[])
        assert forked.session_id != source
        assert {m.id for m in forked.modes.available_modes} >= {"default", "plan"}
        # the model sees the copied conversation: it plays its third turn, as it would have in the source
        assert await agent.prompt(forked.session_id, "three in the fork") == "end_turn"
        assert texts(agent.updates(forked.session_id), "agent_message_chunk")[-1] == "third answer"

    async with harness.spawn(unstable=True) as agent:  # both are durable, and the source did not change
        source_replay = await replay(agent, source)
        assert texts(source_replay, "user_message_chunk") == ["one", "two"]
        assert texts(source_replay, "agent_message_chunk") == ANSWERS[:2]
        fork_replay = await replay(agent, forked.session_id)
        assert texts(fork_replay, "user_message_chunk") == ["one", "two", "three in the fork"]
        assert texts(fork_replay, "agent_message_chunk") == ANSWERS[:3]
        listed = await agent.conn.list_sessions()
        titles = {s.session_id: s.title for s in listed.sessions}
        assert titles[forked.session_id] == f"{titles[source]} (fork)"


async def test_a_fork_up_to_a_message_keeps_only_what_came_before(harness: Harness) -> None:
    harness.configure([{"text": t} for t in ANSWERS])
    async with harness.spawn(unstable=True) as agent:
        source = await agent.new_session()
        assert await agent.prompt(source, "one") == "end_turn"
        assert await agent.prompt(source, "two") == "end_turn"
        first = next(u for u in agent.updates(source) if u["sessionUpdate"] == "agent_message_chunk")["messageId"]
        params = {
            "sessionId": source,
            "cwd": str(agent.workspace),
            "mcpServers": [],
            "_meta": {"awaken-stdio": {"messageId": first}},
        }
        forked = (await agent.raw("session/fork", params))["sessionId"]
        assert await agent.prompt(forked, "again") == "end_turn"
        assert texts(agent.updates(forked), "agent_message_chunk")[-1] == "second answer"  # one turn was copied
        fork_replay = await replay(agent, forked)
        assert texts(fork_replay, "user_message_chunk") == ["one", "again"]

        with pytest.raises(RequestError) as raised:  # a message the source does not have
            await agent.raw("session/fork", {**params, "_meta": {"awaken-stdio": {"messageId": "msg_nope"}}})
        assert raised.value.code == -32602
        with pytest.raises(RequestError) as raised:  # a session that does not exist
            await agent.raw("session/fork", {**params, "sessionId": "sess_nope", "_meta": None})
        assert raised.value.code == -32002
