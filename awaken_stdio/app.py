"""Assembling the application both protocol servers (and the CLI) run: config, store, runtime, tools, plugins.

Two stages, because start-up speed matters: :func:`load_settings` is cheap (TOML + pydantic) and is all a server
needs to answer ``initialize``; :func:`open_app` opens the store (database drivers), registers the built-in tools,
the ``@tool`` modules and the permission plugin, and is entered only after that first answer is on the wire.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from awaken_stdio.config import STORE_ENV, LoadedConfig, build_runtime, load_config
from awaken_stdio.contract.errors import ConfigError, InvalidResume
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import Tool
from awaken_stdio.runtime.activation import AgentRunResult, EventSink

if TYPE_CHECKING:
    from awaken_stdio.contract.stores import Store
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

    async def decide(
        self, run_id: str, decisions: list[tuple[str, ToolCallResume]], sink: EventSink | None = None
    ) -> AgentRunResult | None:
        """Deliver decisions for a waiting run, from any surface (ACP, MCP, CLI).

        A run this process keeps alive gets them live (returns ``None``); otherwise the waiting run is resumed
        from the store here and its result returned. Unknown or finished runs raise ``InvalidResume``.
        """
        record = await self.store.load_run(run_id)
        if record is None:
            raise InvalidResume(f"run {run_id} not found")
        if self.runtime.active_run_id(record.thread_id) == run_id:
            if await self.runtime.send_decisions(record.thread_id, decisions):
                return None
        return await self.runtime.resume(run_id, decisions, sink)


def tools_from_module(name: str) -> list[Tool]:
    """Every ``Tool`` (``@tool`` functions included) defined at the top level of module ``name``."""
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(f"tools.modules: cannot import {name!r}: {exc}") from exc
    return [value for value in vars(module).values() if isinstance(value, Tool)]


@asynccontextmanager
async def open_app(settings: Settings) -> AsyncIterator[App]:
    """Open the store and build the runtime with every configured tool and plugin; closes the store on exit."""
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
        yield App(settings, store, runtime)
