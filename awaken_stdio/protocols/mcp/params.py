"""The inbound params of the MCP requests we serve, as small pydantic models built on first use (``defer_build``).

``server.py``'s method table validates a request's params with its model before the handler runs
(``protocols/handlers.py``); a ``ValidationError`` becomes -32602 at the peer's one exception-to-wire boundary.
``initialize`` params are checked by hand first (``initialize.py``), so the first answer never waits for pydantic.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from awaken_stdio.protocols.mcp.wire import LogLevel

__all__ = [
    "CallToolParams",
    "CancelledParams",
    "CompleteParams",
    "GetPromptParams",
    "InitializeParams",
    "ListParams",
    "ListenParams",
    "ResourceParams",
    "SetLevelParams",
    "TaskParams",
]


class _Params(BaseModel):
    # Unknown fields are the client's business (newer revisions add some); ``_meta`` is read from the raw dict.
    model_config = ConfigDict(extra="ignore", defer_build=True, populate_by_name=True)


class InitializeParams(_Params):
    protocol_version: str = Field(alias="protocolVersion")
    capabilities: dict[str, Any] = Field(default_factory=dict)
    client_info: dict[str, Any] | None = Field(None, alias="clientInfo")


class ListParams(_Params):
    """Any paginated list: tools, resources, resource templates, prompts."""

    cursor: str | None = None


class ResourceParams(_Params):
    """``resources/read``, ``resources/subscribe``, ``resources/unsubscribe``."""

    uri: str


class GetPromptParams(_Params):
    name: str
    arguments: dict[str, str] | None = None


class CompletionArgument(_Params):
    name: str
    value: str = ""


class CompleteParams(_Params):
    ref: dict[str, Any]
    argument: CompletionArgument


class CallToolParams(_Params):
    name: str
    arguments: dict[str, Any] | None = None
    input_responses: dict[str, Any] | None = Field(None, alias="inputResponses")
    request_state: str | None = Field(None, alias="requestState")


class TaskParams(_Params):
    """``tasks/get``, ``tasks/update`` (with ``inputResponses``) and ``tasks/cancel`` of the Tasks extension."""

    task_id: str = Field(alias="taskId")
    input_responses: dict[str, Any] | None = Field(None, alias="inputResponses")


class SetLevelParams(_Params):
    level: LogLevel


class CancelledParams(_Params):
    request_id: int | str = Field(alias="requestId")
    reason: str | None = None


class ListenFilter(_Params):
    tools_list_changed: bool = Field(default=False, alias="toolsListChanged")
    resource_subscriptions: list[str] = Field(default_factory=list, alias="resourceSubscriptions")
    task_ids: list[str] = Field(default_factory=list, alias="taskIds")  # the Tasks extension's notifications


class ListenParams(_Params):
    notifications: ListenFilter = Field(default_factory=ListenFilter)
