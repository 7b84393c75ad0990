"""A command run in the editor's terminal is embedded in its tool call (``{"type": "terminal"}`` content) before the
terminal is released, as the ACP schema asks, so the editor can show its output while it runs and after.

The real agent process over real pipes, the official ACP SDK as an editor offering terminals; the order is read off
the raw wire.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Harness

pytestmark = pytest.mark.anyio


def embeds(message: dict[str, Any], terminal_id: str) -> bool:
    update = message.get("params", {}).get("update", {}) if message.get("method") == "session/update" else {}
    content = update.get("content", []) if update.get("sessionUpdate") == "tool_call_update" else []
    return {"type": "terminal", "terminalId": terminal_id} in content


async def test_the_terminal_is_embedded_before_it_is_released(harness: Harness) -> None:
    call = {"name": "run_command", "arguments": {"command": "echo from-terminal"}}
    harness.configure([{"tool_calls": [call]}, {"text": "Done."}], agent='[agents.coder.permission]\ndefault = "allow"')
    async with harness.spawn(terminal=True) as agent:
        sid = await agent.new_session()
        assert await agent.prompt(sid, "run it") == "end_turn"
        incoming = agent.wire.incoming()
    (release,) = [i for i, m in enumerate(incoming) if m.get("method") == "terminal/release"]
    terminal_id = incoming[release]["params"]["terminalId"]
    embedded = [i for i, m in enumerate(incoming) if embeds(m, terminal_id)]
    assert embedded and embedded[0] < release, "the terminal was released before it was embedded in its tool call"
