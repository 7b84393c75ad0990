"""``awaken-stdio mcp``: the MCP server, both protocol eras on one stdio process.

It runs on the project's ``JsonRpcPeer`` (framing, concurrency, cancellation, EOF and parent death are the peer's),
with the MCP semantics here: the era, chosen by the first request and then locked (``initialize`` opens the
handshake era, 2024-11-05 to 2025-11-25; a request whose ``_meta`` carries the 2026-07-28 envelope opens the modern
one); the per-request envelope checks; ``resultType`` and the ``serverInfo`` stamp on modern results; ``tools/list``
and its change notifications; logging; ``tools/call``, whose work lives in ``calls.py``; and the Tasks extension's
methods (``tasks.py``).

Start-up order matters to hosts that give a server 5-10 s (DESIGN section 6): a first ``initialize`` is answered
before the event loop starts (``initialize.py``), otherwise the first answer comes from this module, which imports
only the standard library, anyio and the light ``wire.py``; either way the config is only read as TOML
(``app/startup.py``) and ``initialize`` params are checked by hand before it is on the wire. Then the config is
validated (pydantic) and the app opens (store, runtime, tools; ``app.deferred.DeferredApp``, as for ACP) and the
configured MCP servers connect, each under its own timeout, before the first ``tools/list`` is answered, so that
listing is complete. A config the validation rejects fails the requests waiting for the app with -32603 and its
text, then the process exits 2 with one stderr line naming it; SIGTERM and SIGINT stop it as input EOF does, with
the calls in flight cancelled (``lifecycle.py``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from awaken_stdio.app.deferred import DeferredApp
from awaken_stdio.app.startup import Startup, loaded_heavy_modules, server_info
from awaken_stdio.protocols.handlers import HandlerTable, entry, params_object
from awaken_stdio.protocols.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    JsonRpcError,
    JsonRpcPeer,
    Params,
    RequestContext,
    RequestHandler,
)
from awaken_stdio.protocols.lifecycle import Lifecycle
from awaken_stdio.protocols.mcp.initialize import CAPABILITIES, INSTRUCTIONS, Initialized, initialize
from awaken_stdio.protocols.mcp.wire import (
    CLIENT_CAPABILITIES_KEY,
    HEARTBEAT_S,
    LOG_LEVEL_KEY,
    LOG_LEVELS,
    MODERN_VERSIONS,
    PROTOCOL_VERSION_KEY,
    SERVER_INFO_KEY,
    SUBSCRIPTION_ID_KEY,
    TASKS_EXTENSION,
    UNSUPPORTED_PROTOCOL_VERSION,
    LogLevel,
    Request,
)

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectSendStream

    from awaken_stdio.app.app import App, Settings
    from awaken_stdio.protocols.mcp.calls import CallRunner, ToolCall
    from awaken_stdio.protocols.mcp.catalog import Catalog
    from awaken_stdio.protocols.mcp.library import Library
    from awaken_stdio.protocols.mcp.params import CallToolParams, ListenParams, ListParams, SetLevelParams
    from awaken_stdio.protocols.mcp.tasks import TaskBoard

__all__ = ["McpServer", "run"]

log = logging.getLogger(__name__)

Era = Literal["legacy", "modern"]

DEFAULT_PAGE_SIZE = 100
TOOLS_TTL_MS = 60_000  # a client that does not listen for changes refetches the list within a minute
DISCOVER_TTL_MS = 600_000  # what discover describes is fixed for the life of the process
_LEGACY_ONLY = frozenset({"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"})
_TASKS = ("tasks/get", "tasks/update", "tasks/cancel")  # the Tasks extension's methods (``tasks.py``)
_MODERN_ONLY = frozenset({"server/discover", "subscriptions/listen", *_TASKS})
# The methods served once the app is open, validated by their params models (``_app_methods``); the first-answer
# methods (``initialize``, ``ping``, ``server/discover``) are served before pydantic loads (``_first``).
_APP_METHODS = frozenset({
    "logging/setLevel", "subscriptions/listen", "tools/list", "tools/call", "resources/list", "resources/read",
    "resources/templates/list", "resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
    "completion/complete", *_TASKS,
})  # fmt: skip


class McpServer:
    """One MCP server process: its handlers on ``peer``, and the app it opens after the first answer."""

    def __init__(
        self,
        startup: Startup,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        heartbeat_s: float = HEARTBEAT_S,
        watch_parent: bool = True,
        poll_s: float = 1.0,
        shared: App | None = None,
    ) -> None:
        self.startup = startup
        self.shared = shared  # ``serve``: the app every connection shares, already open (else opened here)
        self.peer = JsonRpcPeer(watch_parent=watch_parent)
        self.lifecycle = Lifecycle(self.peer)
        self.page_size = page_size
        self.heartbeat_s = heartbeat_s
        self.poll_s = poll_s  # how often subscribed resources are checked for changes
        self.era: Era | None = None
        self._version: str | None = None  # the handshake era's negotiated version
        self._client_capabilities: dict[str, Any] = {}
        self._log_level: LogLevel | None = None
        self._gate = DeferredApp(
            (lambda: shared.settings) if shared is not None else lambda: self._startup().settings(),
            failure=_could_not_start,
            on_config_error=self.lifecycle.fail,
            serving=self._serving,
            lent=shared,
        )
        self._app: App | None = None
        self._runner: CallRunner | None = None
        self._catalog: Catalog | None = None
        self._library: Library | None = None
        self._tasks: TaskBoard | None = None
        self._calls: dict[Any, ToolCall] = {}
        self._listeners: dict[Any, MemoryObjectSendStream[tuple[str, dict[str, Any]]]] = {}
        self._first = HandlerTable(Request, [
            entry("initialize", None, self._initialize),
            entry("ping", None, self._ping),
            entry("server/discover", None, self._discover),
        ])  # fmt: skip
        self._methods: HandlerTable[Request] | None = None  # ``_APP_METHODS``, while the app is open
        self._register()

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def run(
        self, reader: anyio.abc.ByteReceiveStream, writer: anyio.abc.ByteSendStream, *, unread: bytes = b"",
        ended: bool = False,
    ) -> None:  # fmt: skip
        """Serve until input EOF (or parent death), then close the app; ``unread`` and ``ended`` as the peer's."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._gate.run)
            try:
                await self.peer.run(reader, self._gate.announcing(writer), unread=unread, ended=ended)
            finally:
                self._gate.close()

    def adopt(self, answered: Initialized) -> None:
        """An ``initialize`` answered before the event loop: the handshake era it opened, and the app wanted."""
        self.era = "legacy"
        self._version, self._client_capabilities = answered.version, answered.capabilities
        self._gate.wanted()

    @asynccontextmanager
    async def _serving(self, app: App, settings: Settings) -> AsyncGenerator[None]:
        """What this server keeps while the app is open: the tool runner and catalog, the resource and prompt
        library (watching subscribed resources), and the client's model for ``provider = "mcp_sampling"``."""
        import jsonschema  # noqa: F401  # pyright: ignore[reportUnusedImport]  # loaded now, not on the first tools/call

        from awaken_stdio.protocols.mcp.approvals import StateSeal, load_seal_key
        from awaken_stdio.protocols.mcp.calls import CallRunner
        from awaken_stdio.protocols.mcp.channel import ClientModel
        from awaken_stdio.protocols.mcp.library import Library
        from awaken_stdio.protocols.mcp.tasks import TaskBoard

        seal = StateSeal(await load_seal_key(app.store))
        self._app = app
        self._runner = CallRunner(app, seal, self.peer, permission=settings.loaded.config.mcp.permission)
        app.tool_listeners.append(self._on_app_tools_changed)
        self._rebuild_catalog()
        self._library = Library(app, self.peer, page_size=self.page_size, poll_s=self.poll_s)
        own = self.shared is None  # the client's model serves a process of its own only, never a shared one
        if own:  # provider = "mcp_sampling": every run of this app's gets it in its environment
            app.sampling = ClientModel(self.peer, self._handshake_capabilities)
        elif app.sampling is None:  # a shared app: 2026-era rounds only, no connection's handshake serves it
            app.sampling = ClientModel(None, lambda: None)
        try:
            async with anyio.create_task_group() as tg:
                self._tasks = TaskBoard(app, self._library, tg)  # runs a tasks/update resumes go on in tg
                self._methods = self._app_methods(self._library, self._tasks)
                tg.start_soon(self._library.watch.run)
                yield
                tg.cancel_scope.cancel()
        finally:
            app.tool_listeners.remove(self._on_app_tools_changed)
            if own:
                app.sampling = None

    def _startup(self) -> Startup:
        """The startup, or with no config file and no API key, one whose agent uses the client's model (if it
        samples, in either era): the host's model is then the default (``provider = "mcp_sampling"``)."""
        file = self.startup.file
        sampling = self._client_capabilities.get("sampling")  # the handshake's, or the first 2026-era request's
        if file.path is not None or file.data or not isinstance(sampling, dict):
            return self.startup
        log.info("no config file and no API key: the agent 'default' uses the MCP client's model (mcp_sampling)")
        agent = {"model": "default", "expose_mcp": True, "tools": ["*"] if "tools" in sampling else []}
        data = {"models": {"default": {"provider": "mcp_sampling"}}, "agents": {"default": agent}}
        return replace(self.startup, file=replace(file, data=data, source="<no config file: the client's model>"))

    def _handshake_capabilities(self) -> dict[str, Any] | None:
        return self._client_capabilities if self.era == "legacy" and self._version is not None else None

    async def _app_ready(self) -> CallRunner:
        app = await self._gate.ready()
        await app.loading.settle()  # tool modules and MCP servers still loading: waited for once, bounded
        assert self._runner is not None
        return self._runner

    # -- tool list ----------------------------------------------------------------------------------------------

    def _rebuild_catalog(self) -> bool:
        """Rebuild the published list from the runtime; True when it changed."""
        from awaken_stdio.protocols.mcp.catalog import Catalog

        assert self._app is not None
        runtime = self._app.runtime
        catalog = Catalog.build(runtime.tools, runtime.agents)
        changed = self._catalog is not None and catalog.listings != self._catalog.listings
        self._catalog = catalog
        return changed

    async def _on_app_tools_changed(self) -> None:
        if self._gate.app is not None and self._rebuild_catalog():
            await self.tools_changed()

    async def tools_changed(self) -> None:
        """Tell the client the tool list changed: a notification (handshake era) or each listen stream (modern)."""
        if self.era == "legacy" and self._version is not None:
            try:
                await self.peer.notify("notifications/tools/list_changed")
            except JsonRpcError:
                pass
        for stream in list(self._listeners.values()):
            try:
                stream.send_nowait(("notifications/tools/list_changed", {}))
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass

    # -- dispatch -----------------------------------------------------------------------------------------------

    def _register(self) -> None:
        for method in self._first.methods | _APP_METHODS:
            self.peer.register(method, self._route(method))
        self.peer.register_notification("notifications/cancelled", self._cancelled)
        self.peer.register_notification("notifications/initialized", self._initialized)

    def _app_methods(self, library: Library, tasks: TaskBoard) -> HandlerTable[Request]:
        """The table of ``_APP_METHODS``, built once the app is open (pydantic has loaded): what serves each."""
        from awaken_stdio.protocols.mcp import params as p

        table = HandlerTable(Request, [
            entry("logging/setLevel", p.SetLevelParams, self._set_level),
            entry("subscriptions/listen", p.ListenParams, self._listen),
            entry("tools/list", p.ListParams, self._list_tools),
            entry("tools/call", p.CallToolParams, self._call_tool),
            entry("resources/list", p.ListParams, library.list_resources),
            entry("resources/templates/list", p.ListParams, library.list_templates),
            entry("resources/read", p.ResourceParams, library.read),
            entry("resources/subscribe", p.ResourceParams, library.subscribe),
            entry("resources/unsubscribe", p.ResourceParams, library.unsubscribe),
            entry("prompts/list", p.ListParams, library.list_prompts),
            entry("prompts/get", p.GetPromptParams, library.get_prompt),
            entry("completion/complete", p.CompleteParams, library.complete),
            entry("tasks/get", p.TaskParams, tasks.get),
            entry("tasks/update", p.TaskParams, tasks.update),
            entry("tasks/cancel", p.TaskParams, tasks.cancel),
        ])  # fmt: skip
        assert table.methods == _APP_METHODS, "the methods registered on the peer are the ones the table serves"
        return table

    def _route(self, method: str) -> RequestHandler:
        async def serve(params: Params, ctx: RequestContext) -> Any:
            args = params_object(params)
            assert ctx.request_id is not None
            request = self._admit(method, args, ctx.request_id)
            if not self._gate.is_wanted:
                log.debug("answering %s; heavy modules loaded: %s", method, loaded_heavy_modules())
            if method in self._first:
                result = await self._first.dispatch(method, args, request)
            else:
                await self._gate.ready()  # the app's table: built, with what it serves, once the app is open
                assert self._methods is not None
                result = await self._methods.dispatch(method, args, request)
            if request.era == "modern":
                result.setdefault("resultType", "complete")
                meta = result.get("_meta")
                result["_meta"] = {**(meta if isinstance(meta, dict) else {}), SERVER_INFO_KEY: server_info()}
            return result

        return serve

    def _admit(self, method: str, params: dict[str, Any], request_id: Any) -> Request:
        """The era checks, in the SDK's order; synchronous, so the first request to arrive decides the era."""
        meta = params.get("_meta")
        enveloped = method != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_KEY in meta
        first = self.era is None
        if self.era is None:
            self.era = "modern" if enveloped else "legacy"
            log.info("serving the %s protocol era", "2026-07-28" if enveloped else "handshake")
        if self.era == "modern":
            if method == "initialize":
                requested = params.get("protocolVersion")
                data: dict[str, Any] = {"supported": list(MODERN_VERSIONS)}
                if isinstance(requested, str):
                    data["requested"] = requested
                raise JsonRpcError(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "this process serves the 2026-07-28 protocol; the initialize handshake is not accepted",
                    data,
                )
            version, capabilities = _envelope(meta)
            if first:  # what the app opened after the first answer expects (``_startup``)
                self._client_capabilities = capabilities
            if method in _LEGACY_ONLY:
                raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
            level = meta.get(LOG_LEVEL_KEY) if isinstance(meta, dict) else None
            return Request(
                era="modern",
                version=version,
                request_id=request_id,
                client_capabilities=capabilities,
                progress_token=meta.get("progressToken") if isinstance(meta, dict) else None,
                log_level=level if level in LOG_LEVELS else None,
            )
        if enveloped:
            raise JsonRpcError(
                INVALID_REQUEST,
                "this process serves the handshake protocol era; requests carrying the 2026-07-28 envelope are "
                "not accepted on it",
            )
        if method in _MODERN_ONLY:
            raise JsonRpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        if self._version is None and method not in ("initialize", "ping"):
            raise JsonRpcError(INVALID_PARAMS, "Invalid request parameters: initialize first")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return Request(
            era="legacy",
            version=self._version or "",
            request_id=request_id,
            client_capabilities=self._client_capabilities,
            progress_token=token,
            log_level=self._log_level,
        )

    # -- handlers -----------------------------------------------------------------------------------------------

    async def _initialize(self, params: dict[str, Any], request: Request) -> dict[str, Any]:
        answered = initialize(params)
        assert answered is not None  # validated: never left to anyone else
        self._version, self._client_capabilities = answered.version, answered.capabilities
        return answered.result

    async def _ping(self, params: dict[str, Any], request: Request) -> dict[str, Any]:
        return {}

    async def _set_level(self, p: SetLevelParams, request: Request) -> dict[str, Any]:
        self._log_level = p.level
        return {}

    async def _discover(self, params: dict[str, Any], request: Request) -> dict[str, Any]:
        return {
            "supportedVersions": list(MODERN_VERSIONS),
            "capabilities": {**CAPABILITIES, "extensions": {TASKS_EXTENSION: {}}},
            "serverInfo": server_info(),
            "instructions": INSTRUCTIONS,
            "ttlMs": DISCOVER_TTL_MS,
            "cacheScope": "private",
        }

    async def _list_tools(self, p: ListParams, request: Request) -> dict[str, Any]:
        from awaken_stdio.protocols.mcp.catalog import InvalidCursor

        await self._app_ready()
        assert self._catalog is not None
        try:
            tools, next_cursor = self._catalog.page(p.cursor, self.page_size)
        except InvalidCursor:
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: unknown cursor") from None
        result: dict[str, Any] = {"tools": tools}
        if next_cursor is not None:
            result["nextCursor"] = next_cursor
        if request.era == "modern":
            result.update(ttlMs=TOOLS_TTL_MS, cacheScope="private")
        return result

    async def _call_tool(self, p: CallToolParams, request: Request) -> dict[str, Any]:
        from awaken_stdio.protocols.mcp.approvals import InvalidState
        from awaken_stdio.protocols.mcp.calls import ToolCall

        runner = await self._app_ready()
        assert self._catalog is not None
        entry = self._catalog.by_name.get(p.name)
        if entry is None:
            raise JsonRpcError(INVALID_PARAMS, f"Unknown tool: {p.name}")
        state = None
        if request.era == "modern" and p.request_state is not None:
            try:
                state = runner.seal.unseal(p.request_state, p.name, p.arguments)
            except InvalidState as exc:
                log.warning("requestState rejected for %s: %s", p.name, exc)
                raise JsonRpcError(
                    INVALID_PARAMS, "Invalid or expired requestState", {"reason": "invalid_request_state"}
                ) from None
        problem = self._catalog.check_arguments(entry, p.arguments or {})
        if problem is not None:
            return {"content": [{"type": "text", "text": problem}], "isError": True}
        call = self._calls[request.request_id] = ToolCall(self.peer, request, heartbeat_s=self.heartbeat_s)
        try:
            return await runner.call(entry, p, call, state)
        finally:
            call.close()
            del self._calls[request.request_id]

    async def _listen(self, p: ListenParams, request: Request) -> dict[str, Any]:
        wanted = p.notifications
        key = request.request_id
        meta = {SUBSCRIPTION_ID_KEY: key}
        send, receive = anyio.create_memory_object_stream[tuple[str, dict[str, Any]]](math.inf)
        honored: dict[str, Any] = {}
        if wanted.tools_list_changed:
            honored["toolsListChanged"] = True
            self._listeners[key] = send
        watched: list[str] = []
        tasks: list[str] = []

        async def updated(uri: str) -> None:
            send.send_nowait(("notifications/resources/updated", {"uri": uri}))

        try:
            if wanted.resource_subscriptions:
                await self._app_ready()
                assert self._library is not None
                watched = await self._library.listen(wanted.resource_subscriptions, key, updated)
                honored["resourceSubscriptions"] = watched
            if wanted.task_ids:
                from awaken_stdio.protocols.mcp.tasks import require_tasks

                require_tasks(request, "task notifications")
                await self._app_ready()
                assert self._tasks is not None
                tasks = await self._tasks.listen(wanted.task_ids, key, lambda m, note: send.send_nowait((m, note)))
                honored["taskIds"] = tasks
            await self.peer.notify(
                "notifications/subscriptions/acknowledged", {"notifications": honored, "_meta": meta}
            )
            async with receive:
                async for method, note in receive:
                    await self.peer.notify(method, {**note, "_meta": meta})
        finally:
            self._listeners.pop(key, None)
            if self._library is not None:
                self._library.unlisten(watched, key)
            if self._tasks is not None:
                self._tasks.unlisten(tasks, key)
            send.close()
        return {"_meta": meta}

    async def _cancelled(self, params: Params, ctx: RequestContext) -> None:
        if not isinstance(params, dict):
            return
        from awaken_stdio.protocols.mcp.params import CancelledParams

        p = CancelledParams.model_validate(params)
        call = self._calls.get(p.request_id)
        if call is not None:
            call.cancelled_by_client()  # before the scope is cancelled: the run's last events must not report
        if self.peer.cancel_request(p.request_id):
            log.info("request %r cancelled by the client: %s", p.request_id, p.reason or "no reason given")

    async def _initialized(self, params: Params, ctx: RequestContext) -> None:
        log.debug("the client finished initialization")


