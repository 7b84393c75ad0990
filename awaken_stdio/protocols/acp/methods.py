"""ACP's method tables, v1 and v2: each method, the model of its params and the handler that serves it.

Built once the agent is loaded (pydantic with it) for the version a connection speaks; ``front.py`` registers the
methods' names on the peer before that and forwards each request to the table of its connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from awaken_stdio.protocols.acp import wire
from awaken_stdio.protocols.handlers import HandlerTable, entry
from awaken_stdio.protocols.jsonrpc import RequestContext

if TYPE_CHECKING:
    from awaken_stdio.protocols.acp.server import AcpServer
    from awaken_stdio.protocols.acp.v2.connection import V2Connection

__all__ = ["Methods", "v1_methods", "v2_methods"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Methods:
    """What one version of ACP serves: its requests and its notifications."""

    requests: HandlerTable[RequestContext]
    notifications: HandlerTable[RequestContext]


def v1_methods(server: AcpServer) -> Methods:
    """ACP v1 (``initialize`` is the front's): ``AcpServer``'s handlers."""
    requests = HandlerTable(RequestContext, [
        entry("authenticate", wire.AuthenticateParams, server.authenticate),
        entry("session/new", wire.SessionSetupParams, server.new_session),
        entry("session/load", wire.LoadSessionParams, server.load_session),
        entry("session/resume", wire.LoadSessionParams, server.resume_session),
        entry("session/fork", wire.ForkSessionParams, server.fork_session),
        entry("session/list", wire.ListSessionsParams, server.list_sessions),
        entry("session/close", wire.SessionIdParams, server.close_session),
        entry("session/delete", wire.SessionIdParams, server.delete_session),
        entry("session/set_mode", wire.SetModeParams, server.set_mode),
        entry("session/set_config_option", wire.SetConfigOptionParams, server.set_config_option),
        entry("session/prompt", wire.PromptParams, server.prompt),
    ])  # fmt: skip
    notifications = HandlerTable(RequestContext, [entry("session/cancel", wire.SessionIdParams, server.cancel)])
    return Methods(requests=requests, notifications=notifications)


def v2_methods(connection: V2Connection) -> Methods:
    """ACP v2 (Preview): ``V2Connection``'s handlers, over the same ``AcpServer``."""
    requests = HandlerTable(RequestContext, [
        entry("auth/login", wire.AuthenticateParams, connection.login),
        entry("auth/logout", None, connection.logout),
        entry("session/new", wire.SessionSetupParams, connection.new_session),
        entry("session/resume", wire.ResumeSessionV2Params, connection.resume_session),
        entry("session/list", wire.ListSessionsParams, connection.list_sessions),
        entry("session/close", wire.SessionIdParams, connection.close_session),
        entry("session/delete", wire.SessionIdParams, connection.delete_session),
        entry("session/set_config_option", wire.SetConfigOptionV2Params, connection.set_config_option),
        entry("session/prompt", wire.PromptParams, connection.prompt),
    ])  # fmt: skip
    notifications = HandlerTable(RequestContext, [entry("session/cancel", wire.SessionIdParams, connection.cancel)])
    return Methods(requests=requests, notifications=notifications)
