"""A tool's rich result (image, audio, embedded resource, resource link) reaches the ACP client as tool-call
content, each block as it is; the model reads their text stand-ins."""

from __future__ import annotations

import base64

import pytest

from tests.protocols.mcp.mcp_test_tools import PIXEL

pytestmark = pytest.mark.anyio


async def test_rich_tool_result_is_acp_content(harness):
    harness.configure(
        [{"tool_calls": [{"name": "picture", "arguments": {}}]}, {"text": "Seen."}],
        agent='[tools]\nmodules = ["tests.protocols.mcp.mcp_test_tools"]',
    )
    async with harness.spawn() as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "show me") == "end_turn"
        done = next(
            u for u in agent.updates(sid) if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
        )
    blocks = [c["content"] for c in done["content"]]
    assert [c["type"] for c in done["content"]] == ["content"] * 5
    assert [b["type"] for b in blocks] == ["text", "image", "audio", "resource", "resource_link"]
    assert base64.b64decode(blocks[1]["data"]) == PIXEL and blocks[1]["mimeType"] == "image/png"
    assert blocks[3]["resource"] == {"uri": "memo://pixel", "text": "red", "mimeType": "text/plain"}
    assert blocks[4] == {"type": "resource_link", "uri": "awaken://runs/r1", "name": "run r1",
                         "mimeType": "application/json"}  # fmt: skip
