"""``provider = "mcp_sampling"``: an agent's model turns through the MCP client's model (``sampling/createMessage``),
with tool use in the 2025-11-25 sampling-with-tools form, driven by the ``mcp`` SDK client's sampling callback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from tests.protocols.mcp.support import Env, connect, make_env

pytestmark = [pytest.mark.anyio]
HOST_AGENT = """
[models.host]
provider = "mcp_sampling"
model = "claude-sonnet"

[agents.calc]
model = "host"
system_prompt = "You add numbers."
tools = ["add"]
expose_mcp = true

[agents.talker]
model = "host"
tools = []
expose_mcp = true
"""


class HostModel:
    """The client's model: asks for ``add`` once, then answers with the sum it was given."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        last = params.messages[-1].content
        results = [b for b in (last if isinstance(last, list) else [last]) if b.type == "tool_result"]
        if params.tools and not results:
            use = types.ToolUseContent(type="tool_use", id="use-1", name="add", input={"a": 2, "b": 3})
            return types.CreateMessageResultWithTools(role="assistant", content=[use], model="host-1",
                                                      stop_reason="toolUse")  # fmt: skip
        said = results[0].content[0].text if results else "nothing to add"
        text = types.TextContent(type="text", text=f"The sum: {said}")
        return types.CreateMessageResult(role="assistant", content=text, model="host-1", stop_reason="endTurn")


def sampling(tools: bool) -> dict[str, Any]:
    return {"sampling_capabilities": types.SamplingCapability(tools=types.SamplingToolsCapability() if tools else None)}


async def test_an_agent_answers_through_the_clients_model_with_a_tool_call(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    model = HostModel()
    async with connect(env, "legacy", sampling_callback=model, **sampling(tools=True)) as client:
        result = await client.call_tool("agent_calc", {"message": "What is 2 + 3?"})
    assert result.structured_content["status"] == "completed", result.content
    assert result.structured_content["response"] == 'The sum: {"sum": 5}'
    first, second = model.requests
    assert first.system_prompt.startswith("You add numbers.")
    assert first.messages[0].role == "user" and first.messages[0].content[0].text == "What is 2 + 3?"
    assert [t.name for t in first.tools] == ["add"] and first.model_preferences.hints[0].name == "claude-sonnet"
    assert second.messages[1].content[0].type == "tool_use" and second.messages[2].content[0].tool_use_id == "use-1"


async def test_a_client_without_sampling_tools_gets_a_clear_error(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    model = HostModel()
    async with connect(env, "legacy", sampling_callback=model, **sampling(tools=False)) as client:
        failed = await client.call_tool("agent_calc", {"message": "What is 2 + 3?"})
        talked = await client.call_tool("agent_talker", {"message": "Hi"})
    assert failed.is_error and "sampling.tools" in failed.content[0].text and len(model.requests) == 1
    assert talked.structured_content["response"] == "The sum: nothing to add"
    assert model.requests[0].tools is None


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_no_sampling_no_model(tmp_path: Path, mode: str) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    async with connect(env, mode) as client:
        result = await client.call_tool("agent_talker", {"message": "Hi"})
    assert result.is_error and "no MCP client's model" in result.content[0].text


class NoConfig(Env):
    """``awaken-stdio mcp`` with no config file anywhere and no API key."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "awaken_stdio", "mcp", "--store", self.store, "--cwd", str(self.cwd)]

    def environ(self) -> dict[str, str]:
        env = {k: v for k, v in super().environ().items() if not k.endswith("_API_KEY") and "AWAKEN_STDIO" not in k}
        return env | {"HOME": str(self.root), "XDG_CONFIG_HOME": str(self.root / "xdg")}


@pytest.mark.parametrize("samples", [True, False])
async def test_the_clients_model_is_the_default_without_a_key(tmp_path: Path, samples: bool) -> None:
    base = make_env(tmp_path)
    env = NoConfig(base.root, base.config, base.store, base.cwd)
    model = HostModel()
    kwargs = {"sampling_callback": model, **sampling(tools=True)} if samples else {}
    async with connect(env, "legacy", **kwargs) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        if samples:
            result = await client.call_tool("agent_default", {"message": "Hi"})
    assert ("agent_default" in names) is samples
    if samples:
        assert result.structured_content["status"] == "completed" and model.requests
        assert "read_file" in {t.name for t in model.requests[0].tools}
