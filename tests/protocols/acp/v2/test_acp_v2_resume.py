"""ACP v2's differentiator end to end: an approval that waits is ``requires_action`` live, survives kill -9 of the
agent, is ``requires_action`` again to a client that comes back with ``session/resume {replayFrom}``, and once
approved the tool's effect happens exactly once."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.protocols.acp.conftest import Harness
from tests.protocols.acp.v2.support import spawn_v2

pytestmark = pytest.mark.anyio

COUNT = "echo ran >> count.txt"


def _configure(harness: Harness) -> None:
    harness.configure(
        [
            {
                "text": "Counting.",
                "tool_calls": [{"id": "call_1", "name": "run_command", "arguments": {"command": COUNT}}],
            },
            {"text": "Done."},
        ]
    )


async def test_waiting_approval_survives_kill_and_resume_runs_once(tmp_path: Path) -> None:
    harness = Harness(tmp_path)
    _configure(harness)
    cwd = str(harness.workspace)
    async with spawn_v2(harness.command(), harness.workspace) as client:
        client.hold = True  # the question stays open: the process dies first
        sid = (await client.request("session/new", {"cwd": cwd}))["result"]["sessionId"]
        receipt = await client.request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "count"}]}
        )
        message_id = receipt["result"]["_meta"]["messageId"]
        asked = await client.wait_for(lambda m: m.get("method") == "session/request_permission")
        await client.wait_for(lambda m: m.get("params", {}).get("update", {}).get("state") == "requires_action")
        subject = asked["params"]["subject"]
        assert subject == {"type": "command", "command": COUNT, "cwd": cwd, "toolCallId": "call_1"}
        assert asked["params"]["title"]
        accepted = [u for u in client.updates() if u["sessionUpdate"] == "user_message"]
        assert accepted[0]["messageId"] == message_id
        assert client.states() == [("running", None), ("requires_action", None)]
        client.kill()
        await client.process.wait()
    assert not (harness.workspace / "count.txt").exists()

    async with spawn_v2(harness.command(), harness.workspace) as client:
        start = {"type": "start"}
        answer = await client.request("session/resume", {"sessionId": sid, "cwd": cwd, "replayFrom": start})
        before = client.incoming[: client.incoming.index(answer)]
        replayed = [m["params"]["update"] for m in before if m.get("method") == "session/update"]
        assert replayed[0] == {"sessionUpdate": "user_message_chunk", "messageId": message_id,
                               "content": {"type": "text", "text": "count"}}  # fmt: skip
        assert any(u.get("toolCallId") == "call_1" and u["sessionUpdate"] == "tool_call_update" for u in replayed)
        assert replayed[-1] == {"sessionUpdate": "state_update", "state": "requires_action"}
        await client.wait_for(lambda m: m.get("method") == "session/request_permission")  # asked again, at once
        with anyio.fail_after(30):
            await client.wait_for(lambda m: m.get("params", {}).get("update", {}).get("state") == "idle")
        assert client.states()[-3:] == [("requires_action", None), ("running", None), ("idle", "end_turn")]
    assert (harness.workspace / "count.txt").read_text() == "ran\n"  # exactly once
