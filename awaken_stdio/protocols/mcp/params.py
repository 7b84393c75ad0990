"""The inbound params of the MCP requests we serve, as small pydantic models built on first use (``defer_build``).

A ``ValidationError`` they raise becomes -32602 at the peer's one exception-to-wire boundary. ``initialize`` params
are checked by hand first (``server.py``), so the first answer never waits for pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from awaken_stdio.protocols.mcp.wire import LogLevel

__all__ = ["CallToolParams", "CancelledParams", "InitializeParams", "ListToolsParams", "ListenParams", "SetLevelParams"]


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
