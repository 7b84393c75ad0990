"""Conversation messages and their content blocks.

Content blocks mirror the ACP/MCP content union (text, image, audio, embedded resource, resource link) so a prompt
crosses the protocol boundary without loss. Messages are frozen: the runtime shares them between snapshots, run
records and the event stream without copying.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from awaken_stdio.contract.ids import new_id, now_ms

__all__ = [
    "COMPACTION_ACTIVITY",
    "COMPACTION_KEY",
    "AudioBlock",
    "ContentBlock",
    "ImageBlock",
    "Message",
    "ResourceBlock",
    "ResourceLinkBlock",
    "Role",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "content_from_json",
    "content_to_json",
    "is_summary",
    "message_from_json",
    "message_to_json",
    "model_turns",
    "text_of",
    "valid_text",
    "valid_value",
]

Role = Literal["system", "user", "assistant", "tool"]
Visibility = Literal["all", "internal"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageBlock:
    data: str  # base64
    mime_type: str
    uri: str | None = None
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True, kw_only=True)
class AudioBlock:
    data: str  # base64
    mime_type: str
    type: Literal["audio"] = "audio"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceBlock:
    """An embedded resource: the client sent the contents (ACP ``embeddedContext``)."""

    uri: str
    text: str | None = None
    blob: str | None = None  # base64
    mime_type: str | None = None
    type: Literal["resource"] = "resource"


@dataclass(frozen=True, slots=True, kw_only=True)
class ResourceLinkBlock:
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None
    type: Literal["resource_link"] = "resource_link"


ContentBlock = TextBlock | ImageBlock | AudioBlock | ResourceBlock | ResourceLinkBlock


@dataclass(frozen=True, slots=True, kw_only=True)
class ThinkingBlock:
    """Model reasoning. ``signature`` (Anthropic) must travel back unchanged on the next turn."""

    text: str
    signature: str | None = None
    redacted: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One conversation entry.

    ``internal`` messages (compaction summaries, superseded-call markers) are kept in the durable log and sent to
    the model but never shown to a person as chat. ``interrupted`` marks assistant text cut short by a cancel.
    """

    role: Role
    content: tuple[ContentBlock, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    thinking: tuple[ThinkingBlock, ...] = ()
    id: str = field(default_factory=new_id)
    run_id: str | None = None
    internal: bool = False
    interrupted: bool = False
    created_at: int = field(default_factory=now_ms)
    metadata: dict[str, Any] | None = None

    @staticmethod
    def user(text: str | ContentBlock | list[ContentBlock] | tuple[ContentBlock, ...]) -> Message:
        return Message(role="user", content=_blocks(text))

    @staticmethod
    def system(text: str, *, internal: bool = False) -> Message:
        return Message(role="system", content=(TextBlock(text=text),), internal=internal)

    @staticmethod
    def assistant(
        text: str = "",
        tool_calls: tuple[ToolCall, ...] | list[ToolCall] = (),
        thinking: tuple[ThinkingBlock, ...] | list[ThinkingBlock] = (),
    ) -> Message:
        return Message(
            role="assistant",
            content=(TextBlock(text=text),) if text else (),
            tool_calls=tuple(tool_calls),
            thinking=tuple(thinking),
        )

    @staticmethod
    def tool(call_id: str, text: str, *, internal: bool = False) -> Message:
        return Message(role="tool", content=(TextBlock(text=text),), tool_call_id=call_id, internal=internal)

    @property
    def text(self) -> str:
        return text_of(self.content)


def _blocks(value: str | ContentBlock | list[ContentBlock] | tuple[ContentBlock, ...]) -> tuple[ContentBlock, ...]:
    if isinstance(value, str):
        return (TextBlock(text=value),)
    if isinstance(value, list | tuple):
        return tuple(value)
    return (value,)


COMPACTION_KEY = "compaction"  # metadata of a compaction summary: {"boundary": ..., "assistant_turns": ...}
COMPACTION_ACTIVITY = "compaction"  # the ``activity_type`` of the events a compaction emits as it goes


def is_summary(m: Message) -> bool:
    """A compaction summary: an internal system message standing for the turns it replaced."""
    return m.role == "system" and m.internal and m.metadata is not None and COMPACTION_KEY in m.metadata


def model_turns(messages: list[Message] | tuple[Message, ...]) -> int:
    """How many model turns a history stands for: its assistant messages plus the turns each summary replaced.

    The scripted model picks its turn by this count, so a compacted conversation keeps its place in the script.
    """
    turns = 0
    for m in messages:
        if m.role == "assistant" and not m.internal:
            turns += 1
        elif m.metadata is not None and is_summary(m):
            turns += int(m.metadata[COMPACTION_KEY].get("assistant_turns", 0))
    return turns


def text_of(content: Sequence[ContentBlock]) -> str:
    """The concatenated text blocks (other blocks are not text)."""
    return "".join(b.text for b in content if isinstance(b, TextBlock))


# -- JSON form (persistence and the event stream) ------------------------------------------------------------

_BLOCK_TYPES: dict[str, type] = {
    "text": TextBlock,
    "image": ImageBlock,
    "audio": AudioBlock,
    "resource": ResourceBlock,
    "resource_link": ResourceLinkBlock,
}


def content_to_json(block: ContentBlock) -> dict[str, Any]:
    if type(block) is TextBlock:  # the hot path
        return {"type": "text", "text": block.text}
    out: dict[str, Any] = {"type": block.type}
    for name in block.__slots__:
        value = getattr(block, name)
        if name != "type" and value is not None:
            out[name] = value
    return out


def content_from_json(data: dict[str, Any]) -> ContentBlock:
    kind = data.get("type")
    cls = _BLOCK_TYPES.get(str(kind))
    if cls is None:
        raise ValueError(f"unknown content block type: {kind!r}")
    return cls(**{k: v for k, v in data.items() if k != "type"})


def message_to_json(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"id": m.id, "role": m.role, "content": [content_to_json(b) for b in m.content]}
    if m.tool_calls:
        out["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.thinking:
        out["thinking"] = [
            {
                "text": t.text,
                **({"signature": t.signature} if t.signature else {}),
                **({"redacted": True} if t.redacted else {}),
            }
            for t in m.thinking
        ]
    if m.run_id is not None:
        out["run_id"] = m.run_id
    if m.internal:
        out["internal"] = True
    if m.interrupted:
        out["interrupted"] = True
    out["created_at"] = m.created_at
    if m.metadata:
        out["metadata"] = m.metadata
    return out


def message_from_json(d: dict[str, Any]) -> Message:
    return Message(
        role=d["role"],
        content=tuple(content_from_json(b) for b in d.get("content", ())),
        tool_calls=tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or {}) for c in d.get("tool_calls", ())
        ),
        tool_call_id=d.get("tool_call_id"),
        thinking=tuple(
            ThinkingBlock(text=t.get("text", ""), signature=t.get("signature"), redacted=bool(t.get("redacted")))
            for t in d.get("thinking", ())
        ),
        id=d["id"],
        run_id=d.get("run_id"),
        internal=bool(d.get("internal")),
        interrupted=bool(d.get("interrupted")),
        created_at=int(d.get("created_at", 0)),
        metadata=d.get("metadata"),
    )


# A str holding a surrogate code point is not valid Unicode text: it cannot be encoded as UTF-8, so storing it or
# writing it to a client fails (a model's lone "\\ud800" escape, a tool reading a broken file name).
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(text: str) -> str:
    """``text`` with every surrogate code point replaced by U+FFFD; the same object when there is none."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def valid_value(value: Any) -> Any:
    """:func:`valid_text` through JSON-like data (strings, lists, tuples, dict keys and values); unchanged data is
    returned as is, so the common case copies nothing."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        for k, v in value.items():  # checked first, copied only when something must change (rarely)
            if (isinstance(k, str) and valid_text(k) is not k) or valid_value(v) is not v:
                return {valid_text(k) if isinstance(k, str) else k: valid_value(v) for k, v in value.items()}
        return value
    if isinstance(value, list | tuple):
        for v in value:
            if valid_value(v) is not v:
                return type(value)([valid_value(v) for v in value])
    return value