def _envelope(meta: Any) -> tuple[str, dict[str, Any]]:
    """The modern envelope's version and capabilities, or the -32602 / -32022 that rejects the request."""
    if not isinstance(meta, dict):
        raise JsonRpcError(
            INVALID_PARAMS,
            f"params._meta must be an object carrying the required {PROTOCOL_VERSION_KEY!r} and "
            f"{CLIENT_CAPABILITIES_KEY!r} envelope keys",
        )
    missing = [key for key in (PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY) if key not in meta]
    if missing:
        raise JsonRpcError(
            INVALID_PARAMS, f"params._meta is missing the required envelope key(s): {', '.join(missing)}"
        )
    version, capabilities = meta[PROTOCOL_VERSION_KEY], meta[CLIENT_CAPABILITIES_KEY]
    if not isinstance(version, str) or not isinstance(capabilities, dict):
        raise JsonRpcError(INVALID_PARAMS, "params._meta: the version must be a string and the capabilities an object")
    if version not in MODERN_VERSIONS:
        raise JsonRpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            f"Unsupported protocol version: {version}",
            {"supported": list(MODERN_VERSIONS), "requested": version},
        )
    return version, capabilities


def _could_not_start(problem: str | None) -> JsonRpcError:
    """The error of a request that waited for an app that could not open (or has closed)."""
    message = f"awaken-stdio could not start: {problem}" if problem is not None else "the server is shutting down"
    return JsonRpcError(INTERNAL_ERROR, message)


def run(startup: Startup, unread: bytes, ended: bool, answered: Initialized | None) -> int:
    """Serve stdin/stdout until EOF or a stop signal, after ``entry.serve`` read ``unread`` (and EOF if
    ``ended``) from it and gave the ``answered`` initialize, if any; the exit code."""
    return anyio.run(_serve_stdio, startup, unread, ended, answered, backend="asyncio")


async def _serve_stdio(startup: Startup, unread: bytes, ended: bool, answered: Initialized | None) -> int:
    from awaken_stdio.protocols.stdio import open_stdio

    server = McpServer(startup)
    if answered is not None:
        server.adopt(answered)
    async with open_stdio() as (reader, writer), anyio.create_task_group() as tg:
        await tg.start(server.lifecycle.watch_signals)
        await server.run(reader, writer, unread=unread, ended=ended)
        tg.cancel_scope.cancel()
    return server.lifecycle.exit_code()
