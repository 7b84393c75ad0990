"""The client a tool call talks back to: log, progress, ask the user (elicitation), ask the client's model (sampling).

A host that can reach the caller puts a ``ClientChannel`` into ``ToolCallContext.services`` under ``CLIENT_CHANNEL``:
``awaken-stdio mcp`` does for a tool an MCP client calls directly (``notifications/message`` at or above the
client's level, ``notifications/progress``, ``elicitation/create``, ``sampling/createMessage``, each when the client
declared it). Without one (a call inside an agent run), ``ToolCallContext`` maps what it can: log lines go to the
log, progress becomes the tool call's progress (ACP ``tool_call_update``, MCP progress of the agent tool), and
``elicit``/``sample`` raise a ``ToolError`` saying why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["CLIENT_CHANNEL", "LOG_LEVELS", "PYTHON_LEVELS", "ClientChannel", "Elicited", "LogLevel", "Sampled"]

CLIENT_CHANNEL = "client_channel"
LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[LogLevel, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
PYTHON_LEVELS: dict[LogLevel, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


@dataclass(frozen=True, slots=True)
class Elicited:
    """The user's answer: ``accept`` with ``content`` (fitting the schema asked with), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Sampled:
    """The client's model's answer: its text, which model, why it stopped, and the whole result as sent."""

    text: str
    model: str | None = None
    stop_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class ClientChannel(Protocol):
    async def log(self, level: LogLevel, message: str) -> None: ...

    async def progress(self, done: float, total: float | None, message: str | None) -> None: ...

    async def elicit(self, message: str, schema: dict[str, Any]) -> Elicited: ...

    async def sample(self, params: dict[str, Any]) -> Sampled:
        """``params``: the ``sampling/createMessage`` params (``messages``, ``maxTokens``, ``systemPrompt``...)."""
        ...
