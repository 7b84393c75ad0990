"""Tools: ``@tool`` functions, portable schemas, the built-in tools and MCP toolsets.

``FunctionTool`` and ``tool`` load on first access: importing a light submodule (``tools.schema``, which the MCP
server's catalog needs before it answers ``initialize``) must not pull in pydantic through this package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awaken_stdio.tools.function import FunctionTool, tool

__all__ = ["FunctionTool", "tool"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from awaken_stdio.tools import function

        value = globals()[name] = getattr(function, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
