"""MCP wire vocabulary: protocol versions, reserved ``_meta`` keys, error codes and the inbound params we read.

Thin on purpose: the ``mcp`` SDK's models cost ~170 ms to import and the server must answer its first request long
before that (DESIGN section 1). Inbound params are small pydantic models built on first use (``defer_build``); a
``ValidationError`` they raise becomes -32602 at the peer's one exception-to-wire boundary. Outbound results are
plain dicts, checked against the SDK's ``mcp_types`` models by the tests.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "HANDSHAKE_VERSIONS",
    "LOG_LEVELS",
    "LOG_LEVEL_KEY",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "CallToolParams",
    "CancelledParams",
    "InitializeParams",
    "ListToolsParams",
    "ListenParams",
    "LogLevel",
    "SetLevelParams",
    "text_block",
]

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)

PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

UNSUPPORTED_PROTOCOL_VERSION = -32022  # data {supported, requested}

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class _Params(BaseModel):
    # Unknown fields are the client's business (newer revisions add some); ``_meta`` is read from the raw dict.
    model_config = ConfigDict(extra="ignore", defer_build=True, populate_by_name=True)


class InitializeParams(_Params):
    protocol_version: str = Field(alias="protocolVersion")
    capabilities: dict[str, Any] = Field(default_factory=dict)
    client_info: dict[str, Any] | None = Field(None, alias="clientInfo")


class ListToolsParams(_Params):
    cursor: str | None = None


class CallToolParams(_Params):
    name: str
    arguments: dict[str, Any] | None = None
    input_responses: dict[str, Any] | None = Field(None, alias="inputResponses")
    request_state: str | None = Field(None, alias="requestState")


class SetLevelParams(_Params):
    level: LogLevel


class CancelledParams(_Params):
    request_id: int | str = Field(alias="requestId")
    reason: str | None = None


class ListenParams(_Params):
    notifications: dict[str, Any] = Field(default_factory=dict)


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
