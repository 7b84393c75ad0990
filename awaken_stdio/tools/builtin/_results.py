"""What every built-in tool returns: text for the model, data for clients, locations to follow along.

``ToolResult.message`` is the model's text; ``ToolResult.data`` the structured result (ACP ``rawOutput``, MCP
``structuredContent``); ``ToolResult.metadata["locations"]`` the absolute paths (and 1-based lines) a call touched,
for ACP ``locations``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from awaken_stdio.contract.tools import ToolResult

__all__ = ["LOCATIONS", "location", "success"]

LOCATIONS = "locations"


def location(path: Path, line: int | None = None) -> dict[str, Any]:
    """An ACP ``ToolCallLocation``: ``{path, line?}``."""
    return {"path": str(path)} if line is None else {"path": str(path), "line": line}


def success(tool_name: str, message: str, data: dict[str, Any], locations: list[dict[str, Any]]) -> ToolResult:
    result = ToolResult.success(tool_name, data, message)
    result.metadata[LOCATIONS] = locations
    return result
