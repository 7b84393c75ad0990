"""``/compact`` end to end: the session's conversation is summarised by the configured summary model, the command
answers with what it did, and ``session/load`` still replays the whole history without the internal summary."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

LONG = "word " * 500  # about 629 tokens a prompt: two turns are enough to compact
SUMMARY = "The user sent three long prompts."
ANSWERS = ["first answer", "second answer", "third answer"]


def agent_texts(updates: list[dict[str, Any]]) -> list[str]:
    return [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]


async def test_compact_summarises_and_load_still_replays_the_whole_history(harness):
    (harness.dir / "summary.json").write_text(json.dumps({"turns": [{"text": SUMMARY}]}))
    harness.configure(
        [{"text": text} for text in ANSWERS],
        models='[models.summary]\nprovider = "scripted"\nscript = "summary.json"',
        agent='[agents.coder.compaction]\nsummary_model = "summary"',
    )
    prompts = [LONG + str(i) for i in (1, 2, 3)]
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        for prompt in prompts:
            assert await agent.prompt(sid, prompt) == "end_turn"
        assert await agent.prompt(sid, "/compact") == "end_turn"
        done = agent_texts(agent.updates(sid))[-1]
        assert done.startswith("Compacted the conversation: 4 earlier messages are now a summary (about 1,")
        assert await agent.prompt(sid, "/compact") == "end_turn"  # only the summary precedes the latest turn
        again = agent_texts(agent.updates(sid))[-1]
        assert again == "Nothing was compacted: no earlier turn can be summarised apart from the latest one."

    async with harness.spawn() as agent:
        seen = len(agent.wire.incoming())
        await agent.conn.load_session(cwd=str(agent.workspace), session_id=sid, mcp_servers=[])
        await anyio.sleep(0.1)
        before, _ = agent.wire.around_answer("session/load", seen)
        replayed = [m["params"]["update"] for m in before]
        users = [u["content"]["text"] for u in replayed if u["sessionUpdate"] == "user_message_chunk"]
        assert users == prompts and agent_texts(replayed) == ANSWERS  # nothing was deleted
        assert SUMMARY not in json.dumps(replayed)  # the summary is internal: the model's, not the person's
