"""Assembling the application both protocol servers (and the CLI) run: config, store, runtime, tools, plugins.

Two stages, because start-up speed matters: :func:`load_settings` is cheap (TOML + pydantic; the protocol servers
answer their first request from the TOML alone, ``protocols/boot.py``, and build these settings after it);
:func:`open_app` opens the store (database drivers), registers the built-in tools, the ``@tool`` modules and the
permission plugin, starts the mailbox service (``mailbox/service.py``) in a task group it owns, and is entered only
after that first answer is on the wire.

Every surface delivers approvals through :meth:`App.decide`, and should start runs with :meth:`App.run`: both go
through the mailbox, which is what makes a decision resume a run exactly once across processes sharing the store.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import anyio

from awaken_stdio.config import LoadedConfig, validate_config
from awaken_stdio.config_file import read_config_file, store_url

if TYPE_CHECKING:  # the rest loads in open_app, after the first answer
    from awaken_stdio.contract.stores import Store
    from awaken_stdio.contract.suspension import ToolCallResume
    from awaken_stdio.mailbox.service import MailboxConfig, MailboxService
    from awaken_stdio.runtime.activation import AgentRunResult, EventSink, RunActivation
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.tools.mcp_client import McpServerStatus, McpToolsets

__all__ = ["App", "Settings", "load_settings", "open_app"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    """What a process was started with, resolved: the config, the store URL, the working directory."""

    loaded: LoadedConfig
    store_url: str
    cwd: str


def load_settings(config: str | None = None, store: str | None = None, cwd: str | None = None) -> Settings:
    """The config file (``--config``/env/default), then ``--store`` > env > config > the default SQLite file."""
    file = read_config_file(config)
    loaded = validate_config(file)
    return Settings(loaded, store_url(store, file), os.path.abspath(cwd or os.getcwd()))


@dataclass(slots=True)
class App:
    settings: Settings
    store: Store
    runtime: AgentRuntime
    mailbox: MailboxService
    toolsets: McpToolsets | None = None  # the configured [mcp_servers], their tools kept in runtime.tools
    tool_listeners: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def tools_changed(self) -> None:
        """Called when a configured MCP server's tools change: tell every listener (the MCP server's list_changed)."""
        for listener in list(self.tool_listeners):
            await listener()

    async def decide(
        self,
        run_id: str,
        decisions: list[tuple[str, ToolCallResume]],
        sink: EventSink | None = None,
        context: RunActivation | None = None,
    ) -> AgentRunResult | None:
        """Deliver decisions for a waiting run, from any surface (ACP, MCP, CLI), exactly once.

        The decisions are recorded in the mailbox first. When no live process holds the run's thread, the run is
        resumed here and its result returned (events to ``sink``); when one does (the run waits there, or live in
        this process), that process continues it and this returns ``None``. Unknown or finished runs raise
        ``InvalidResume``; a target that is not one of the run's pending calls raises ``DecisionTargetNotFound``.
        """
        return await self.mailbox.decide(run_id, decisions, sink, context)

    async def run(self, activation: RunActivation, sink: EventSink | None = None) -> AgentRunResult:
        """Run through the mailbox, holding the thread's claim: with ``wait_for_decisions`` a run that suspends
        keeps it and continues live when a decision arrives from any surface of any process."""
        return await self.mailbox.submit(activation, sink)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run: running or waiting here, waiting in another process, or waiting in the store."""
        return await self.mailbox.cancel(run_id)


@asynccontextmanager
async def open_app(
    settings: Settings, *, serve: bool = True, mailbox: MailboxConfig | None = None
) -> AsyncIterator[App]:
    """Open the store, build the runtime with every configured tool and plugin, and run the mailbox service until
    exit (then the store closes). ``serve=False`` (the CLI) handles only this process's own dispatches and never
    picks up other processes' queued work."""
    from awaken_stdio.config import build_runtime
    from awaken_stdio.mailbox.service import MailboxConfig, MailboxService
    from awaken_stdio.runtime.observability import LogSink, ObservabilityPlugin, otel_from_env
    from awaken_stdio.runtime.permission import PermissionPlugin
    from awaken_stdio.stores import open_store
    from awaken_stdio.tools.discovery import tools_from_entry_points, tools_from_module

    config = settings.loaded.config
    tracer_provider = otel_from_env()
    async with AsyncExitStack() as stack:
        if tracer_provider is not None:
            stack.callback(tracer_provider.shutdown)  # flushes the spans
        store = await stack.enter_async_context(open_store(settings.store_url))
        runtime = build_runtime(settings.loaded, store=store)
        if config.tools.builtin:
            from awaken_stdio.tools.builtin import builtin_tools

            for tool in builtin_tools():
                runtime.add_tool(tool)
        for module in config.tools.modules:
            for tool in tools_from_module(module, settings.loaded.base_dir):
                runtime.add_tool(tool)
        for tool in tools_from_entry_points():
            runtime.add_tool(tool, replace=True)
        runtime.add_plugin(PermissionPlugin(store))
        providers = {model_id: model.provider for model_id, model in config.models.items()}
        runtime.add_plugin(ObservabilityPlugin(LogSink(), tracer_provider, providers=providers))
        service = MailboxService(runtime, replace(mailbox or MailboxConfig(), dispatch_queued=serve))
        app = App(settings, store, runtime, service)
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            try:
                async with AsyncExitStack() as servers:  # closed inside the task group: cancel scopes nest
                    if config.mcp_servers:
                        app.toolsets = await servers.enter_async_context(_configured_servers(app))
                    yield app
            except Exception as exc:  # raised after the group: callers see it, not an ExceptionGroup around it
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure


@asynccontextmanager
async def _configured_servers(app: App) -> AsyncIterator[McpToolsets]:
    """Connect ``[mcp_servers]`` (each under its own timeout) and keep their tools in ``app.runtime.tools``."""
    from awaken_stdio.tools.mcp_client import configured_specs, open_mcp_toolsets

    published: set[str] = set()

    def sync() -> None:
        names = {t.name for t in toolsets.tools()}
        for gone in published - names:
            app.runtime.remove_tool(gone)
        for tool in toolsets.tools():
            app.runtime.add_tool(tool, replace=True)
        published.clear()
        published.update(names)

    async def on_change(status: McpServerStatus) -> None:
        log.info("MCP server %s: %s%s", status.name, status.state, f" ({status.error})" if status.error else "")
        sync()
        await app.tools_changed()

    async with open_mcp_toolsets(
        configured_specs(app.settings.loaded.config.mcp_servers), on_change=on_change
    ) as toolsets:
        sync()
        for status in toolsets.statuses():
            if status.state != "ready":
                log.warning("MCP server %s is not available: %s", status.name, status.error)
        yield toolsets
