"""Every configured MCP server's connection and tools: one supervisor task per server connects, lists, publishes
its tools, and restarts it after a failure under the restart policy.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.tools import Tool
from awaken_stdio.tools.mcp.spec import McpServerSpec, McpServerStatus, RestartPolicy, missing_command
from awaken_stdio.tools.mcp.tool import McpTool, Server, exposed_name, safe_name
from awaken_stdio.tools.mcp.transport import Link, Lost, Signal, describe, open_transport

if TYPE_CHECKING:
    import mcp_types
    from anyio.streams.memory import MemoryObjectReceiveStream
    from mcp.client.session import ClientSession

__all__ = ["McpToolsets", "OnChange", "Server", "open_mcp_toolsets"]

logger = logging.getLogger("awaken_stdio.tools.mcp")  # one logger for the MCP client, whichever module logs

_MAX_PAGES = 1000  # a server whose cursors never end cannot hang a listing


OnChange = Callable[[McpServerStatus], Awaitable[None]]


class McpToolsets:
    """Every configured MCP server's connection and tools. Build it with ``open_mcp_toolsets`` or ``run`` it.

    ``on_change`` is awaited after each status change (connecting, ready, failed, a new listing) that happens once
    the first connections are settled, or from the first one with ``eager`` (for a caller that does not wait for
    them); read the new tool set from ``tools()``. It runs in the server's supervisor: a slow callback delays that
    server only, and an exception is logged, not raised.
    """

    def __init__(
        self,
        specs: Iterable[McpServerSpec],
        *,
        on_change: OnChange | None = None,
        restart: RestartPolicy | None = None,
        eager: bool = False,
    ) -> None:
        self._on_change = on_change
        self._restart = restart or RestartPolicy()
        self._servers: dict[str, Server] = {}
        self._started = False
        self._announcing = eager
        prefixes: dict[str, str] = {}
        for spec in specs:
            prefix = safe_name(spec.name)
            if prefix in prefixes:
                raise ConfigError(
                    f"MCP servers {prefixes[prefix]!r} and {spec.name!r} have the same tool prefix {prefix!r}"
                )
            prefixes[prefix] = spec.name
            self._servers[spec.name] = Server(
                spec=spec,
                prefix=prefix,
                status=McpServerStatus(name=spec.name, transport=spec.transport, state="connecting"),
            )

    def tools(self) -> list[Tool]:
        """The tools of every ready server, sorted by name."""
        tools = [tool for server in self._servers.values() for tool in server.tools.values()]
        return sorted(tools, key=lambda t: t.name)

    def statuses(self) -> list[McpServerStatus]:
        return [server.status for server in self._servers.values()]

    def status(self, name: str) -> McpServerStatus:
        return self._servers[name].status

    async def run(self, *, task_status: anyio.abc.TaskStatus[McpToolsets] = anyio.TASK_STATUS_IGNORED) -> None:
        """Supervise every server until cancelled; ``started`` once each has connected or failed once."""
        if self._started:
            raise RuntimeError("McpToolsets.run() can be called only once")
        self._started = True
        try:
            await _load_client()
            async with anyio.create_task_group() as tg:
                for server in self._servers.values():
                    tg.start_soon(self._supervise, server)
                for server in self._servers.values():
                    await server.settled.wait()
                self._announcing = True
                task_status.started(self)
                await anyio.sleep_forever()  # even when every supervisor gave up: their statuses stay readable
        finally:
            for server in self._servers.values():
                server.tools = {}
                server.status = replace(server.status, state="stopped", tools=(), retry_in_s=None)

    async def _supervise(self, server: Server) -> None:
        failures = 0
        while True:
            await self._update(server, state="connecting", retry_in_s=None)
            started = anyio.current_time()
            reason, was_ready = await self._connect(server)
            was_stable = was_ready and anyio.current_time() - started >= self._restart.stable_s
            failures = 0 if was_stable else failures + 1
            missing = None if was_ready else missing_command(server.spec)  # no restart can help: not retried
            reason = missing or reason
            logger.warning("MCP server %s: %s", server.spec.name, reason)
            server.tools = {}
            delay = None if missing or failures > self._restart.max_failures else self._restart.delay(failures)
            await self._update(server, state="failed", error=reason, tools=(), retry_in_s=delay)
            server.settled.set()
            if delay is None:
                return
            await anyio.sleep(delay)
            server.status = replace(server.status, restarts=server.status.restarts + 1)  # told with "connecting"

    async def _connect(self, server: Server) -> tuple[str, bool]:
        """Connect, list and serve; why the connection ended, and whether it was ever ready."""
        from mcp.client.session import ClientSession

        spec = server.spec
        send, signals = anyio.create_memory_object_stream[Signal](math.inf)
        link = Link(signals=send)

        async def on_message(message: Any) -> None:
            if isinstance(message, Exception):
                logger.warning("MCP server %s sent something unreadable: %s", spec.name, message)
            elif getattr(message, "method", None) == "notifications/tools/list_changed":
                link.relist()

        try:
            with send, signals, anyio.CancelScope(deadline=anyio.current_time() + spec.timeout_s) as connecting:
                async with (
                    open_transport(spec, link) as (read, write),
                    ClientSession(read, write, message_handler=on_message, client_info=_client_info()) as session,
                ):
                    await session.initialize()
                    listed = await _list_all(session)
                    connecting.deadline = math.inf
                    link.session, link.ready, server.link = session, True, link
                    try:
                        await self._publish(server, listed)
                        return await self._serve(server, session, signals), True
                    finally:
                        server.link = link.session = None
            return link.failure(TimeoutError(f"no answer within {spec.timeout_s:g} s")), False
        except Exception as exc:  # whatever broke the connection is reported and retried, never raised
            return (link.lost_reason or describe(exc), True) if link.ready else (link.failure(exc), False)

    async def _serve(self, server: Server, session: ClientSession, signals: MemoryObjectReceiveStream[Signal]) -> str:
        while True:
            signal = await signals.receive()
            if isinstance(signal, Lost):
                return signal.reason
            try:
                with anyio.fail_after(server.spec.timeout_s):
                    listed = await _list_all(session)
            except Exception as exc:
                return f"tools/list failed: {describe(exc)}"
            await self._publish(server, listed)

    async def _publish(self, server: Server, listed: list[mcp_types.Tool]) -> None:
        taken: set[str] = set()
        tools = [McpTool(server, remote, exposed_name(server.prefix, remote.name, taken)) for remote in listed]
        server.tools = {tool.name: tool for tool in tools}
        server.settled.set()
        await self._update(server, state="ready", error=None, tools=tuple(sorted(server.tools)), retry_in_s=None)

    async def _update(self, server: Server, **changes: Any) -> None:
        server.status = replace(server.status, **changes)
        if self._announcing and self._on_change is not None:
            try:
                await self._on_change(server.status)
            except Exception:
                logger.exception("the MCP on_change callback failed for %s", server.spec.name)


@asynccontextmanager
async def open_mcp_toolsets(
    specs: Iterable[McpServerSpec],
    *,
    on_change: OnChange | None = None,
    restart: RestartPolicy | None = None,
    wait: bool = True,
) -> AsyncGenerator[McpToolsets]:
    """Connect every server concurrently and yield once each is ready or has failed (at once without ``wait``: the
    servers connect in the background, each change told to ``on_change``); close them all on exit."""
    toolsets = McpToolsets(specs, on_change=on_change, restart=restart, eager=not wait)
    async with anyio.create_task_group() as tg:
        if wait:
            await tg.start(toolsets.run)
        else:
            tg.start_soon(toolsets.run)
        try:
            yield toolsets
        finally:
            tg.cancel_scope.cancel()


async def _load_client() -> None:
    """Import the MCP SDK's client off the event loop: it takes a second or two, which every request being answered
    meanwhile would wait for otherwise."""
    import importlib

    from awaken_stdio.tools._off_loop import off_loop

    def load() -> None:
        for module in ("mcp.client.session", "mcp.shared.message", "mcp_types"):
            importlib.import_module(module)

    await off_loop(load, "import the MCP client")


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    from mcp_types import PaginatedRequestParams

    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
        if cursor in seen:
            raise RuntimeError(f"tools/list repeated the cursor {cursor!r}")
        seen.add(cursor)
    raise RuntimeError(f"tools/list went on for more than {_MAX_PAGES} pages")


def _client_info() -> mcp_types.Implementation:
    from mcp_types import Implementation

    from awaken_stdio._version import __version__

    return Implementation(name="awaken-stdio", version=__version__)
