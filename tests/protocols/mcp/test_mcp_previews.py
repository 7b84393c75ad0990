"""An MCP client's user approves with the preview in front of them: the elicitation message shows the diff an edit
would make (shortened) or the command and where it runs, for agent runs and for direct ``[mcp] permission = "ask"``
calls, in both protocol eras, through the ``mcp`` SDK client against the real server process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from tests.protocols.mcp.support import connect, make_env, turn

pytestmark = [pytest.mark.anyio]
MODES = ["legacy", "auto"]


def recorder(messages: list[str], decision: str = "allow_once") -> Any:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        messages.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": decision})

    return elicit


@pytest.mark.parametrize("mode", MODES)
async def test_an_agent_edit_is_asked_about_with_its_diff(tmp_path: Path, mode: str) -> None:
    edit = {"name": "edit_file", "arguments": {"path": "a.txt", "old_text": "two", "new_text": "2"}}
    env = make_env(tmp_path, [turn("Editing.", edit), turn("Done.")])
    (env.cwd / "a.txt").write_text("one\ntwo\nthree\n")
    messages: list[str] = []
    async with connect(env, mode, elicitation_callback=recorder(messages)) as client:
        await client.list_tools()
        result = await client.call_tool("agent_helper", {"message": "edit it"})
    assert result.structured_content["status"] == "completed", result
    (message,) = messages
    assert "--- a/a.txt\n+++ b/a.txt" in message and "\n-two\n+2\n" in message and message.endswith("Allow it?")
    assert (env.cwd / "a.txt").read_text() == "one\n2\nthree\n"


@pytest.mark.parametrize("mode", MODES)
async def test_a_direct_call_is_asked_about_with_its_preview(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, mcp_permission="ask")
    messages: list[str] = []
    async with connect(env, mode, elicitation_callback=recorder(messages, "reject_once")) as client:
        await client.list_tools()
        written = await client.call_tool("write_file", {"path": "new.txt", "content": "hi\n"})
        ran = await client.call_tool("run_command", {"command": "touch x"})
    assert written.is_error and ran.is_error  # rejected: neither ran
    assert messages[0].startswith("The MCP client wants to call write_file:\n--- /dev/null\n+++ b/new.txt")
    assert "+hi" in messages[0]
    assert f"$ touch x\n(in {env.cwd})" in messages[1]
    assert not (env.cwd / "new.txt").exists() and not (env.cwd / "x").exists()


async def test_a_long_diff_is_shortened_in_the_message(tmp_path: Path) -> None:
    content = "".join(f"line {n}\n" for n in range(500))
    env = make_env(tmp_path, mcp_permission="ask")
    messages: list[str] = []
    async with connect(env, "legacy", elicitation_callback=recorder(messages, "reject_once")) as client:
        await client.call_tool("write_file", {"path": "big.txt", "content": content})
    (message,) = messages
    assert "+line 30" in message and "+line 400" not in message and "more lines" in message
