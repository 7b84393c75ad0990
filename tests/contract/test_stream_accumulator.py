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
        TextChunk("Hi"),
        ToolCallChunk(1, "b", "second", '{"x":'),
        ToolCallChunk(0, "a", "first", "{}"),
        ToolCallChunk(1, None, None, " 2}"),
        UsageChunk(TokenUsage(3, 4)),
        UsageChunk(TokenUsage(1, 1)),
        StopChunk("tool_use"),
    )
    assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [("a", "first", {}), ("b", "second", {"x": 2})]  # type: ignore[attr-defined]
    assert r.text == "Hi" and r.usage == TokenUsage(4, 5) and r.stop_reason == "tool_use"  # type: ignore[attr-defined]


def test_unparseable_arguments_mark_the_result_incomplete() -> None:
    r = _result(ToolCallChunk(0, "a", "t", '{"x": '))
    assert r.has_incomplete_tool_calls and r.tool_calls[0].arguments == {"__raw_arguments": '{"x":'}  # type: ignore[attr-defined]


def test_each_signed_thinking_block_stays_its_own_block() -> None:
    r = _result(
        ReasoningChunk("first "),
        ReasoningChunk("thought"),
        ReasoningChunk("", "sig-1"),
        ReasoningChunk("opaque", None, True),
        ReasoningChunk("second thought", "sig-2"),
        ReasoningChunk("unsigned tail"),
    )
    assert r.thinking == [  # type: ignore[attr-defined]
        ThinkingBlock("first thought", "sig-1"),
        ThinkingBlock("opaque", None, True),
        ThinkingBlock("second thought", "sig-2"),
        ThinkingBlock("unsigned tail", None),
    ]
