"""MCP's ``initialize`` (the handshake era): the answer (:func:`initialize`, one function for every path that gives it);
``entry.serve``, the ``awaken-stdio mcp`` entry, gives it before the event loop starts.

``entry.serve`` reads the config as TOML (``app/startup.py``), then the first line of input (``protocols/early.py``); a
plain ``initialize`` is answered with this module and the standard library alone, and ``server.py`` then starts the
event loop, the peer and the app in the handshake era that answer opened. Any other first line (a request of the
2026-07-28 era among them) is left to the peer, as are later ``initialize`` requests, which ``McpServer`` answers with
the same :func:`initialize`. What the server says of itself (``CAPABILITIES``, ``INSTRUCTIONS``) lives here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from awaken_stdio.app.startup import server_info
from awaken_stdio.protocols.mcp.wire import HANDSHAKE_VERSIONS

__all__ = ["CAPABILITIES", "INSTRUCTIONS", "Initialized", "initialize"]

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "awaken-stdio publishes the tools of this workspace and its agents (agent_<id>). Agent runs are durable: a run "
    "that ends with status waiting needs approval of its pending tool calls, given with resume_run, now or later."
)
CAPABILITIES: dict[str, Any] = {
    "tools": {"listChanged": True},
    "logging": {},
    "resources": {"subscribe": True, "listChanged": False},
    "prompts": {"listChanged": False},
    "completions": {},
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Initialized:
    """An ``initialize`` answered: the result, the version it negotiated and the client's capabilities."""

    result: dict[str, Any]
    version: str
    capabilities: dict[str, Any]


def initialize(params: dict[str, Any], *, validate: bool = True) -> Initialized | None:
    """The answer to ``initialize`` with ``params``: the client's version if this server speaks it, else the newest.

    ``None`` only when ``validate`` is false and the params need pydantic's validation (left to the peer then); a
    validation error is raised, to be answered with -32602.
    """
    version, capabilities, info = (
        params.get("protocolVersion"),
        params.get("capabilities", {}),
        params.get("clientInfo"),
    )
    if not (isinstance(version, str) and isinstance(capabilities, dict) and isinstance(info, dict | None)):
        if not validate:
            return None
        from awaken_stdio.protocols.mcp.params import InitializeParams

        p = InitializeParams.model_validate(params)
        version, capabilities, info = p.protocol_version, p.capabilities, p.client_info
    negotiated = version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    client = (info or {}).get("name", "an unnamed client")
    log.info("initialize from %s: protocol %s (asked %s)", client, negotiated, version)
    result = {
        "protocolVersion": negotiated,
        "capabilities": CAPABILITIES,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }
    return Initialized(result=result, version=negotiated, capabilities=capabilities)
