"""What the protocol servers use of the tools layer, through the app: they import only app, contract and their
JSON-RPC peer (``tests/test_layers.py``).

The local file system and workspace (an editor's file system falls back on it for listings and searches; MCP
resources and completions read the workspace with it), the shell commands run in, the portable form of a tool's
schema, and the MCP servers an ACP client gives a session.
"""

from __future__ import annotations

from awaken_stdio.tools.local_fs import LocalFileSystem, open_file
from awaken_stdio.tools.mcp import McpServerSpec, McpToolsets
from awaken_stdio.tools.runner import default_shell
from awaken_stdio.tools.schema import PortabilityError, portable_schema
from awaken_stdio.tools.workspace import Workspace

__all__ = [
    "LocalFileSystem",
    "McpServerSpec",
    "McpToolsets",
    "PortabilityError",
    "Workspace",
    "default_shell",
    "open_file",
    "portable_schema",
]
