"""The model seam: one streaming call per inference.

A provider implements :class:`LlmExecutor`. ``stream`` yields chunks as they arrive (text, reasoning, tool-call
fragments keyed by index, usage, the stop reason); the runtime assembles them into a :class:`StreamResult`. A
provider raises :class:`~awaken_stdio.contract.errors.ProviderError` with a kind that says whether retrying helps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from awaken_stdio.contract.messages import Message, ThinkingBlock, ToolCall

if TYPE_CHECKING:
    from awaken_stdio.contract.channel import SamplingHost

__all__ = [
    "InferenceRequest",
    "LlmExecutor",
    "ModelCapabilities",
    "ModelPricing",
    "ReasoningChunk",
    "StopChunk",
    "StopReason",
    "StreamAccumulator",
    "StreamChunk",
    "StreamResult",
    "TextChunk",
    "TokenUsage",
    "ToolCallChunk",
    "UsageChunk",
]

StopReason = Literal["end_turn", "max_tokens", "tool_use", "stop_sequence", "refusal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    thinking_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            thinking_tokens=self.thinking_tokens + other.thinking_tokens,
        )

    def to_json(self) -> dict[str, int]:
        out = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}
        for name in ("cache_read_tokens", "cache_write_tokens", "thinking_tokens"):
            if value := getattr(self, name):
                out[name] = value
        return out

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> TokenUsage:
        if not d:
            return TokenUsage()
        return TokenUsage(**{k: int(v) for k, v in d.items() if k in TokenUsage.__dataclass_fields__})


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPricing:
    """What a model costs, in US dollars per million tokens; cache prices default to the input price."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, usage: TokenUsage) -> float:
        """The cost of ``usage`` in US dollars. Input tokens include the cached parts (as every provider here
        reports them), so those are priced at their own rates and the rest at the input price."""
        read, write = usage.cache_read_tokens, usage.cache_write_tokens
        fresh = max(usage.input_tokens - read - write, 0)
        total = (
            fresh * self.input
            + read * (self.input if self.cache_read is None else self.cache_read)
            + write * (self.input if self.cache_write is None else self.cache_write)
            + usage.output_tokens * self.output
        )
        return total / 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCapabilities:
    context_window: int = 200_000
    max_output_tokens: int = 16_384
    image_input: bool = False
    audio_input: bool = False


@dataclass(slots=True, kw_only=True)
class InferenceRequest:
    model: str
    messages: list[Message]
    tools: list[dict[str, Any]] = field(default_factory=list)  # descriptors' JSON: name, description, input_schema
    system: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: str | None = None
    enable_prompt_cache: bool = True
    overrides: dict[str, Any] = field(default_factory=dict)
    # the client's model of the run's environment (``RunEnvironment.sampling``): the ``mcp_sampling`` provider asks it
    sampling: SamplingHost | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextChunk:
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningChunk:
    text: str = ""
    signature: str | None = None
    redacted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallChunk:
    """A fragment of a tool call: the first fragment of an ``index`` carries ``id`` and ``name``."""

    index: int
    id: str | None = None
    name: str | None = None
    args_delta: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageChunk:
    usage: TokenUsage


@dataclass(frozen=True, slots=True, kw_only=True)
class StopChunk:
    reason: StopReason


StreamChunk = TextChunk | ReasoningChunk | ToolCallChunk | UsageChunk | StopChunk


@dataclass(slots=True, kw_only=True)
class StreamResult:
    text: str = ""
    thinking: list[ThinkingBlock] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: TokenUsage | None = None
    stop_reason: StopReason | None = None
    has_incomplete_tool_calls: bool = False

    def needs_tools(self) -> bool:
        return bool(self.tool_calls)


class StreamAccumulator:
    """Assembles chunks into a :class:`StreamResult` (tool-call arguments are concatenated then parsed once)."""

    __slots__ = ("_blocks", "_calls", "_reasoning", "_text", "stop_reason", "usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._blocks: list[ThinkingBlock] = []
        self._calls: dict[int, list[Any]] = {}
        self.usage: TokenUsage | None = None
        self.stop_reason: StopReason | None = None

    def add(self, chunk: StreamChunk) -> None:
        match chunk:
            case TextChunk(text=text):
                self._text.append(text)
            case ReasoningChunk(text=text, signature=signature, redacted=redacted):
                # A signature closes a thinking block and a redacted chunk is a block of its own: several signed
                # blocks in one turn must go back to the provider as they came.
                if redacted:
                    self._close_thinking(None)
                    self._blocks.append(ThinkingBlock(text=text, signature=signature, redacted=True))
                else:
                    self._reasoning.append(text)
                    if signature:
                        self._close_thinking(signature)
            case ToolCallChunk(index=index, id=call_id, name=name, args_delta=delta):
                slot = self._calls.get(index)
                if slot is None:
                    slot = self._calls[index] = [call_id, name, []]
                else:
                    slot[0] = slot[0] or call_id
                    slot[1] = slot[1] or name
                if delta:
                    slot[2].append(delta)
            case UsageChunk(usage=usage):
                self.usage = usage if self.usage is None else self.usage + usage
            case StopChunk(reason=reason):
                self.stop_reason = reason

    def _close_thinking(self, signature: str | None) -> None:
        if self._reasoning or signature:
            self._blocks.append(ThinkingBlock(text="".join(self._reasoning), signature=signature))
            self._reasoning = []

    @property
    def text(self) -> str:
        return "".join(self._text)

    def result(self) -> StreamResult:
        calls: list[ToolCall] = []
        incomplete = False
        for index in sorted(self._calls):
            call_id, name, parts = self._calls[index]
            raw = "".join(parts).strip()
            try:
                args = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                incomplete = True
                args = {"__raw_arguments": raw}
            if not isinstance(args, dict):
                args = {"value": args}
            if not name:
                incomplete = True
                continue
            calls.append(ToolCall(id=call_id or f"call_{index}", name=name, arguments=args))
        self._close_thinking(None)
        return StreamResult(
            text=self.text,
            thinking=list(self._blocks),
            tool_calls=calls,
            usage=self.usage,
            stop_reason=self.stop_reason,
            has_incomplete_tool_calls=incomplete,
        )


@runtime_checkable
class LlmExecutor(Protocol):
    """A model provider. ``stream`` must stop promptly when its task is cancelled."""

    def stream(self, request: InferenceRequest) -> AsyncIterator[StreamChunk]: ...

    def capabilities(self, model: str) -> ModelCapabilities: ...
