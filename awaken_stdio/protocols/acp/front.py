"""``awaken-stdio acp`` after its first answer: the event loop, the JSON-RPC peer, and the agent loaded after it.

``initialize.py`` answers a first ``initialize`` before the event loop exists; ``run`` then starts the peer with
what was read and not answered, and ``AcpFront`` adopts what that answer negotiated. ``AcpFront`` answers any later
``initialize`` (and a first one the early path left to it) with the same function, and forwards every other method
to ``AcpServer`` (``server.py``). Pydantic, the validated config, the app and that module load once the answer is
on the wire, or as soon as another request needs them (``app.deferred.DeferredApp``); requests that arrive meanwhile
wait. A config the validation rejects fails the requests waiting for the agent with -32603 and its text, then the
process exits 2 with one stderr line naming it (``protocols/lifecycle.py``, which also handles SIGTERM and SIGINT).
This module owns the names of the methods of each version, registered before the agent loads; ``methods.py`` binds
them to their params models and handlers (``AcpServer``'s, or ``V2Connection``'s), which own what each method does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.app.deferred import DeferredApp
from awaken_stdio.app.startup import Startup
from awaken_stdio.protocols.acp import v2
from awaken_stdio.protocols.acp.initialize import Initialized, initialize
from awaken_stdio.protocols.acp.v2.peer import AcpPeer
from awaken_stdio.protocols.jsonrpc import (
    INTERNAL_ERROR,
    METHOD_NOT_FOUND,
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
    from awaken_stdio.protocols.acp.methods import Methods
    from awaken_stdio.protocols.acp.server import AcpServer
    from awaken_stdio.protocols.acp.v2.connection import V2Connection

__all__ = ["AcpFront", "run"]

log = logging.getLogger(__name__)

# the v1 method surface, served by ``AcpServer`` (its table is ``methods.py``'s; initialize is answered here)
REQUESTS = frozenset({
    "authenticate", "session/new", "session/load", "session/resume", "session/fork", "session/list", "session/close",
    "session/delete", "session/set_mode", "session/set_config_option", "session/prompt",
})  # fmt: skip
NOTIFICATIONS = frozenset({"session/cancel"})
_APP_OPEN_TIMEOUT_S = 60.0
_APP_CLOSE_GRACE_S = 5.0


def run(startup: Startup, unread: bytes, ended: bool, answered: Initialized | None) -> int:
    """Serve stdio until it ends or a stop signal, after ``entry.serve`` read ``unread`` (and EOF if ``ended``)
    from it and gave the ``answered`` initialize, if any; the exit code (``Lifecycle.exit_code``)."""
    return anyio.run(_serve, startup, unread, ended, answered)


async def _serve(startup: Startup, unread: bytes, ended: bool, answered: Initialized | None) -> int:
    from awaken_stdio.protocols.stdio import open_stdio

    peer = AcpPeer(watch_parent=True)
    lifecycle = Lifecycle(peer)
    front = AcpFront(startup, peer, lifecycle)
    if answered is not None:
        front.adopt(answered)
    async with open_stdio() as (reader, writer), anyio.create_task_group() as tg:
        await tg.start(lifecycle.watch_signals)
        async with anyio.create_task_group() as app:
            app.start_soon(front.app.run)
            await peer.run(reader, writer, unread=unread, ended=ended)
            # An app still opening finishes first (its store's connection threads would outlive the event loop if
            # cancelled mid-open), then closes; a bounded wait, for an open that hangs.
            front.app.close()
            app.cancel_scope.deadline = anyio.current_time() + _APP_CLOSE_GRACE_S
        tg.cancel_scope.cancel()
    return lifecycle.exit_code()


class AcpFront:
    """Answers ``initialize``; forwards every other method to the ``AcpServer`` of the app opened after that answer."""

    def __init__(
        self, startup: Startup, peer: JsonRpcPeer, lifecycle: Lifecycle | None = None, *, shared: App | None = None
    ) -> None:
        self.startup = startup
        self.peer = peer
        self.lifecycle = lifecycle or Lifecycle(peer)
        self.client: dict[str, Any] = {}  # the clientCapabilities of the last initialize
        self.prompt_caps: dict[str, bool] = {}  # what the last initialize advertised
        self.server: AcpServer | None = None
        self.v2: V2Connection | None = None  # set while the connection speaks v2 (negotiated by initialize)
        self.methods: Methods | None = None  # the table of the version spoken, once the server is built
        self.app = DeferredApp(  # ``shared``: ``serve``'s one app under every connection, open already
            (lambda: shared.settings) if shared is not None else startup.settings,
            failure=_could_not_start,
            on_config_error=self.lifecycle.fail,
            serving=self._serving,
            timeout_s=_APP_OPEN_TIMEOUT_S,
            lent=shared,
        )
        peer.register("initialize", self.initialize)
        for method in REQUESTS | v2.REQUESTS:
            peer.register(method, self._forward(method))
        for method in NOTIFICATIONS | v2.NOTIFICATIONS:
            peer.register_notification(method, self._forward_notification(method))

    @asynccontextmanager
    async def _serving(self, app: App, settings: Settings) -> AsyncGenerator[None]:
        """The ``AcpServer`` of the open app, with the task group its background work runs in."""
        from awaken_stdio.protocols.acp.server import AcpServer

        async with anyio.create_task_group() as tg:
            self.server = AcpServer(
                settings, app, tasks=tg, peer=self.peer, client=self.client, prompt_caps=self.prompt_caps
            )
            self._bind()
            try:
                yield
            finally:
                tg.cancel_scope.cancel()

    def _bind(self) -> None:
        """The method table of the version spoken, over the server (when it is built: else that does it)."""
        if self.server is None:
            return
        from awaken_stdio.protocols.acp.methods import v1_methods, v2_methods

        if self.v2 is not None:
            self.v2.server = self.server
            self.methods = v2_methods(self.v2)
            surface = v2.REQUESTS, v2.NOTIFICATIONS
        else:
            self.methods = v1_methods(self.server)
            surface = REQUESTS, NOTIFICATIONS
        assert (self.methods.requests.methods, self.methods.notifications.methods) == surface, "registered: served"

    def _forward(self, method: str) -> RequestHandler:
        """The handler of ``method`` in the version this connection negotiated; -32601 where it has none."""

        async def forward(params: Params, ctx: RequestContext) -> Any:
            if method not in (v2.REQUESTS if self.v2 is not None else REQUESTS):  # at once, the agent not waited for
                raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            await self.app.ready()
            assert self.methods is not None
            return await self.methods.requests.dispatch(method, params, ctx)

        return forward

    def _forward_notification(self, method: str) -> NotificationHandler:
        async def forward(params: Params, ctx: RequestContext) -> None:
            # before the agent loads, no session exists to act on
            if self.methods is not None and method in self.methods.notifications:
                await self.methods.notifications.dispatch(method, params, ctx)

        return forward

    async def initialize(self, params: Params, ctx: RequestContext) -> dict[str, Any]:
        file = self.server.settings.loaded.file if self.server else self.startup.file  # authenticate re-reads it
        answered = initialize(params, file)
        assert answered is not None  # validated: never left to anyone else
        self.adopt(answered)
        return answered.result

    def adopt(self, answered: Initialized) -> None:
        """What an ``initialize`` negotiated, here or before the event loop; the app is wanted from now on."""
        self.client = answered.client
        self.prompt_caps = answered.prompt_caps
        self._speak(answered.version)
        if self.server is not None:
            self.server.adopt_client(self.client, self.prompt_caps)
        self.app.wanted()

    def _speak(self, version: int) -> None:
        """Serve the negotiated version from now on: v2's methods, updates and batches, or v1's."""
        peer = self.peer
        if version == v2.VERSION and isinstance(peer, AcpPeer):
            from awaken_stdio.protocols.acp.v2.connection import V2Connection

            self.v2 = V2Connection(peer)
        else:
            self.v2 = None
        if isinstance(peer, AcpPeer):
            peer.dialect = self.v2
        peer.batches = self.v2 is not None
        self._bind()


def _could_not_start(problem: str | None) -> JsonRpcError:
    """The error of a request that waited for an app that could not open (or has closed)."""
    return JsonRpcError(INTERNAL_ERROR, f"the agent could not start: {problem}")
