"""The outcome of one tool call: what the model reads, what the protocols show, and a call that waits.

Its own module so that the event stream (``contract.events``) can carry results without importing the tool
interface, which emits events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from awaken_stdio.contract.content import model_text
from awaken_stdio.contract.messages import ContentBlock, content_from_json, content_to_json
from awaken_stdio.contract.suspension import SuspendTicket

__all__ = ["ToolResult", "ToolStatus"]

ToolStatus = Literal["success", "pending", "error"]


@dataclass(slots=True, kw_only=True)
class ToolResult:
    """The outcome of one call. ``message`` (else JSON of ``data``) is what the model reads.

    ``content``: rich blocks (images, audio, resources; ``contract/content.py``) the protocols show as they are.
    """

    tool_name: str
    status: ToolStatus
    data: Any = None
    message: str | None = None
    suspension: SuspendTicket | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    content: list[ContentBlock] = field(default_factory=list)

    @staticmethod
    def success(tool_name: str, data: Any = None, message: str | None = None) -> ToolResult:
        return ToolResult(tool_name=tool_name, status="success", data=data, message=message)

    @staticmethod
    def error(tool_name: str, message: str, *, code: str | None = None, data: Any = None) -> ToolResult:
        if code is not None:
            return ToolResult(
                tool_name=tool_name,
                status="error",
                data={"error": {"code": code, "message": message}},
                message=f"[{code}] {message}",
            )
        return ToolResult(tool_name=tool_name, status="error", data=data, message=message)

    @staticmethod
    def rich(tool_name: str, blocks: ContentBlock | list[ContentBlock] | tuple[ContentBlock, ...]) -> ToolResult:
        """A success made of content blocks; the model reads their text and a stand-in for each other block."""
        content = list(blocks) if isinstance(blocks, list | tuple) else [blocks]
        return ToolResult(
            tool_name=tool_name, status="success", data=None, message=model_text(content), content=content
        )

    @staticmethod
    def suspended(tool_name: str, ticket: SuspendTicket | None = None, message: str | None = None) -> ToolResult:
        return ToolResult(tool_name=tool_name, status="pending", data=None, message=message, suspension=ticket)

    @property
    def is_error(self) -> bool:
        return self.status == "error"

    @property
    def is_pending(self) -> bool:
        return self.status == "pending"

    def text_for_model(self) -> str:
        if self.message is not None:
            return self.message
        if isinstance(self.data, str):
            return self.data
        return json.dumps(self.data, ensure_ascii=False, default=str)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool_name": self.tool_name, "status": self.status, "data": self.data}
        if self.message is not None:
            out["message"] = self.message
        if self.suspension is not None:
            out["suspension"] = self.suspension.to_json()
        if self.metadata:
            out["metadata"] = self.metadata
        if self.content:
            out["content"] = [content_to_json(b) for b in self.content]
        return out

    @staticmethod
    def from_json(d: dict[str, Any]) -> ToolResult:
        ticket = d.get("suspension")
        return ToolResult(
            tool_name=d["tool_name"],
            status=d["status"],
            data=d.get("data"),
            message=d.get("message"),
            suspension=SuspendTicket.from_json(ticket) if ticket else None,
            metadata=dict(d.get("metadata") or {}),
            content=[content_from_json(b) for b in d.get("content") or ()],
        )
