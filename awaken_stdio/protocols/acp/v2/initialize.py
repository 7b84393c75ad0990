"""The answer to a v2 ``initialize``: ``info`` and ``capabilities`` objects, the session surface as capabilities.

Standard library only: it is given before the event loop starts (``protocols/early.py``), like v1's. Capabilities
are object markers (``{}`` supported, omitted unsupported). ``session: {}`` is the baseline surface (new, list,
resume, close, prompt, cancel, update); ``delete`` and ``additionalDirectories`` are advertised on top of it, as are
the prompt content kinds the default model accepts and MCP servers over stdio and HTTP.
"""

from __future__ import annotations

from typing import Any

from awaken_stdio.app.config_file import ConfigFile
from awaken_stdio.app.startup import model_problem, prompt_capabilities, server_info
from awaken_stdio.protocols.acp.codes import AUTH_METHOD
from awaken_stdio.protocols.acp.v2 import VERSION
from awaken_stdio.protocols.jsonrpc_wire import INVALID_PARAMS, JsonRpcError

__all__ = ["asks_v2", "initialize_v2"]


def asks_v2(params: Any) -> bool:
    """The client asked for exactly v2, in v2's shape (its ``info`` object, which v2 requires). Any other version
    (3, 65535), and a v1-shaped request for 2 (a v1 client probing), is answered with v1 as before: v2 is a Preview,
    so a client has to ask for it by name and speak it."""
    return (
        isinstance(params, dict)
        and type(params.get("protocolVersion")) is int
        and params["protocolVersion"] == 2
        and isinstance(params.get("info"), dict)
    )


Negotiated = tuple[dict[str, Any], dict[str, Any], dict[str, bool]]


def initialize_v2(params: dict[str, Any], file: ConfigFile, *, validate: bool) -> Negotiated | None:
    """(result, the client's capabilities as the v1 machinery reads them, the prompt capabilities advertised).

    ``None`` when ``validate`` is false and the params are not plain (the early path leaves them to the peer, which
    calls again with ``validate`` and answers the raised -32602)."""
    problem = _params_problem(params)
    if problem is not None:
        if not validate:
            return None
        raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {problem}")
    caps: dict[str, Any] = params.get("capabilities") or {}
    prompt_caps = prompt_capabilities(file)
    session: dict[str, Any] = {
        "prompt": {key: {} for key, on in prompt_caps.items() if on},
        "mcp": {"stdio": {}, "http": {}},
        "delete": {},
        "additionalDirectories": {},
    }
    problem = model_problem(file)
    methods = [{"type": "agent", "methodId": AUTH_METHOD, "name": "Configure a model", "description": problem}]
    result = {
        "protocolVersion": VERSION,
        "info": server_info(),
        "capabilities": {"session": session},
        "authMethods": methods if problem else [],
    }
    elicitation = caps.get("elicitation")
    client = {"elicitation": elicitation} if isinstance(elicitation, dict) else {}
    return result, client, prompt_caps


def _params_problem(params: dict[str, Any]) -> str | None:
    caps = params.get("capabilities")
    if caps is not None and not isinstance(caps, dict):
        return "capabilities must be an object"
    if isinstance(caps, dict) and not isinstance(caps.get("elicitation"), dict | None):
        return "capabilities.elicitation must be an object"
    info = params["info"]
    if not all(isinstance(info.get(k), str) for k in ("name", "version")):
        return "info needs a name and a version"
    meta = params.get("_meta")
    if meta is not None and not isinstance(meta, dict):
        return "_meta must be an object or null"
    return None
