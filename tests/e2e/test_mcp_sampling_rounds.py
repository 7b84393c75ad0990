"""``provider = "mcp_sampling"`` in the 2026-07-28 era: each model turn of an agent run is one ``input_required``
round of the client's call (the sampling request, a sealed ``requestState`` naming the waiting run), and the retry
with the model's answer resumes the run where it stopped, in this process or one started after a kill -9."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mcp.types as types
import pytest

from tests.e2e.test_mcp_sampling_provider import NoConfig
from tests.e2e.test_mcp_server_wire import Raw, spawn
from tests.protocols.mcp.support import check_wire, connect, make_env

pytestmark = [pytest.mark.anyio]
HOST_AGENT = """
[models.host]
provider = "mcp_sampling"

[agents.calc]
model = "host"
system_prompt = "You add numbers and mark the sum."
tools = ["add", "mark"]
expose_mcp = true

[agents.calc.permission]
default = "allow"
"""
CAPABILITIES = {"sampling": {"tools": {}}}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": CAPABILITIES,
}


class ThreeTurns:
    """The client's model: ``add``, then ``mark`` with the sum it was given, then its answer."""

    def __init__(self) -> None:
        self.requests: list[types.CreateMessageRequestParams] = []

    async def __call__(self, ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        turns = sum(1 for m in params.messages if m.role == "assistant")
        if turns == 0:
            use = types.ToolUseContent(type="tool_use", id="use-1", name="add", input={"a": 2, "b": 3})
        elif turns == 1:
            use = types.ToolUseContent(type="tool_use", id="use-2", name="mark", input={"label": "five"})
        else:
            text = types.TextContent(type="text", text="Marked 5.")
            return types.CreateMessageResult(role="assistant", content=text, model="host-1", stop_reason="endTurn")
        return types.CreateMessageResultWithTools(
            role="assistant", content=[use], model="host-1", stop_reason="toolUse"
        )


async def test_an_agent_runs_on_the_clients_model_one_round_per_turn(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    model = ThreeTurns()
    sampling = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with connect(env, "2026-07-28", sampling_callback=model, sampling_capabilities=sampling) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("agent_calc", {"message": "Add 2 and 3, then mark the sum."})
    assert result.structured_content is not None, result.content
    assert result.structured_content["status"] == "completed", result.content
    assert result.structured_content["response"] == "Marked 5."
    first, second, third = model.requests
    assert first.system_prompt == "You add numbers and mark the sum." and {t.name for t in first.tools} == {
        "add",
        "mark",
    }
    assert second.messages[2].content[0].type == "tool_result" and second.messages[2].content[0].tool_use_id == "use-1"
    assert '"sum": 5' in second.messages[2].content[0].content[0].text
    assert third.messages[4].content[0].content[0].text == "marked five"
    assert env.marks == ["five"]  # the tool ran once, whatever the rounds around it


def sampled(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "model": "host-1", "stopReason": stop}


async def call(raw: Raw, id: int, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    params = {"name": "agent_calc", "arguments": arguments, "_meta": META, **extra}
    return await raw.request(id, "tools/call", params)


async def kill(raw: Raw) -> None:
    raw.process.kill()
    await raw.process.wait()
    check_wire(raw.sent, [m for m in raw.received if m.get("id") is not None or "method" in m])


async def test_a_round_answered_after_kill_9_resumes_the_durable_run(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    arguments = {"message": "Mark 7."}
    raw = await spawn(env)
    first = (await call(raw, 1, arguments))["result"]
    assert first["resultType"] == "input_required", first
    [(key, asked)] = first["inputRequests"].items()
    assert asked["method"] == "sampling/createMessage"
    assert asked["params"]["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Mark 7."}]}]
    assert {t["name"] for t in asked["params"]["tools"]} == {"add", "mark"}
    await kill(raw)  # the run waits in the store, not in this process

    raw = await spawn(env)
    use = {"type": "tool_use", "id": "use-1", "name": "mark", "arguments": {}, "input": {"label": "seven"}}
    answer = {key: sampled([use], "toolUse")}
    second = (await call(raw, 2, arguments, inputResponses=answer, requestState=first["requestState"]))["result"]
    assert second["resultType"] == "input_required", second
    [(key2, asked2)] = second["inputRequests"].items()
    assert key2 != key and asked2["params"]["messages"][-1]["content"][0]["type"] == "tool_result"
    assert env.marks == ["seven"]

    replayed = (await call(raw, 3, arguments, inputResponses=answer, requestState=first["requestState"]))["result"]
    assert replayed["inputRequests"] == second["inputRequests"]  # an old answer is not used: the turn now is asked
    assert env.marks == ["seven"]
    forged = await call(raw, 4, arguments, inputResponses=answer, requestState=first["requestState"] + "x")
    assert forged["error"]["code"] == -32602

    done = {key2: sampled([{"type": "text", "text": "Marked 7."}], "endTurn")}
    third = (await call(raw, 5, arguments, inputResponses=done, requestState=second["requestState"]))["result"]
    assert third["structuredContent"]["status"] == "completed" and third["structuredContent"]["response"] == "Marked 7."
    assert env.marks == ["seven"]
    late = await call(raw, 6, arguments, inputResponses=done, requestState=second["requestState"])
    assert late["result"]["isError"] is True  # the run ended: its rounds resume nothing
    await kill(raw)


async def test_a_retry_without_the_answer_is_asked_again(tmp_path: Path) -> None:
    env = make_env(tmp_path, extra=HOST_AGENT)
    raw = await spawn(env)
    first = (await call(raw, 1, {"message": "Hi"}))["result"]
    again = (await call(raw, 2, {"message": "Hi"}, inputResponses={}, requestState=first["requestState"]))["result"]
    assert again["resultType"] == "input_required" and again["inputRequests"] == first["inputRequests"]
    await kill(raw)


async def test_the_clients_model_is_the_default_without_a_key_in_2026_too(tmp_path: Path) -> None:
    base = make_env(tmp_path)
    env = NoConfig(base.root, base.config, base.store, base.cwd)

    async def hello(ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        text = types.TextContent(type="text", text="Hello from the host.")
        return types.CreateMessageResult(role="assistant", content=text, model="host-1", stop_reason="endTurn")

    sampling = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with connect(env, "2026-07-28", sampling_callback=hello, sampling_capabilities=sampling) as client:
        assert "agent_default" in {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("agent_default", {"message": "Hi"})
    assert result.structured_content is not None and result.structured_content["response"] == "Hello from the host."
