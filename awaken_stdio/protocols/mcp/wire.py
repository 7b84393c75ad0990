"""MCP wire vocabulary: protocol versions, reserved ``_meta`` keys, error codes, what a handler knows of a request.

Thin on purpose, and the standard library only: the server answers its first request from this alone, before
pydantic loads (the ``mcp`` SDK's models cost ~170 ms to import; DESIGN section 1). The inbound params of the other
requests are pydantic models in ``params.py``. Outbound results are plain dicts, checked against the SDK's
``mcp_types`` models by the tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from awaken_stdio.contract.channel import LOG_LEVELS, LogLevel
from awaken_stdio.protocols.jsonrpc_wire import RequestId

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "CLIENT_INFO_KEY",
    "HANDSHAKE_VERSIONS",
    "HEARTBEAT_S",
    "LOG_LEVELS",
    "LOG_LEVEL_KEY",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSION_KEY",
    "SERVER_INFO_KEY",
    "SUBSCRIPTION_ID_KEY",
    "TASKS_EXTENSION",
    "UNSUPPORTED_PROTOCOL_VERSION",
    "LogLevel",
    "Request",
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
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"  # agent runs waiting for a person, as tasks (``tasks.py``)

UNSUPPORTED_PROTOCOL_VERSION = -32022  # data {supported, requested}

HEARTBEAT_S = 10.0  # progress while an agent runs: under the 15 s some clients reset their timeouts on


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """What a handler needs to know about the request it serves, in either era."""

    era: Literal["legacy", "modern"]
    version: str
    request_id: RequestId
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    progress_token: str | int | None = None
    log_level: LogLevel | None = None


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}
