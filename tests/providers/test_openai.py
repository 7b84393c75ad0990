"""The openai provider through the real SDK against a local server speaking Chat Completions and Responses."""

from __future__ import annotations

import importlib
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_servers import (
    DONE,
    FakeServer,
    Reply,
    assemble,
    chat_chunk,
    chat_text,
    chat_usage,
    openai_error,
    response_event,
    responses_completed,
)

from awaken_stdio.contract.agent import AgentSpec, ModelSpec
from awaken_stdio.contract.errors import ConfigError, ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ReasoningChunk,
    StopChunk,
    StreamChunk,
    TextChunk,
    TokenUsage,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import (
    ImageBlock,
    Message,
    ResourceBlock,
    TextBlock,
    ThinkingBlock,
    ToolCall,
)
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor
from awaken_stdio.providers import load_provider
from awaken_stdio.providers._common import RetryPolicy, parse_retry_after
from awaken_stdio.providers.openai import OpenAIModel, chat_messages
from awaken_stdio.runtime.agent_runtime import AgentRuntime

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdef"
FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=2.0)
TOOLS = [{"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object", "properties": {}}}]


@pytest.fixture
async def model(server: FakeServer) -> AsyncIterator[OpenAIModel]:
    async with OpenAIModel("gpt-4.1", base_url=f"{server.url}/v1", retry=FAST, env={"OPENAI_API_KEY": KEY}) as m:
        yield m


async def collect(model: OpenAIModel, request: InferenceRequest | None = None) -> list[StreamChunk]:
    return [c async for c in model.stream(request or InferenceRequest(model="gpt-4.1", messages=[Message.user("hi")]))]


def tool_delta(index: int, arguments: str, id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if id:
        call |= {"id": id, "type": "function"}
        call["function"]["name"] = name
    return call


async def test_text_streams_with_usage_and_the_request_is_well_formed(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(events=chat_text("Hel", "lo", usage=(12, 3))))
    request = InferenceRequest(
        model="ignored",
        messages=[Message.user("hi")],
        tools=TOOLS,
        system="Be brief.",
        max_output_tokens=100,
        temperature=0.2,
    )
    chunks = await collect(model, request)
    assert chunks == [
        TextChunk(text="Hel"),
        TextChunk(text="lo"),
        UsageChunk(usage=TokenUsage(input_tokens=12, output_tokens=3)),
        StopChunk(reason="end_turn"),
    ]
    seen = server.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/chat/completions")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.body["model"] == "gpt-4.1"  # the configured model, not the runtime's id
    assert seen.body["stream"] is True and seen.body["stream_options"] == {"include_usage": True}
    assert seen.body["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert seen.body["tools"][0] == {
        "type": "function",
        "function": {"name": "get_weather", "description": "Weather.", "parameters": TOOLS[0]["input_schema"]},
    }
    assert seen.body["max_tokens"] == 100 and seen.body["temperature"] == 0.2


async def test_parallel_tool_calls_split_across_chunks(server: FakeServer, model: OpenAIModel) -> None:
    server.push(
        Reply(
            events=[
                chat_chunk(role="assistant", content=None),
                chat_chunk(tool_calls=[tool_delta(0, "", "call_a", "get_weather")]),
                chat_chunk(tool_calls=[tool_delta(0, '{"ci')]),
                chat_chunk(tool_calls=[tool_delta(1, '{"city"', "call_b", "get_weather")]),
                chat_chunk(tool_calls=[tool_delta(0, 'ty": "Oslo"}')]),
                chat_chunk(tool_calls=[tool_delta(1, ': "Rome"}')]),
                chat_chunk("tool_calls"),
                chat_usage(20, 9),
                DONE,
            ]
        )
    )
    chunks = await collect(model)
    assert chunks[:2] == [
        ToolCallChunk(index=0, id="call_a", name="get_weather", args_delta=""),
        ToolCallChunk(index=0, id=None, name=None, args_delta='{"ci'),
    ]
    result = assemble(chunks)
    assert result.tool_calls == [
        ToolCall(id="call_a", name="get_weather", arguments={"city": "Oslo"}),
        ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
    ]
    assert result.stop_reason == "tool_use" and not result.has_incomplete_tool_calls


async def test_servers_that_reuse_index_zero_for_parallel_calls_still_get_two_calls(
    server: FakeServer, model: OpenAIModel
) -> None:
    server.push(
        Reply(
            events=[
                chat_chunk(tool_calls=[tool_delta(0, '{"city": "Oslo"}', "call_a", "get_weather")]),
                chat_chunk(tool_calls=[tool_delta(0, '{"city": "Rome"}', "call_b", "get_weather")]),
                chat_chunk("stop"),  # some servers say "stop" even when they called tools
                DONE,
            ]
        )
    )
    result = assemble(await collect(model))
    assert [c.arguments["city"] for c in result.tool_calls] == ["Oslo", "Rome"]
    assert result.stop_reason == "tool_use"


async def test_reasoning_content_streams_as_thinking(server: FakeServer, model: OpenAIModel) -> None:
    server.push(
        Reply(
            events=[
                chat_chunk(role="assistant", reasoning_content="Let me "),
                chat_chunk(reasoning_content="think."),
                chat_chunk(reasoning="Ollama style."),
                chat_chunk(content="42"),
                chat_chunk("length"),
                chat_usage(30, 12, cached=16, reasoning=8),
                DONE,
            ]
        )
    )
    chunks = await collect(model)
    assert chunks == [
        ReasoningChunk(text="Let me "),
        ReasoningChunk(text="think."),
        ReasoningChunk(text="Ollama style."),
        TextChunk(text="42"),
        UsageChunk(usage=TokenUsage(input_tokens=30, output_tokens=12, cache_read_tokens=16, thinking_tokens=8)),
        StopChunk(reason="max_tokens"),
    ]
    assert assemble(chunks).thinking == [ThinkingBlock(text="Let me think.Ollama style.")]


async def test_a_rate_limit_waits_for_retry_after_then_succeeds(
    server: FakeServer, model: OpenAIModel, caplog: pytest.LogCaptureFixture
) -> None:
    limited = openai_error("Rate limit reached", "requests", "rate_limit_exceeded")
    server.push(Reply(429, body=limited, headers={"retry-after": "1"}), Reply(events=chat_text("ok")))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "awaken_stdio.providers"):
        chunks = await collect(model)
    assert time.monotonic() - started >= 0.95
    assert chunks[0] == TextChunk(text="ok") and len(server.requests) == 2
    assert "retry 1 of 3 in 1.00 s" in caplog.text and KEY not in caplog.text


