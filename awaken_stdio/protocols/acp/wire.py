"""Thin ACP wire models: the params of the requests we serve, validated once on the way in.

Only inbound params are pydantic models (camelCase aliases, unknown keys ignored, ``defer_build`` so start-up pays
nothing until a model is first used); what we send is built as plain dicts by ``encoder.py``, because the hot path
(thousands of ``session/update`` a second) must not pay for model serialisation. A ``ValidationError`` raised here
becomes -32602 at the transport's single exception-to-wire boundary.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

from awaken_stdio.contract.messages import (
    AudioBlock,
    ContentBlock,
    ImageBlock,
    ResourceBlock,
    ResourceLinkBlock,
    TextBlock,
)
from awaken_stdio.protocols.acp.codes import PROTOCOL_VERSION
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError

__all__ = [
    "AuthenticateParams",
    "ClientCapabilities",
    "ForkSessionParams",
    "InitializeParams",
    "ListSessionsParams",
    "LoadSessionParams",
    "PromptCapabilities",
    "PromptParams",
    "ResumeSessionV2Params",
    "SessionIdParams",
    "SessionSetupParams",
    "SetConfigOptionParams",
    "SetConfigOptionV2Params",
    "SetModeParams",
    "prompt_to_blocks",
    "system_prompt",
]


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True)


def _absolute(path: str) -> str:
    if not os.path.isabs(path):
        raise ValueError(f"must be an absolute path, got {path!r}")
    return os.path.normpath(path)


class FileSystemCapabilities(_Wire):
    read_text_file: bool = False
    write_text_file: bool = False


class ClientCapabilities(_Wire):
    fs: FileSystemCapabilities = Field(default_factory=FileSystemCapabilities)
    terminal: bool = False
    session: dict[str, Any] | None = None
    elicitation: dict[str, Any] | None = None

    @property
    def forms(self) -> bool:
        """``elicitation.form``: the client renders a form a tool asks with (``elicitation/create``)."""
        return isinstance((self.elicitation or {}).get("form"), dict)

    @property
    def boolean_config(self) -> bool:
        """``session.configOptions.boolean``: the client renders boolean config options (ACP-CONFIG-003)."""
        options = (self.session or {}).get("configOptions")
        return isinstance(options, dict) and isinstance(options.get("boolean"), dict)

    @property
    def notices(self) -> bool:
        """``session.notices``: the client shows ``notice`` updates (advisory, not conversation history)."""
        return isinstance((self.session or {}).get("notices"), dict)

    @property
    def compaction(self) -> bool:
        """``session.compaction``: the client shows ``compaction_update`` and ``compaction_summary_chunk``."""
        return isinstance((self.session or {}).get("compaction"), dict)


class InitializeParams(_Wire):
    protocol_version: int = PROTOCOL_VERSION
    client_capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    client_info: dict[str, Any] | None = None


class AuthenticateParams(_Wire):
    method_id: str


class SessionSetupParams(_Wire):
    """``session/new`` (and the base of load/resume/fork): where the session works, with which MCP servers, and the
    client's system prompt (``{"mode", "content"}``, checked by :func:`system_prompt`)."""

    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    additional_directories: list[str] = Field(default_factory=list)
    system_prompt: Any = None

    _cwd = field_validator("cwd")(_absolute)

    @field_validator("additional_directories")
    @classmethod
    def _all_absolute(cls, value: list[str]) -> list[str]:
        return [_absolute(v) for v in value]

    @field_validator("mcp_servers", "additional_directories", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value


class LoadSessionParams(SessionSetupParams):
    """``session/load`` and ``session/resume``."""

    session_id: str


class ForkSessionParams(LoadSessionParams):
    """``session/fork`` (unstable): the session to copy, and the new one's setup."""

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


_SYSTEM_PROMPT_MODES = ("append", "override")


def system_prompt(value: Any) -> dict[str, Any] | None:
    """A request's ``systemPrompt`` as the session keeps it: ``{"mode", "content": [text blocks]}``; ``None`` for
    none. -32602 for what cannot be applied (the session is then not created): a mode other than ``append`` and
    ``override``, no content, or a block that is not text."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: systemPrompt must be an object {mode, content}")
    mode, content = value.get("mode"), value.get("content")
    if mode not in _SYSTEM_PROMPT_MODES:
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unsupported systemPrompt mode {mode!r}; this agent "
                                           "supports append and override")  # fmt: skip
    if not isinstance(content, list) or not content:
        raise JsonRpcError(INVALID_PARAMS, "Invalid params: systemPrompt.content must be a non-empty array")
    blocks: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            kind = block.get("type") if isinstance(block, dict) else type(block).__name__
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: systemPrompt content of type {kind!r} is not "
                                               "supported (text only)")  # fmt: skip
        blocks.append({"type": "text", "text": block["text"]})
    return {"mode": mode, "content": blocks}


class ListSessionsParams(_Wire):
    cwd: str | None = None
    cursor: str | None = None


class SessionIdParams(_Wire):
    session_id: str


class SetModeParams(SessionIdParams):
    mode_id: str


class SetConfigOptionParams(SessionIdParams):
    config_id: str
    value: bool | str
    type: Literal["boolean", "select"] | None = None


class SetConfigOptionV2Params(SessionIdParams):
    """v2's ``session/set_config_option``: a select's value is tagged ``"type": "id"``."""

    config_id: str
    value: bool | str
    type: Literal["boolean", "select", "id"] | None = None


class ResumeSessionV2Params(LoadSessionParams):
    """v2's ``session/resume``: where to replay the conversation from (``replay.py``), or nothing replayed."""

    replay_from: dict[str, Any] | None = None

    @field_validator("replay_from")
    @classmethod
    def _typed(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not isinstance(value.get("type"), str):
            raise ValueError("must be an object with a type, or null")
        return value


class PromptParams(SessionIdParams):
    prompt: list[dict[str, Any]]
    meta: Any = Field(default=None, alias="_meta")  # the W3C trace context, if any (``tracing.py``)


class PromptCapabilities(_Wire):
    image: bool = False
    audio: bool = False
    embedded_context: bool = True


def prompt_to_blocks(prompt: list[dict[str, Any]], caps: PromptCapabilities) -> list[ContentBlock]:
    """ACP content blocks as the runtime's, refusing (-32602) the kinds we did not advertise (ACP-PROMPTCAP-*)."""
    blocks: list[ContentBlock] = []
    for item in prompt:
        kind = item.get("type")
        try:
            if kind == "text":
                blocks.append(TextBlock(text=str(item["text"])))
            elif kind == "resource_link":
                blocks.append(
                    ResourceLinkBlock(
                        uri=item["uri"],
                        name=item.get("name") or item["uri"],
                        mime_type=item.get("mimeType"),
                        title=item.get("title"),
                        description=item.get("description"),
                        size=item.get("size"),
                    )
                )
            elif kind == "image" and caps.image:
                blocks.append(ImageBlock(data=item["data"], mime_type=item["mimeType"], uri=item.get("uri")))
            elif kind == "audio" and caps.audio:
                blocks.append(AudioBlock(data=item["data"], mime_type=item["mimeType"]))
            elif kind == "resource" and caps.embedded_context:
                res = item["resource"]
                blocks.append(
                    ResourceBlock(
                        uri=res["uri"], text=res.get("text"), blob=res.get("blob"), mime_type=res.get("mimeType")
                    )
                )
            else:
                raise JsonRpcError(INVALID_PARAMS, f"prompt content of type {kind!r} is not supported")
        except (KeyError, TypeError) as exc:
            raise JsonRpcError(INVALID_PARAMS, f"malformed {kind} content block: missing {exc}") from None
    return blocks
