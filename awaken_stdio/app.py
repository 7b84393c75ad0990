"""Assembling the application both protocol servers (and the CLI) run: config, store, runtime, tools, plugins.

Two stages, because start-up speed matters: :func:`load_settings` is cheap (TOML + pydantic) and is all a server
needs to answer ``initialize``; :func:`open_app` opens the store (database drivers), registers the built-in tools,
the ``@tool`` modules and the permission plugin, starts the mailbox service (``mailbox/service.py``) in a task group
it owns, and is entered only after that first answer is on the wire.

Every surface delivers approvals through :meth:`App.decide`, and should start runs with :meth:`App.run`: both go
through the mailbox, which is what makes a decision resume a run exactly once across processes sharing the store.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import anyio

from awaken_stdio.config import STORE_ENV, LoadedConfig, build_runtime, load_config
from awaken_stdio.contract.errors import ConfigError
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import Tool
from awaken_stdio.runtime.activation import AgentRunResult, EventSink, RunActivation

if TYPE_CHECKING:
    from awaken_stdio.contract.stores import Store
    from awaken_stdio.mailbox.service import MailboxConfig, MailboxService
    from awaken_stdio.runtime.agent_runtime import AgentRuntime

__all__ = ["App", "Settings", "load_settings", "open_app", "tools_from_module"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Settings:
    """What a process was started with, resolved: the config, the store URL, the working directory."""

    loaded: LoadedConfig
    store_url: str
    cwd: str


def load_settings(config: str | None = None, store: str | None = None, cwd: str | None = None) -> Settings:
    """The config file (``--config``/env/default), then ``--store`` > env > config > the default SQLite file."""
    from awaken_stdio.stores import default_store_url, parse_store_url

    loaded = load_config(config)
    url = store or os.environ.get(STORE_ENV) or loaded.config.store.url or default_store_url()
    parse_store_url(url)  # a malformed URL is a usage error now, not after the first request
    return Settings(loaded, url, os.path.abspath(cwd or os.getcwd()))


@dataclass(slots=True)
class App:
    settings: Settings
    store: Store
    runtime: AgentRuntime
    mailbox: MailboxService

    async def decide(
        self, run_id: str, decisions: list[tuple[str, ToolCallResume]], sink: EventSink | None = None
    ) -> AgentRunResult | None:
        """Deliver decisions for a waiting run, from any surface (ACP, MCP, CLI), exactly once.

        The decisions are recorded in the mailbox first. When no live process holds the run's thread, the run is
        resumed here and its result returned (events to ``sink``); when one does (the run waits there, or live in
        this process), that process continues it and this returns ``None``. Unknown or finished runs raise
        ``InvalidResume``; a target that is not one of the run's pending calls raises ``DecisionTargetNotFound``.
        """
        return await self.mailbox.decide(run_id, decisions, sink)

    async def run(self, activation: RunActivation, sink: EventSink | None = None) -> AgentRunResult:
        """Run through the mailbox, holding the thread's claim: with ``wait_for_decisions`` a run that suspends
        keeps it and continues live when a decision arrives from any surface of any process."""
        return await self.mailbox.submit(activation, sink)

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run: running or waiting here, waiting in another process, or waiting in the store."""
        return await self.mailbox.cancel(run_id)


def tools_from_module(name: str) -> list[Tool]:
    """Every ``Tool`` (``@tool`` functions included) defined at the top level of module ``name``."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"tools.modules: cannot import {name!r}: {exc}") from exc
    return [value for value in vars(module).values() if isinstance(value, Tool)]


@asynccontextmanager
async def open_app(
    settings: Settings, *, serve: bool = True, mailbox: MailboxConfig | None = None
) -> AsyncIterator[App]:
    """Open the store, build the runtime with every configured tool and plugin, and run the mailbox service until
    exit (then the store closes). ``serve=False`` (the CLI) handles only this process's own dispatches and never
    picks up other processes' queued work."""
    from awaken_stdio.mailbox.service import MailboxConfig, MailboxService
    from awaken_stdio.runtime.permission import PermissionPlugin
    from awaken_stdio.stores import open_store

    config = settings.loaded.config
    async with open_store(settings.store_url) as store:
        runtime = build_runtime(settings.loaded, store=store)
        if config.tools.builtin:
            from awaken_stdio.tools.builtin import builtin_tools

            for tool in builtin_tools():
                runtime.add_tool(tool)
        for module in config.tools.modules:
            for tool in tools_from_module(module):
                runtime.add_tool(tool)
        runtime.add_plugin(PermissionPlugin(store))
        service = MailboxService(runtime, replace(mailbox or MailboxConfig(), dispatch_queued=serve))
        failure: Exception | None = None
        async with anyio.create_task_group() as tg:
            await tg.start(service.run)
            try:
                yield App(settings, store, runtime, service)
            except Exception as exc:  # raised after the group: callers see it, not an ExceptionGroup around it
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
