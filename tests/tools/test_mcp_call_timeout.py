"""A configured MCP server's tool call that never answers: cancelled on the server after ``call_timeout_s``, and a
failed call naming the server, the tool and the limit; the connection stays usable."""

from __future__ import annotations

import anyio
import pytest
from test_mcp_client import SERVER, Calls, LogWatch, by_name, logs, stdio

from awaken_stdio.app.assemble import mcp_server_spec
from awaken_stdio.app.config import McpServerConfig
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.tools.mcp import DEFAULT_CALL_TIMEOUT_S, McpServerSpec, open_mcp_toolsets

pytestmark = pytest.mark.anyio
__all__ = ["logs"]  # the fixture, shared with test_mcp_client


async def test_an_unanswered_call_times_out_and_is_cancelled_on_the_server(logs: LogWatch) -> None:
    calls = Calls()
    with anyio.fail_after(20):
        async with open_mcp_toolsets([stdio("srv", call_timeout_s=0.5)]) as toolsets:
            tools = by_name(toolsets.tools())
            block = tools["srv__block"]
            with pytest.raises(ToolFailure) as caught:  # a failed call the model sees, not a failed run
                await block.execute({}, calls.ctx(block))
            assert caught.value.kind == "timeout"
            assert "MCP server srv: tool block did not answer within 0.5 s" in str(caught.value)
            await logs.wait_for("[srv] block cancelled")  # notifications/cancelled reached the server
            assert (await tools["srv__echo"].execute({"text": "still here"}, calls.ctx(block))).data == "still here"


def test_the_call_timeout_comes_from_the_config_with_a_default() -> None:
    config = McpServerConfig.model_validate({"command": "srv", "call_timeout_s": 7})
    assert mcp_server_spec("s", config).call_timeout_s == 7
    assert McpServerConfig(command="srv").call_timeout_s == DEFAULT_CALL_TIMEOUT_S
    session_server = McpServerSpec.from_acp({"name": "s", "command": str(SERVER)})
    assert session_server.call_timeout_s == DEFAULT_CALL_TIMEOUT_S
