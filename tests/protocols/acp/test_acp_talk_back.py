"""A tool in an ACP session's run asks the person a question (``ctx.elicit``): a form through ``elicitation/create``
when the editor renders forms, else a single choice as a permission question; anything else fails the call with a
clear message. The real agent process, the official ACP SDK client, the schema-checked wire."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import AcceptElicitationResponse

from .conftest import Harness

pytestmark = pytest.mark.anyio

TOOLS = '[agents.coder.permission]\ndefault = "allow"\n[tools]\nmodules = ["tests.protocols.acp.asking_tools"]'


def configure(harness: Harness, tool: str) -> None:
    harness.configure([{"tool_calls": [{"name": tool, "arguments": {}}]}, {"text": "Done."}], agent=TOOLS)


def results(updates: list[dict[str, Any]]) -> list[str]:
    """The text of each finished tool call."""
    return [
        c["content"]["text"]
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") in ("completed", "failed")
        for c in u.get("content") or []
        if c.get("type") == "content"
    ]


@pytest.mark.parametrize(("answer", "said"), [("name:blue", "accept: blue"), ("reject_once", "decline: None"),
                                              ("cancelled", "cancel: None")])  # fmt: skip
async def test_a_single_choice_is_asked_as_a_permission_question(harness: Harness, answer: str, said: str) -> None:
    configure(harness, "pick_colour")
    async with harness.spawn() as agent:
        session = await agent.new_session()
        agent.client.answers = [answer]
        assert await agent.prompt(session, "pick") == "end_turn"  # a dismissed question is not a cancelled turn
        (asked,) = [m["params"] for d, m in agent.wire.messages if m.get("method") == "session/request_permission"]
        assert [o["name"] for o in asked["options"]] == ["red", "blue", "Decline"]
        assert asked["toolCall"]["content"][0]["content"]["text"] == "Which colour?"
        assert results(agent.updates(session)) == [said]


async def test_an_editor_with_forms_gets_the_form(harness: Harness) -> None:
    configure(harness, "ask_name")
    async with harness.spawn(forms=True) as agent:
        agent.client.form_answer = AcceptElicitationResponse(action="accept", content={"name": "Ada"})
        session = await agent.new_session()
        assert await agent.prompt(session, "ask") == "end_turn"
        ((message, mode),) = agent.client.forms
        assert message == "Your name?" and mode.session_id == session and mode.tool_call_id
        assert mode.requested_schema.properties["name"].type == "string"
        assert results(agent.updates(session)) == ["accept: Ada"]


async def test_a_form_an_editor_cannot_show_fails_the_call_saying_why(harness: Harness) -> None:
    configure(harness, "ask_name")
    async with harness.spawn() as agent:
        session = await agent.new_session()
        assert await agent.prompt(session, "ask") == "end_turn"
        assert "session/request_permission" not in agent.client.calls
    text = " ".join(results(agent.updates(session)))
    assert "renders no forms" in text and "not a single choice" in text