async def test_a_server_error_is_retried(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(500, body=openai_error("boom", "server_error")), Reply(events=chat_text("fine")))
    assert (await collect(model))[0] == TextChunk(text="fine")
    assert len(server.requests) == 2


async def test_retries_stop_at_the_bound(server: FakeServer) -> None:
    server.push(*[Reply(503, body=openai_error("busy", "server_error"))] * 4)
    retry = RetryPolicy(max_retries=2, base_delay_s=0.01)
    async with OpenAIModel("m", base_url=server.url, retry=retry, env={"OPENAI_API_KEY": KEY}) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model)
    assert caught.value.kind == "overloaded" and len(server.requests) == 3


async def test_a_retry_after_beyond_the_bound_is_not_waited_for(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(429, body=openai_error("slow down", "requests"), headers={"retry-after": "3600"}))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "rate_limited" and caught.value.retry_after_s == 3600
    assert len(server.requests) == 1


async def test_a_rejected_key_names_the_variable_and_never_shows_the_key(
    server: FakeServer, model: OpenAIModel
) -> None:
    body = openai_error(f"Incorrect API key provided: {KEY}.", "invalid_request_error", "invalid_api_key")
    server.push(Reply(401, body=body))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "unauthorized" and len(server.requests) == 1
    assert "OPENAI_API_KEY" in caught.value.message and KEY not in caught.value.message


async def test_an_unknown_model_says_where_it_was_looked_for(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(404, body=openai_error("The model `gpt-4.1` does not exist", "invalid_request_error")))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "model_not_found"
    assert caught.value.message.startswith(f"model gpt-4.1 not found at {server.url}/v1 (HTTP 404")


async def test_a_too_long_conversation_is_a_context_overflow(server: FakeServer, model: OpenAIModel) -> None:
    message = "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."
    server.push(Reply(400, body=openai_error(message, "invalid_request_error", "context_length_exceeded")))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "context_overflow" and len(server.requests) == 1


async def test_a_stream_cut_off_midway_is_interrupted_and_not_retried(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(events=chat_text("one ", "two ", "three"), cut_after=3))
    stream = model.stream(InferenceRequest(model="m", messages=[Message.user("hi")]))
    assert [await anext(stream), await anext(stream)] == [TextChunk(text="one "), TextChunk(text="two ")]
    with pytest.raises(ProviderError) as caught:
        await anext(stream)
    assert caught.value.kind == "stream_interrupted" and len(server.requests) == 1


