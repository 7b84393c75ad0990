"""``awaken-stdio acp`` up to its first answer: ``initialize`` from the raw config, the agent loaded after it.

``serve`` reads the config as TOML only (``app/startup.py``) and starts the JSON-RPC peer with ``initialize``
answered here and every other method forwarded to ``AcpServer`` (``server.py``). Pydantic, the validated config,
the app and that module load once the answer is on the wire, or as soon as another request needs them
(``app.startup.DeferredApp``); requests that arrive meanwhile wait. A config the validation rejects fails the
requests waiting for the agent with -32603 and its text, then the process exits 2 with one stderr line naming it
(``protocols/lifecycle.py``, which also handles SIGTERM and SIGINT).

What ``initialize`` says is read from the raw data: whether the default agent's model is usable (``authMethods``)
and what it accepts (``promptCapabilities``), both answered by ``app/startup.py`` from the raw config. This module
owns the method table; ``AcpServer`` owns what each method does.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.app.startup import (
    DeferredApp,
    Startup,
    loaded_heavy_modules,
    model_problem,
    prompt_capabilities,
    server_info,
)
from awaken_stdio.protocols.acp.codes import AUTH_METHOD, PROTOCOL_VERSION
from awaken_stdio.protocols.jsonrpc import (
    INTERNAL_ERROR,
    JsonRpcError,
    JsonRpcPeer,
    NotificationHandler,
    Params,
    RequestContext,
    RequestHandler,
)
from awaken_stdio.protocols.lifecycle import Lifecycle

if TYPE_CHECKING:
    from awaken_stdio.app.app import App, Settings
    from awaken_stdio.protocols.acp.server import AcpServer

__all__ = ["AcpFront", "serve"]

log = logging.getLogger(__name__)

# method -> the AcpServer handler that serves it (initialize is answered here)
REQUESTS = {
    "authenticate": "authenticate",
    "session/new": "new_session",
    "session/load": "load_session",
    "session/resume": "resume_session",
    "session/list": "list_sessions",
    "session/close": "close_session",
    "session/delete": "delete_session",
    "session/set_mode": "set_mode",
    "session/set_config_option": "set_config_option",
    "session/prompt": "prompt",
}
NOTIFICATIONS = {"session/cancel": "cancel"}
_SESSION_CAPABILITIES = ("list", "resume", "close", "delete", "additionalDirectories")
_APP_OPEN_TIMEOUT_S = 60.0


def serve(args: argparse.Namespace) -> int:
    """The CLI entry: serve until stdin ends or a stop signal; the exit code (``Lifecycle.exit_code``). A config
    that cannot be read or validated, or a bad store URL, raises ``ConfigError`` (the CLI exits 2)."""
    return anyio.run(_serve, Startup.from_args(args))


async def _serve(startup: Startup) -> int:
    from awaken_stdio.protocols.stdio import open_stdio

    peer = JsonRpcPeer(watch_parent=True)
    lifecycle = Lifecycle(peer)
    front = AcpFront(startup, peer, lifecycle)
    async with open_stdio() as (reader, writer), anyio.create_task_group() as tg:
        await tg.start(lifecycle.watch_signals)
        tg.start_soon(front.app.run)
        await peer.run(reader, writer)
        tg.cancel_scope.cancel()
    return lifecycle.exit_code()


class AcpFront:
    """Answers ``initialize``; forwards every other method to the ``AcpServer`` of the app opened after that answer."""

    def __init__(self, startup: Startup, peer: JsonRpcPeer, lifecycle: Lifecycle | None = None) -> None:
        self.startup = startup
        self.peer = peer
        self.lifecycle = lifecycle or Lifecycle(peer)
        self.client: dict[str, Any] = {}  # the clientCapabilities of the last initialize
        self.prompt_caps: dict[str, bool] = {}  # what the last initialize advertised
        self.server: AcpServer | None = None
        self.app = DeferredApp(
            startup.settings,
            failure=_could_not_start,
            on_config_error=self.lifecycle.fail,
            serving=self._serving,
            timeout_s=_APP_OPEN_TIMEOUT_S,
        )
        peer.register("initialize", self.initialize)
        for method, handler in REQUESTS.items():
            peer.register(method, self._forward(handler))
        for method, handler in NOTIFICATIONS.items():
            peer.register_notification(method, self._forward_notification(handler))

    @asynccontextmanager
    async def _serving(self, app: App, settings: Settings) -> AsyncGenerator[None]:
        """The ``AcpServer`` of the open app, with the task group its background work runs in."""
        from awaken_stdio.protocols.acp.server import AcpServer

        async with anyio.create_task_group() as tg:
            self.server = AcpServer(settings, app, tg, self.peer, self.client, self.prompt_caps)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    async def _server(self) -> AcpServer:
        await self.app.ready()
        assert self.server is not None
        return self.server

    def _forward(self, handler: str) -> RequestHandler:
        async def forward(params: Params, ctx: RequestContext) -> Any:
            return await getattr(await self._server(), handler)(params)

        return forward

    def _forward_notification(self, handler: str) -> NotificationHandler:
        async def forward(params: Params, ctx: RequestContext) -> None:
            if self.server is not None:  # before the agent loads, no session exists to act on
                await getattr(self.server, handler)(params)

        return forward

    async def initialize(self, params: Params, ctx: RequestContext) -> dict[str, Any]:
        self.client = client_capabilities(params)
        file = self.server.settings.loaded.file if self.server else self.startup.file  # authenticate re-reads it
        self.prompt_caps = prompt_capabilities(file)
        if self.server is not None:
            self.server.adopt_client(self.client, self.prompt_caps)
        problem = model_problem(file)
        log.debug("answering initialize; heavy modules loaded: %s", loaded_heavy_modules())
        self.app.wanted()
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {
                "loadSession": True,
                "promptCapabilities": self.prompt_caps,
                "mcpCapabilities": {"http": True, "sse": False},
                "sessionCapabilities": {key: {} for key in _SESSION_CAPABILITIES},
            },
            "agentInfo": server_info(),
            "authMethods": [_auth_method(problem)] if problem else [],
        }


def client_capabilities(params: Params) -> dict[str, Any]:
    """The ``clientCapabilities`` of ``initialize`` params, checked by hand when every field has its plain type.

    Anything else (a wrong type, or a value pydantic would coerce) goes through the wire model, whose error is the
    answer as before; only then does pydantic load before the answer.
    """
    if not params:
        return {}
    if isinstance(params, dict):
        caps: Any = params.get("clientCapabilities", {})
        fs: Any = caps.get("fs", {}) if isinstance(caps, dict) else None
        if (
            isinstance(fs, dict)
            and type(params.get("protocolVersion", PROTOCOL_VERSION)) is int
            and all(type(fs.get(key, False)) is bool for key in ("readTextFile", "writeTextFile"))
            and type(caps.get("terminal", False)) is bool
            and isinstance(caps.get("session"), dict | None)
            and isinstance(params.get("clientInfo"), dict | None)
        ):
            return caps
    from awaken_stdio.protocols.acp.wire import InitializeParams

    return InitializeParams.model_validate(params).client_capabilities.model_dump(by_alias=True)


def _could_not_start(problem: str | None) -> JsonRpcError:
    """The error of a request that waited for an app that could not open (or has closed)."""
    return JsonRpcError(INTERNAL_ERROR, f"the agent could not start: {problem}")


def _auth_method(problem: str) -> dict[str, Any]:
    return {"id": AUTH_METHOD, "name": "Configure a model", "description": problem}
