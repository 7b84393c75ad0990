"""An MCP client approves the diff it was shown: a file changed before the approval reached the run is not written
over; the call is asked about again with the diff as it is now (by elicitation, or as the run's pending call for
``resume_run``). The real server process, driven by the ``mcp`` SDK client."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from awaken_stdio.contract.preview import CHANGED
from tests.protocols.mcp.support import Env, connect, make_env, turn

pytestmark = [pytest.mark.anyio]
WRITE = {"name": "write_file", "arguments": {"path": "a.txt", "content": "B\n"}}


def writer(tmp_path: Path) -> Env:
    env = make_env(tmp_path, [turn("Writing.", WRITE), turn("Done.")])
    (env.cwd / "a.txt").write_text("A\n")
    return env


async def test_elicitation_asks_again_when_the_file_changed_while_asked(tmp_path: Path) -> None:
    env = writer(tmp_path)
    messages: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        if len(messages) == 1:
            (env.cwd / "a.txt").write_text("C\n")  # changed while the person looked at A -> B
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async with connect(env, "legacy", elicitation_callback=elicit) as client:
        result = await client.call_tool("agent_helper", {"message": "write it"})
    assert result.structured_content["status"] == "completed", result
    first, again = messages
    assert "\n-A\n+B" in first and "\n-C\n+B" in again and CHANGED in again
    assert (env.cwd / "a.txt").read_text() == "B\n"  # written once, on the diff approved last


async def test_resume_run_returns_the_run_waiting_again_when_the_file_changed(tmp_path: Path) -> None:
    env = writer(tmp_path)
    async with connect(env, "auto") as client:  # no elicitation: the run waits
        waiting = (await client.call_tool("agent_helper", {"message": "write it"})).structured_content
        assert waiting["status"] == "waiting"
        (env.cwd / "a.txt").write_text("C\n")
        (call,) = waiting["pending"]
        decisions = [{"tool_call_id": call["tool_call_id"], "approve": True}]
        again = await client.call_tool("resume_run", {"run_id": waiting["run_id"], "decisions": decisions})
        assert again.structured_content["status"] == "waiting", again
        assert again.structured_content["pending"] == [{**call, "reason": CHANGED}]
        assert (env.cwd / "a.txt").read_text() == "C\n"  # nothing written over the change
        done = await client.call_tool("resume_run", {"run_id": waiting["run_id"], "decisions": decisions})
        assert done.structured_content["status"] == "completed", done
    assert (env.cwd / "a.txt").read_text() == "B\n"
