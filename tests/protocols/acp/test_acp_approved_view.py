"""What the editor shows of an approved call: the same result as an allowed one, and no "running" before the person
approved it (the real agent process, every message validated against the ACP schema)."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Harness

pytestmark = pytest.mark.anyio

ALLOWED, ASKED = "call_0_0", "call_1_0"


def _calls(turns_commands: list[str]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]} for command in turns_commands
    ]
    return [*turns, {"text": "Done."}]


async def test_an_approved_command_shows_its_output_as_an_allowed_one_does(harness: Harness) -> None:
    harness.configure(
        _calls(["echo first", "echo second"]),
        agent='[agents.coder.permission]\ndefault = "ask"\nrules = [{ tool = "run_command(echo first*)", behavior = "allow" }]',  # noqa: E501
    )
    async with harness.spawn() as agent:  # no editor terminal: the output comes back as text
        session = (await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])).session_id
        assert await agent.prompt(session, "go") == "end_turn"
        assert [p["tool_call_id"] for p in agent.client.permissions] == [ASKED]
        assert agent.wire.errors == []
        finals = {
            u["toolCallId"]: u
            for u in agent.wire.updates(session)
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
        }

    allowed, approved = ({k: v for k, v in finals[c].items() if k != "toolCallId"} for c in (ALLOWED, ASKED))
    assert approved == _replaced(allowed, "first", "second")  # the two commands differ only in their word
    [text] = [c["content"]["text"] for c in approved["content"]]
    assert text.strip().startswith("second") and "{" not in text  # the command's output, not a JSON dump


def _replaced(value: Any, old: str, new: str) -> Any:
    """``value`` with ``old`` replaced by ``new`` in every string (the two commands differ only in their word)."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, dict):
        return {k: _replaced(v, old, new) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, list):
        return [_replaced(v, old, new) for v in value]  # pyright: ignore[reportUnknownVariableType]
    return value


async def test_a_guarded_call_is_pending_until_approved_then_in_progress(harness: Harness) -> None:
    harness.configure(_calls(["echo guarded"]), agent='[agents.coder.permission]\ndefault = "ask"')
    async with harness.spawn() as agent:
        session = (await agent.conn.new_session(cwd=str(agent.workspace), mcp_servers=[])).session_id
        assert await agent.prompt(session, "go") == "end_turn"
        assert agent.wire.errors == []
        seen: list[str] = []
        for direction, message in agent.wire.messages:
            if direction != "incoming":
                continue
            if message.get("method") == "session/request_permission":
                seen.append("asked")
            elif message.get("method") == "session/update":
                update = message["params"]["update"]
                if update.get("toolCallId") == "call_0_0" and "status" in update:
                    seen.append(update["status"])
    asked = seen.index("asked")
    assert "in_progress" not in seen[:asked] and seen[:asked][-1] == "pending", seen
    assert seen[asked + 1 :] == ["in_progress", "completed"], seen
