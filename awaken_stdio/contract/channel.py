"""The client a tool call talks back to: log, progress, ask the user (elicitation), ask the client's model (sampling).

The surface that starts a call gives its runs a ``ClientChannel`` (``RunEnvironment.channel``):
``awaken-stdio mcp`` for a tool an MCP client calls directly (``notifications/message`` at or above the client's
level, ``notifications/progress``, ``elicitation/create``, ``sampling/createMessage``, each when the client declared
it) and for the tools of an agent run an MCP client started (the same, but questions only in the handshake era);
``awaken-stdio acp`` for the tools of a session's runs (a form through ACP ``elicitation/create`` when the editor
renders forms, else a single choice as a permission question; no model to sample). ``log`` and ``progress`` return
False where the surface has no better place for them than the runtime's own: then log lines go to the log and
progress becomes the tool call's progress. Without a channel (a run resumed away from its client), ``elicit`` and
``sample`` raise a ``ToolError`` saying why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "LOG_LEVELS",
    "PYTHON_LEVELS",
    "ClientChannel",
    "Elicited",
    "LogLevel",
    "Sampled",
    "SamplingHost",
]

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


@dataclass(frozen=True, slots=True, kw_only=True)
class Elicited:
    """The user's answer: ``accept`` with ``content`` (fitting the schema asked with), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Sampled:
    """The client's model's answer: its text, which model, why it stopped, and the whole result as sent."""

    text: str
    model: str | None = None
    stop_reason: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)


class ClientChannel(Protocol):
    async def log(self, level: LogLevel, message: str) -> bool:
        """Send a log line to the client; False: this surface has no place for it (the log takes it)."""
        ...

    async def progress(self, done: float, total: float | None, message: str | None) -> bool:
        """Report how far the call got; False: the tool call's own progress shows it."""
        ...

    async def elicit(self, call_id: str, message: str, schema: dict[str, Any]) -> Elicited:
        """Ask the user for input fitting ``schema`` during call ``call_id``; a ``ToolError`` when they cannot be."""
        ...

    async def sample(self, params: dict[str, Any]) -> Sampled:
        """``params``: the ``sampling/createMessage`` params (``messages``, ``maxTokens``, ``systemPrompt``...)."""
        ...


class SamplingHost(Protocol):
    """The client's model, as the ``mcp_sampling`` provider asks it: whether it samples (with tools), and the
    ``sampling/createMessage`` request itself (its result as sent)."""

    def can_sample(self) -> bool: ...

    def can_use_tools(self) -> bool: ...

    async def create_message(self, params: dict[str, Any]) -> dict[str, Any]: ...