async def test_a_stream_that_ends_without_finishing_is_interrupted(server: FakeServer, model: OpenAIModel) -> None:
    server.push(Reply(events=[chat_chunk(content="half")]))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "stream_interrupted"


@pytest.mark.parametrize("where", ["before headers", "after headers"])
async def test_cancelling_a_slow_stream_closes_the_connection_at_once(
    server: FakeServer, model: OpenAIModel, where: str
) -> None:
    delay = {"headers_delay_s": 10} if where == "before headers" else {"events_delay_s": 10}
    server.push(Reply(events=chat_text("late"), **delay))
    started = time.monotonic()
    with anyio.move_on_after(0.2):
        await collect(model)
    assert time.monotonic() - started < 1
    assert await anyio.to_thread.run_sync(server.dropped.wait, 1)


async def test_a_missing_key_is_reported_before_any_request(server: FakeServer) -> None:
    async with OpenAIModel("gpt-4.1", env={}) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model)
    assert (caught.value.kind, caught.value.message) == ("unauthorized", "OPENAI_API_KEY is not set")
    async with OpenAIModel("m", base_url=server.url, api_key_env="MY_KEY", env={}) as model:
        with pytest.raises(ProviderError, match=r"^MY_KEY is not set$"):
            await collect(model)
    assert server.requests == []


async def test_a_local_server_needs_no_key(server: FakeServer) -> None:
    server.push(Reply(events=chat_text("local")))
    async with OpenAIModel("qwen2.5-coder:7b", base_url=f"{server.url}/v1", env={}) as model:
        assert (await collect(model))[0] == TextChunk(text="local")
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"


async def test_an_unreachable_server_is_named() -> None:
    with FakeServer() as gone:
        url = f"{gone.url}/v1"
    async with OpenAIModel("m", base_url=url, retry=RetryPolicy(max_retries=0), env={}) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model)
    assert caught.value.kind == "provider" and caught.value.message.startswith(f"cannot reach openai at {url}")


# -- Responses API ---------------------------------------------------------------------------------------------


async def test_responses_api_text_and_tool_call(server: FakeServer) -> None:
    call = {"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "call_1", "name": "get_weather"}
    message = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    server.push(
        Reply(
            events=[
                response_event("response.created", 0, response={"id": "resp_1", "status": "in_progress"}),
                response_event(
                    "response.output_item.added",
                    1,
                    output_index=0,
                    item={"id": "rs_1", "type": "reasoning", "summary": []},
                ),
                response_event(
                    "response.reasoning_summary_text.delta",
                    2,
                    item_id="rs_1",
                    output_index=0,
                    summary_index=0,
                    delta="Checking.",
                ),
                response_event("response.output_item.added", 3, output_index=1, item=message),
                response_event(
                    "response.output_text.delta",
                    4,
                    item_id="msg_1",
                    output_index=1,
                    content_index=0,
                    delta="Let me look.",
                    logprobs=[],
                ),
                response_event("response.output_item.added", 5, output_index=2, item={**call, "arguments": ""}),
                response_event(
                    "response.function_call_arguments.delta", 6, item_id="fc_1", output_index=2, delta='{"city":'
                ),
                response_event(
                    "response.function_call_arguments.delta", 7, item_id="fc_1", output_index=2, delta=' "Oslo"}'
                ),
                responses_completed(8, [message, {**call, "arguments": '{"city": "Oslo"}'}], usage=(40, 11)),
            ]
        )
    )
    history = [
        Message.user("weather?"),
        Message.assistant("", [ToolCall(id="call_0", name="get_weather", arguments={"city": "Rome"})]),
        Message.tool("call_0", "sunny"),
    ]
    env = {"OPENAI_API_KEY": KEY}
    async with OpenAIModel("gpt-5", api="responses", base_url=server.url, env=env) as model:
        chunks = await collect(model, InferenceRequest(model="gpt-5", messages=history, tools=TOOLS, system="sys"))
    result = assemble(chunks)
    assert result.text == "Let me look." and result.thinking == [ThinkingBlock(text="Checking.")]
    assert result.tool_calls == [ToolCall(id="call_1", name="get_weather", arguments={"city": "Oslo"})]
    assert result.usage == TokenUsage(input_tokens=40, output_tokens=11) and result.stop_reason == "tool_use"
    body = server.requests[0].body
    assert server.requests[0].path == "/responses" and body["instructions"] == "sys"
    assert body["input"] == [
        {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "function_call", "call_id": "call_0", "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": "call_0", "output": "sunny"},
    ]
    assert body["tools"][0]["type"] == "function" and body["tools"][0]["name"] == "get_weather"


async def test_responses_api_failure_event_is_mapped(server: FakeServer) -> None:
    server.push(Reply(events=[response_event("error", 0, code="rate_limit_exceeded", message="slow down", param=None)]))
    retry = RetryPolicy(max_retries=0)
    async with OpenAIModel("gpt-5", api="responses", base_url=server.url, retry=retry, env={}) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model)
    assert caught.value.kind == "rate_limited" and "slow down" in caught.value.message


