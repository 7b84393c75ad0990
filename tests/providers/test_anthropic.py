"""The anthropic provider through the real SDK against a local server speaking the Messages streaming format."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from fake_servers import (
    FakeServer,
    Reply,
    anthropic_error,
    anthropic_text,
    assemble,
    block_delta,
    block_start,
    block_stop,
    message_delta,
    message_start,
    message_stop,
    sse,
)

from awaken_stdio.contract.agent import ModelSpec
from awaken_stdio.contract.errors import ProviderError
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ModelCapabilities,
    ReasoningChunk,
    StopChunk,
    StreamChunk,
    TextChunk,
    TokenUsage,
    ToolCall,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import ImageBlock, Message, TextBlock, ThinkingBlock
from awaken_stdio.providers import load_provider
from awaken_stdio.providers._common import RetryPolicy
from awaken_stdio.providers.anthropic import AnthropicModel, messages_params

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-0123456789abcdef"
FAST = RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=2.0)
TOOLS = [
    {"name": "read", "description": "Read a file.", "input_schema": {"type": "object"}},
    {"name": "get_weather", "description": "Weather.", "input_schema": {"type": "object"}},
]
CAPS = ModelCapabilities(context_window=200_000, max_output_tokens=64_000, image_input=True)


@pytest.fixture
async def model(server: FakeServer) -> AsyncIterator[AnthropicModel]:
    env = {"ANTHROPIC_API_KEY": KEY}
    async with AnthropicModel("claude-haiku-4-5", base_url=server.url, retry=FAST, env=env) as m:
        yield m


async def collect(model: AnthropicModel, request: InferenceRequest | None = None) -> list[StreamChunk]:
    return [c async for c in model.stream(request or InferenceRequest(model="m", messages=[Message.user("hi")]))]


async def test_text_with_cached_usage_and_cache_breakpoints(server: FakeServer, model: AnthropicModel) -> None:
    events = anthropic_text("Hel", "lo", usage=(5, 7))
    events[0] = message_start(5, cache_read=100, cache_write=20)
    server.push(Reply(events=events))
    chunks = await collect(
        model, InferenceRequest(model="m", messages=[Message.user("hi")], tools=TOOLS, system="Be brief.")
    )
    assert chunks == [
        TextChunk(text="Hel"),
        TextChunk(text="lo"),
        UsageChunk(usage=TokenUsage(input_tokens=125, output_tokens=7, cache_read_tokens=100, cache_write_tokens=20)),
        StopChunk(reason="end_turn"),
    ]
    seen = server.requests[0]
    assert (seen.method, seen.path) == ("POST", "/v1/messages")
    assert KEY in seen.headers.get("x-api-key", seen.headers.get("authorization", ""))
    assert "anthropic-version" in seen.headers
    body = seen.body
    assert body["model"] == "claude-haiku-4-5" and body["max_tokens"] == 64_000 and body["stream"] is True
    cache = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": cache}]
    assert "cache_control" not in body["tools"][0] and body["tools"][1]["cache_control"] == cache
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cache}]}]


async def test_turns_reuse_one_connection(server: FakeServer, model: AnthropicModel) -> None:
    server.push(Reply(events=anthropic_text("one")), Reply(events=anthropic_text("two")))
    assert [(await collect(model))[0] for _ in range(2)] == [TextChunk(text="one"), TextChunk(text="two")]
    assert server.connections == 1  # the first body was read to its end, so its connection went back to the pool


async def test_parallel_tool_uses_with_split_json(server: FakeServer, model: AnthropicModel) -> None:
    server.push(
        Reply(
            events=[
                message_start(),
                block_start(0, {"type": "text", "text": ""}),
                block_delta(0, {"type": "text_delta", "text": "Reading both."}),
                block_stop(0),
                block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}),
                block_delta(1, {"type": "input_json_delta", "partial_json": ""}),
                block_delta(1, {"type": "input_json_delta", "partial_json": '{"path": '}),
                block_delta(1, {"type": "input_json_delta", "partial_json": '"a.py"}'}),
                block_stop(1),
                block_start(2, {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {}}),
                block_delta(2, {"type": "input_json_delta", "partial_json": '{"path": "b.py"}'}),
                block_stop(2),
                message_delta("tool_use", 40),
                message_stop(),
            ]
        )
    )
    chunks = await collect(model)
    assert chunks[1] == ToolCallChunk(index=0, id="toolu_1", name="read")
    result = assemble(chunks)
    assert result.text == "Reading both."
    assert result.tool_calls == [
        ToolCall(id="toolu_1", name="read", arguments={"path": "a.py"}),
        ToolCall(id="toolu_2", name="read", arguments={"path": "b.py"}),
    ]
    assert result.stop_reason == "tool_use" and result.usage == TokenUsage(input_tokens=10, output_tokens=40)


async def test_thinking_keeps_its_signature_and_goes_back_first(server: FakeServer, model: AnthropicModel) -> None:
    server.push(
        Reply(
            events=[
                message_start(),
                block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
                block_delta(0, {"type": "thinking_delta", "thinking": "Let me "}),
                block_delta(0, {"type": "thinking_delta", "thinking": "see."}),
                block_delta(0, {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}),
                block_stop(0),
                block_start(1, {"type": "text", "text": ""}),
                block_delta(1, {"type": "text_delta", "text": "Done."}),
                block_stop(1),
                message_delta("end_turn", 9),
                message_stop(),
            ]
        )
    )
    request = InferenceRequest(
        model="m", messages=[Message.user("hi")], max_output_tokens=16_000, reasoning_effort="medium"
    )
    chunks = await collect(model, request)
    assert chunks[:3] == [
        ReasoningChunk(text="Let me "),
        ReasoningChunk(text="see."),
        ReasoningChunk(signature="EqQBCgIYAhIM"),
    ]
    result = assemble(chunks)
    assert result.thinking == [ThinkingBlock(text="Let me see.", signature="EqQBCgIYAhIM")]
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    adaptive = messages_params("claude-opus-4-6", request, CAPS)
    assert (adaptive["thinking"], adaptive["output_config"]) == ({"type": "adaptive"}, {"effort": "medium"})

    history = [
        Message.user("hi"),
        Message.assistant(
            "Done.",
            [ToolCall(id="toolu_1", name="read", arguments={"path": "a"})],
            [
                *result.thinking,
                ThinkingBlock(text="", signature="opaque==", redacted=True),
                ThinkingBlock(text="from gpt"),
            ],
        ),
        Message.tool("toolu_1", "contents"),
    ]
    body = messages_params("claude-x", InferenceRequest(model="m", messages=history, enable_prompt_cache=False), CAPS)
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me see.", "signature": "EqQBCgIYAhIM"},
            {"type": "redacted_thinking", "data": "opaque=="},
            {"type": "text", "text": "Done."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        ],
    }


async def test_redacted_thinking_streams_as_a_redacted_chunk(server: FakeServer, model: AnthropicModel) -> None:
    server.push(
        Reply(
            events=[
                message_start(),
                block_start(0, {"type": "redacted_thinking", "data": "opaque=="}),
                block_stop(0),
                block_start(1, {"type": "text", "text": "Hi"}),
                block_stop(1),
                message_delta("refusal", 3),
                message_stop(),
            ]
        )
    )
    chunks = await collect(model)
    assert chunks[:2] == [ReasoningChunk(signature="opaque==", redacted=True), TextChunk(text="Hi")]
    assert chunks[-1] == StopChunk(reason="refusal")


def test_tool_results_are_grouped_into_one_user_turn() -> None:
    history = [
        Message.system("earlier summary", internal=True),
        Message.user([TextBlock(text="look"), ImageBlock(data="aGk=", mime_type="image/png")]),
        Message.assistant(
            "", [ToolCall(id="t1", name="read", arguments={}), ToolCall(id="t2", name="read", arguments={})]
        ),
        Message.tool("t1", "one"),
        Message.tool("t2", "two"),
        Message.user("and now?"),
    ]
    body = messages_params("claude-x", InferenceRequest(model="m", messages=history, system="sys"), CAPS)
    cache = {"type": "ephemeral"}
    assert body["system"] == [
        {"type": "text", "text": "sys"},
        {"type": "text", "text": "earlier summary", "cache_control": cache},
    ]
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
    }
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "one"}]},
            {"type": "tool_result", "tool_use_id": "t2", "content": [{"type": "text", "text": "two"}]},
            {"type": "text", "text": "and now?", "cache_control": cache},
        ],
    }
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]


async def test_rate_limit_with_retry_after_ms_then_overload_then_success(
    server: FakeServer, model: AnthropicModel
) -> None:
    server.push(
        Reply(429, body=anthropic_error("rate_limit_error", "slow down"), headers={"retry-after-ms": "300"}),
        Reply(529, body=anthropic_error("overloaded_error", "Overloaded")),
        Reply(events=anthropic_text("ok")),
    )
    started = time.monotonic()
    assert (await collect(model))[0] == TextChunk(text="ok")
    assert time.monotonic() - started >= 0.3 and len(server.requests) == 3


async def test_a_server_error_then_success(server: FakeServer, model: AnthropicModel) -> None:
    server.push(Reply(500, body=anthropic_error("api_error", "Internal")), Reply(events=anthropic_text("fine")))
    assert (await collect(model))[0] == TextChunk(text="fine")


async def test_a_rejected_key_names_the_variable(server: FakeServer, model: AnthropicModel) -> None:
    server.push(Reply(401, body=anthropic_error("authentication_error", "invalid x-api-key")))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "unauthorized" and "ANTHROPIC_API_KEY" in caught.value.message
    assert KEY not in caught.value.message and len(server.requests) == 1


async def test_a_too_long_prompt_is_a_context_overflow(server: FakeServer, model: AnthropicModel) -> None:
    body = anthropic_error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
    server.push(Reply(400, body=body))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "context_overflow"


async def test_an_error_event_inside_the_stream_keeps_its_kind(server: FakeServer, model: AnthropicModel) -> None:
    error = sse(anthropic_error("overloaded_error", "Overloaded"), event="error")
    started = [message_start(), block_start(0, {"type": "text", "text": ""})]
    text = block_delta(0, {"type": "text_delta", "text": "Hi"})
    server.push(Reply(events=[*started, error]), Reply(events=[*started, text, error]))
    with pytest.raises(ProviderError) as caught:
        await collect(model)
    assert caught.value.kind == "overloaded" and "Overloaded" in caught.value.message
    assert len(server.requests) == 2  # retried while nothing had been streamed, not after "Hi"


async def test_a_stream_cut_off_midway_is_interrupted(server: FakeServer, model: AnthropicModel) -> None:
    server.push(Reply(events=anthropic_text("one ", "two ", "three"), cut_after=5))
    stream = model.stream(InferenceRequest(model="m", messages=[Message.user("hi")]))
    assert [await anext(stream), await anext(stream)] == [TextChunk(text="one "), TextChunk(text="two ")]
    with pytest.raises(ProviderError) as caught:
        await anext(stream)
    assert caught.value.kind == "stream_interrupted" and len(server.requests) == 1


@pytest.mark.parametrize("delay", [{"headers_delay_s": 10}, {"events_delay_s": 10}])
async def test_cancelling_a_slow_first_byte_closes_the_connection(
    server: FakeServer, model: AnthropicModel, delay: dict[str, float]
) -> None:
    server.push(Reply(events=anthropic_text("late"), **delay))
    started = time.monotonic()
    with anyio.move_on_after(0.2):
        await collect(model)
    assert time.monotonic() - started < 1
    assert await anyio.to_thread.run_sync(server.dropped.wait, 1)


async def test_a_missing_key_is_reported_before_any_request() -> None:
    async with AnthropicModel("claude-haiku-4-5", env={}) as model:
        with pytest.raises(ProviderError) as caught:
            await collect(model)
    assert (caught.value.kind, caught.value.message) == ("unauthorized", "ANTHROPIC_API_KEY is not set")


async def test_the_factory_and_capabilities(tmp_path: Path) -> None:
    spec = ModelSpec(
        id="main", provider="anthropic", model="claude-opus-4-1", options={"provider": "anthropic", "timeout_s": 30}
    )
    executor = load_provider(spec, tmp_path)
    assert isinstance(executor, AnthropicModel) and executor.timeout_s == 30
    caps = executor.capabilities("claude-opus-4-1")
    assert (caps.context_window, caps.max_output_tokens, caps.image_input) == (200_000, 32_000, True)
