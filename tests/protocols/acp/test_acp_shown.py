"""What was shown is what runs: a file changed while its diff was being asked about is asked about again.

The editor's dialog shows the diff A -> B; the person (or anything else) changes the file to C before allowing.
Writing B then would overwrite C unseen, so the agent asks again at once with the diff C -> B, saying the file
changed; only the answer to that runs. Through the real agent process, on disk and in the editor's buffer.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from acp import text_block

from awaken_stdio.contract.preview import CHANGED

from .conftest import Agent, Harness

pytestmark = pytest.mark.anyio


def asked(agent: Agent) -> list[dict[str, Any]]:
    """The ``toolCall`` of each ``session/request_permission`` the agent sent, in order."""
    return [
        m["params"]["toolCall"]
        for d, m in agent.wire.messages
        if d == "incoming" and m.get("method") == "session/request_permission"
    ]


@pytest.mark.parametrize("fs", [False, True], ids=["disk", "editor-buffer"])
async def test_a_file_changed_while_asked_is_asked_about_again_with_the_new_diff(harness: Harness, fs: bool) -> None:
    target = harness.workspace / "a.txt"
    target.write_text("A\n")
    write = {"name": "write_file", "arguments": {"path": "a.txt", "content": "B\n"}}
    harness.configure([{"tool_calls": [write]}, {"text": "Done."}], agent='[agents.coder.permission]\ndefault = "ask"')
    async with harness.spawn(fs=fs) as agent:
        session = await agent.new_session()
        agent.client.hold_permission = anyio.Event()
        stop: list[Any] = []

        async def prompt() -> None:
            with anyio.fail_after(30):
                stop.append(await agent.conn.prompt(session_id=session, prompt=[text_block("write it")]))

        async with anyio.create_task_group() as tg:
            tg.start_soon(prompt)
            with anyio.fail_after(20):
                await agent.client.permission_asked.wait()
            if fs:
                agent.client.files[str(target)] = "C\n"  # the person typed in the editor's buffer
            else:
                target.write_text("C\n")
            agent.client.hold_permission.set()  # "Allow once", on the diff A -> B
        first, again = asked(agent)
        assert stop[0].stop_reason == "end_turn"
    assert [c["oldText"] for c in (first["content"][0], again["content"][0])] == ["A\n", "C\n"]
    assert again["toolCallId"] == first["toolCallId"] and again["content"][0]["newText"] == "B\n"
    notes = [c["content"]["text"] for c in again["content"] if c["type"] == "content"]
    assert notes == [CHANGED]
    written = agent.client.files[str(target)] if fs else target.read_text()
    assert written == "B\n"  # the second answer, given on C -> B, is what ran
    statuses = [u.get("status") for u in agent.updates(session) if u.get("toolCallId") == first["toolCallId"]]
    assert statuses[-1] == "completed" and "pending" in statuses
