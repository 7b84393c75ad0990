"""Assembling a streamed model turn: text, tool-call fragments, thinking blocks and their signatures."""

from __future__ import annotations

from awaken_stdio.contract.inference import (
    ReasoningChunk,
    StopChunk,
    StreamAccumulator,
    TextChunk,
    TokenUsage,
    ToolCallChunk,
    UsageChunk,
)
from awaken_stdio.contract.messages import ThinkingBlock


def _result(*chunks: object) -> object:
    acc = StreamAccumulator()
    for chunk in chunks:
        acc.add(chunk)  # type: ignore[arg-type]
    return acc.result()


def test_tool_call_fragments_are_joined_by_index() -> None:
    r = _result(
        TextChunk(text="Hi"),
        ToolCallChunk(index=1, id="b", name="second", args_delta='{"x":'),
        ToolCallChunk(index=0, id="a", name="first", args_delta="{}"),
        ToolCallChunk(index=1, id=None, name=None, args_delta=" 2}"),
        UsageChunk(usage=TokenUsage(input_tokens=3, output_tokens=4)),
        UsageChunk(usage=TokenUsage(input_tokens=1, output_tokens=1)),
        StopChunk(reason="tool_use"),
    )
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [("a", "first", {}), ("b", "second", {"x": 2})]  # type: ignore[attr-defined]
    assert r.text == "Hi" and r.usage == TokenUsage(input_tokens=4, output_tokens=5) and r.stop_reason == "tool_use"  # type: ignore[attr-defined]


def test_unparseable_arguments_mark_the_result_incomplete() -> None:
    r = _result(ToolCallChunk(index=0, id="a", name="t", args_delta='{"x": '))
    assert r.has_incomplete_tool_calls and r.tool_calls[0].arguments == {"__raw_arguments": '{"x":'}  # type: ignore[attr-defined]


def test_each_signed_thinking_block_stays_its_own_block() -> None:
    r = _result(
        ReasoningChunk(text="first "),
        ReasoningChunk(text="thought"),
        ReasoningChunk(text="", signature="sig-1"),
        ReasoningChunk(text="opaque", signature=None, redacted=True),
        ReasoningChunk(text="second thought", signature="sig-2"),
        ReasoningChunk(text="unsigned tail"),
    )
    assert r.thinking == [  # type: ignore[attr-defined]
        ThinkingBlock(text="first thought", signature="sig-1"),
        ThinkingBlock(text="opaque", signature=None, redacted=True),
        ThinkingBlock(text="second thought", signature="sig-2"),
        ThinkingBlock(text="unsigned tail", signature=None),
    ]