# -- conversion, capabilities, construction --------------------------------------------------------------------


def test_history_conversion() -> None:
    image = ImageBlock(data="aGk=", mime_type="image/png")
    resource = ResourceBlock(uri="file:///a.py", text="print(1)")
    messages = [
        Message.system("summary so far", internal=True),
        Message.user([TextBlock(text="look"), image, resource]),
        Message.assistant(
            "calling",
            [ToolCall(id="c1", name="read", arguments={"path": "a"})],
            [ThinkingBlock(text="hmm", signature="sig")],
        ),
        Message.tool("c1", "contents"),
        Message(role="assistant", interrupted=True),  # cut short before any text: nothing to send
    ]
    out = chat_messages(InferenceRequest(model="m", messages=messages), images=True)
    assert out == [
        {"role": "system", "content": "summary so far"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
                {"type": "text", "text": '<resource uri="file:///a.py">\nprint(1)\n</resource>'},
            ],
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "contents"},
    ]
    text_only = chat_messages(
        InferenceRequest(model="m", messages=[Message.user([TextBlock(text="look"), image])]), images=False
    )
    assert text_only[0]["content"] == "look[image image/png omitted: this model takes no images]"


def test_a_missing_sdk_says_how_to_repair_the_installation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # what `import openai` sees when the SDK is not installed
    monkeypatch.delitem(sys.modules, "awaken_stdio.providers.openai")
    with pytest.raises(ConfigError, match=re.escape("pipx reinstall awaken-stdio, uv tool install --reinstall")):
        importlib.import_module("awaken_stdio.providers.openai")


def test_capabilities_come_from_the_family_and_config() -> None:
    assert OpenAIModel("gpt-4o").capabilities("x").image_input
    assert OpenAIModel("gpt-4.1").capabilities("x").context_window == 1_047_576
    local = OpenAIModel("library/qwen2.5-coder:7b").capabilities("x")
    assert (local.context_window, local.image_input) == (32_768, False)
    options = {"context_window": 8192, "max_output_tokens": 1024, "image_input": True}
    configured = OpenAIModel("mystery", options=options).capabilities("x")
    assert (configured.context_window, configured.max_output_tokens, configured.image_input) == (8192, 1024, True)


async def test_the_factory_builds_from_config_options(tmp_path: Path) -> None:
    options = {"provider": "openai", "model": "gpt-5", "api": "responses", "base_url": "http://x/v1", "max_retries": 1}
    executor = load_provider(ModelSpec(id="main", provider="openai", model="gpt-5", options=options), tmp_path)
    assert isinstance(executor, OpenAIModel)
    assert (executor.api, executor.base_url, executor.retry.max_retries) == ("responses", "http://x/v1", 1)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2.0),
        ({"retry-after-ms": "150", "retry-after": "9"}, 0.15),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past: no wait
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers) == expected


# -- end to end ------------------------------------------------------------------------------------------------


class Weather(Tool):
    descriptor = ToolDescriptor(name="get_weather", description="The weather in a city.", read_only=True)

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> str:
        return f"sunny in {args['city']}"


async def test_agent_runtime_runs_a_tool_call_then_answers(server: FakeServer, model: OpenAIModel) -> None:
    server.push(
        Reply(
            events=[
                chat_chunk(tool_calls=[tool_delta(0, '{"city": ', "call_1", "get_weather")]),
                chat_chunk(tool_calls=[tool_delta(0, '"Oslo"}')]),
                chat_chunk("tool_calls"),
                chat_usage(50, 10),
                DONE,
            ]
        ),
        Reply(events=chat_text("It is ", "sunny.", usage=(70, 4))),
    )
    runtime = AgentRuntime(agents=[AgentSpec(id="a", model="m")], models={"m": model}, tools=[Weather()])
    result = await runtime.run_to_completion("weather in Oslo?")
    assert result.response == "It is sunny."
    assert result.usage.input_tokens == 120
    second = server.requests[1].body["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "call_1"
    assert json.dumps(second[-1]["content"]).find("sunny in Oslo") >= 0
