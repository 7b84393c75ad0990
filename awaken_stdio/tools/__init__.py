"""Tools: ``@tool`` functions, portable schemas, and (later) the built-in tools and MCP toolsets."""

from awaken_stdio.tools.function import FunctionTool, tool

__all__ = ["FunctionTool", "tool"]
