"""MCP's ``initialize`` (the handshake era): the answer (:func:`initialize`, one function for every path that gives
it), and ``serve``, the ``awaken-stdio mcp`` entry, which gives it before the event loop starts.

``serve`` reads the config as TOML (``app/startup.py``), then the first line of input (``protocols/early.py``); a
plain ``initialize`` is answered from here with the standard library alone, and ``server.py`` then starts the event
loop, the peer and the app in the handshake era that answer opened. Any other first line (a request of the
2026-07-28 era among them) is left to the peer, as are later ``initialize`` requests, which ``McpServer`` answers
with the same :func:`initialize`. What the server says of itself (``CAPABILITIES``, ``INSTRUCTIONS``) lives here.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import Any

from awaken_stdio.app.startup import Startup, loaded_heavy_modules, server_info
from awaken_stdio.protocols.early import answer_first_request
from awaken_stdio.protocols.mcp.wire import HANDSHAKE_VERSIONS

__all__ = ["CAPABILITIES", "INSTRUCTIONS", "Initialized", "initialize", "serve"]

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


@dataclass(frozen=True, slots=True)
class Initialized:
    """An ``initialize`` answered: the result, the version it negotiated and the client's capabilities."""

    result: dict[str, Any]
    version: str
    capabilities: dict[str, Any]


def serve(args: argparse.Namespace) -> int:
    """The ``awaken-stdio mcp`` command: serve stdin/stdout until EOF or a stop signal; the exit code.

    An unreadable config file, bad TOML or a bad store URL exits 2 before any output; a config that fails
    validation exits 2 after the first answer (``ConfigError`` raised for the CLI).
    """
    startup = Startup.from_args(args)
    first = answer_first_request("initialize", _early)
    if first is None:
        return 0
    from awaken_stdio.protocols.mcp.server import run

    return run(startup, *first)


def _early(params: dict[str, Any] | None) -> Initialized | None:
    answered = initialize(params or {}, validate=False)
    if answered is not None:
        log.info("serving the handshake protocol era")
        log.debug("answering initialize; heavy modules loaded: %s", loaded_heavy_modules())
    return answered


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
    return Initialized(result, negotiated, capabilities)
