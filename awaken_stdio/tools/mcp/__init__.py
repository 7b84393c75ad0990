"""MCP servers as toolsets: the tools of stdio and streamable-HTTP MCP servers as ``Tool`` objects.

One module serves both sources of servers, ``[mcp_servers]`` in the config (``app/assemble.py`` makes their specs)
and ACP ``session/new`` ``mcpServers``::

    specs = [McpServerSpec.from_acp(entry, cwd=session_cwd) for entry in params["mcpServers"]]
    async with open_mcp_toolsets(specs, on_change=refresh) as toolsets:
        for tool in toolsets.tools():
            runtime.add_tool(tool, replace=True)

What it owns: every connection, each run by one supervisor task (the SDK's cancel scopes are bound to the task that
entered them, so a session must be entered and left in the same task). All servers connect concurrently, each under
its own timeout; a server that fails to start or dies is reported in its ``McpServerStatus``, its tools are
withdrawn, and it is restarted with a bounded exponential backoff. Stdio servers run in their own process group with
an allow-listed environment (never our API keys); their stderr goes to our logger, and on exit the whole group is
ended (stdin closed, SIGTERM, SIGKILL), so no grandchild outlives us; should we die first, even by kill -9, the
process guard (``_processes.py``) ends it.

The modules: ``spec`` (specs, status, restart policy), ``tool`` (``McpTool``), ``toolsets`` (the supervisors)
and ``transport`` (stdio and HTTP).

What it does not do: decide whether a call may run (the runtime's permission gate) or publish anything
(``protocols/``). ``mcp`` is imported inside functions only: it costs about half a second, which the ACP path must
not pay before it answers ``initialize``.
"""

from awaken_stdio.tools.mcp.spec import (
    DEFAULT_CALL_TIMEOUT_S,
    McpServerSpec,
    McpServerState,
    McpServerStatus,
    RestartPolicy,
    server_environment,
)
from awaken_stdio.tools.mcp.tool import McpTool
from awaken_stdio.tools.mcp.toolsets import McpToolsets, open_mcp_toolsets

__all__ = [
    "DEFAULT_CALL_TIMEOUT_S",
    "McpServerSpec",
    "McpServerState",
    "McpServerStatus",
    "McpTool",
    "McpToolsets",
    "RestartPolicy",
    "open_mcp_toolsets",
    "server_environment",
]
