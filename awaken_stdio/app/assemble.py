"""From a validated config to a running runtime: model and agent specs, MCP server specs, then one ``AgentRuntime``
with every configured tool and plugin.

The walk goes one way, down: ``config.py`` (what the file says) -> specs here (the runtime's and the tools'
vocabulary) -> the runtime. The tools and providers never see the config's pydantic models. The ``@tool`` modules
join the app's runtime after it opened (``app.load_tool_modules``): an import that hangs or fails holds nobody.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from awaken_stdio.app.config import AgentConfig, LoadedConfig, McpServerConfig, ModelConfig
from awaken_stdio.contract.agent import AgentSpec, ModelSpec
from awaken_stdio.contract.errors import ConfigError

if TYPE_CHECKING:
    from awaken_stdio.contract.stores import Store
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.tools.mcp import McpServerSpec

__all__ = [
    "add_agents",
    "agent_spec",
    "assemble_runtime",
    "build_runtime",
    "configured_specs",
    "mcp_server_spec",
    "model_spec",
    "open_runtime",
]


def agent_spec(agent_id: str, agent: AgentConfig) -> AgentSpec:
    sections: dict[str, Any] = {
        "permission": agent.permission.model_dump(exclude_none=True),
        "compaction": agent.compaction.model_dump(),
    }
    return AgentSpec(
        id=agent_id,
        model=agent.model,
        system_prompt=agent.system_prompt,
        description=agent.description,
        tools=list(agent.tools),
        excluded_tools=list(agent.exclude_tools),
        delegates=list(agent.delegates),
        max_rounds=agent.max_rounds,
        max_tokens=agent.max_tokens,
        timeout_s=agent.timeout_s,
        tool_executor=agent.tool_executor,
        plugins=list(agent.plugins),
        expose_mcp=agent.expose_mcp,
        sections=sections,
    )


def model_spec(model_id: str, model: ModelConfig) -> ModelSpec:
    from awaken_stdio.contract.inference import ModelPricing

    options = model.model_dump(exclude_none=True, exclude={"pricing", "knowledge_cutoff"})
    pricing = ModelPricing(**model.pricing.model_dump()) if model.pricing is not None else None
    return ModelSpec(
        id=model_id,
        provider=model.provider,
        model=model.model,
        options=options,
        pricing=pricing,
        knowledge_cutoff=model.knowledge_cutoff,
    )


def build_runtime(loaded: LoadedConfig, *, store: Store | None = None) -> AgentRuntime:
    """An ``AgentRuntime`` with the config's agents and models (providers load when first used) on ``store``.

    Opening a store is asynchronous, so this does not open the config's ``[store] url``: use :func:`open_runtime`
    for that. Without ``store`` the runtime keeps everything in memory, which a config naming a store refuses
    (``ConfigError``) rather than silently not persisting.
    """
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.runtime.handoff import HandoffPlugin

    config = loaded.config
    if store is None and config.store.url is not None:
        raise ConfigError(
            f"{loaded.source}: [store] url is {config.store.url!r}; open it with "
            "`async with open_runtime(config) as runtime`, or pass store=await open_store(url)"
        )
    runtime = AgentRuntime(store=store)
    add_agents(runtime, loaded)
    handoff_targets = sorted({a for agent in config.agents.values() for a in agent.handoffs})
    if handoff_targets:
        runtime.add_plugin(HandoffPlugin(handoff_targets))
    return runtime


def add_agents(runtime: AgentRuntime, loaded: LoadedConfig) -> None:
    """The config's models (providers load when first used) and agents, added to ``runtime``, and its default
    agent made the runtime's."""
    from awaken_stdio.providers import create_executor

    config = loaded.config
    for model_id, model in config.models.items():
        spec = model_spec(model_id, model)
        runtime.add_model(model_id, create_executor(spec, loaded.base_dir), model.model or model_id, spec=spec)
    for agent_id, agent in config.agents.items():
        runtime.add_agent(agent_spec(agent_id, agent))
    runtime.default_agent = config.default_agent


@asynccontextmanager
async def open_runtime(loaded: LoadedConfig, *, store_url: str | None = None) -> AsyncGenerator[AgentRuntime]:
    """The config's runtime on its store, closed on exit: the one way from a config to a runtime that persists.

    The store is the one the CLI would use: ``store_url``, else ``$AWAKEN_STDIO_STORE``, else the config's
    ``[store] url``, else the default SQLite file in the user data directory. Tools and plugins are added by the
    caller (``runtime.add_tool``...), as for :func:`build_runtime`.
    """
    from awaken_stdio.app.config_file import store_url as resolve_store_url
    from awaken_stdio.stores import open_store

    store = await open_store(resolve_store_url(store_url, loaded.file))
    try:
        runtime = build_runtime(loaded, store=store)
    except BaseException:
        await store.aclose()
        raise
    try:
        yield runtime
    finally:
        await runtime.aclose()  # its runs cancelled, then the store closed


def mcp_server_spec(name: str, config: McpServerConfig) -> McpServerSpec:
    """The spec of a ``[mcp_servers.<name>]`` table."""
    from awaken_stdio.tools.mcp import McpServerSpec

    if bool(config.command) == bool(config.url):
        raise ConfigError(f"mcp_servers.{name}: give exactly one of `command` or `url`")
    timeout_s, call_timeout_s = config.timeout_s, config.call_timeout_s
    if config.url:
        headers = dict(config.headers)
        return McpServerSpec(
            name=name,
            transport="http",
            url=config.url,
            headers=headers,
            timeout_s=timeout_s,
            call_timeout_s=call_timeout_s,
        )
    return McpServerSpec(
        name=name,
        transport="stdio",
        command=config.command,
        args=tuple(config.args),
        env=dict(config.env),
        cwd=config.cwd,
        timeout_s=timeout_s,
        call_timeout_s=call_timeout_s,
    )


def configured_specs(servers: Mapping[str, McpServerConfig]) -> list[McpServerSpec]:
    """The specs of the enabled ``[mcp_servers]`` of a config, in their order."""
    return [mcp_server_spec(name, server) for name, server in servers.items() if server.enabled]


def assemble_runtime(loaded: LoadedConfig, store: Store, tracer_provider: Any = None) -> AgentRuntime:
    """The application's runtime on ``store``: :func:`build_runtime`, then the built-in tools (unless turned off),
    the installed entry points, the permission plugin and the observability plugin (the ``@tool`` modules come
    after: ``app.load_tool_modules``)."""
    from awaken_stdio.runtime.observability import LogSink, ObservabilityPlugin
    from awaken_stdio.runtime.permission import PermissionPlugin
    from awaken_stdio.tools.discovery import tools_from_entry_points

    config = loaded.config
    runtime = build_runtime(loaded, store=store)
    if config.tools.builtin:
        from awaken_stdio.tools.builtin import builtin_tools

        for tool in builtin_tools():
            runtime.add_tool(tool)
    for tool in tools_from_entry_points():
        runtime.add_tool(tool, replace=True)
    runtime.add_plugin(PermissionPlugin(store))
    providers = {model_id: model.provider for model_id, model in config.models.items()}
    runtime.add_plugin(ObservabilityPlugin(LogSink(), tracer_provider, providers=providers))
    return runtime
