"""ACP's numbers and names every module of the ACP server shares: the protocol version, the error codes, the
authentication method. A leaf (it imports only the JSON-RPC error type, from the standard-library-only
``jsonrpc_wire``), so no module imports the entry point for them and ``initialize`` is answered without anyio.
"""

from __future__ import annotations

from awaken_stdio.protocols.jsonrpc_wire import JsonRpcError

__all__ = [
    "AUTH_METHOD",
    "AUTH_METHODS",
    "AUTH_REQUIRED",
    "LOGIN_METHOD",
    "PROTOCOL_VERSION",
    "RESOURCE_NOT_FOUND",
    "auth_required",
]

PROTOCOL_VERSION = 1
AUTH_REQUIRED = -32000
AUTH_METHOD = "configure-model"  # type agent: ``authenticate`` re-reads the config and the keys saved by ``login``
LOGIN_METHOD = "login"  # type terminal: the client runs ``awaken-stdio login`` in a terminal
AUTH_METHODS = (AUTH_METHOD, LOGIN_METHOD)  # what ``authenticate`` accepts
RESOURCE_NOT_FOUND = -32002  # ACP's code for an unknown session, and some editors' for a missing file


def auth_required(problem: str) -> JsonRpcError:
    """The -32000 that sends the client to ``authenticate`` (its ``authMethods`` named in ``initialize``)."""
    return JsonRpcError(AUTH_REQUIRED, f"Authentication required: {problem}", {"authMethodId": AUTH_METHOD})
