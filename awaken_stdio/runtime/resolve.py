"""Resolving an agent id into everything a run needs: spec, model executor, tools and plugin registrations.

It reads what is registered (a :class:`Registry`, which ``AgentRuntime`` is) and gets the one way to run an agent
that delegate tools need (``run``), so nothing here depends on the runtime that calls it.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from awaken_stdio.contract.agent import AgentSpec
from awaken_stdio.contract.errors import AgentNotFound, ConfigError, ToolAlreadyRegistered
from awaken_stdio.contract.inference import LlmExecutor
from awaken_stdio.contract.tools import Tool
from awaken_stdio.runtime.delegation import AgentTool, RunAgent
from awaken_stdio.runtime.phases import index_hooks
from awaken_stdio.runtime.plugins import Phase, PhaseHook, Plugin, PluginRegistrar

__all__ = [
    "Registry",
    "ResolvedAgent",
    "active_plugins",
    "check_plugins",
    "explain_unknown_key",
    "matches_any",
    "resolve_agent",
]


class Registry(Protocol):
    """What is registered: agents, models (executor and model name), tools and plugins."""

    @property
    def agents(self) -> Mapping[str, AgentSpec]: ...

    @property
    def models(self) -> Mapping[str, tuple[LlmExecutor, str]]: ...

    @property
    def tools(self) -> Mapping[str, Tool]: ...

    @property
    def plugins(self) -> Sequence[Plugin]: ...


def matches_any(name: str, patterns: list[str]) -> bool:
    return any(p == name or fnmatch.fnmatchcase(name, p) for p in patterns)


@dataclass(slots=True, kw_only=True)
class ResolvedAgent:
    spec: AgentSpec
    model_name: str
    executor: LlmExecutor
    tools: dict[str, Tool]
    plugins: list[Plugin]
    registrar: PluginRegistrar
    hooks: dict[Phase, list[tuple[str, PhaseHook]]] = field(default_factory=dict)
    tool_json: list[dict[str, Any]] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.id


def resolve_agent(runtime: Registry, agent_id: str, run: RunAgent) -> ResolvedAgent:
    spec = runtime.agents.get(agent_id)
    if spec is None:
        raise AgentNotFound(agent_id)
    model = runtime.models.get(spec.model)
    if model is None:
        raise ConfigError(f"agent {agent_id!r} uses model {spec.model!r}, which is not defined")
    executor, model_name = model

    registrar = PluginRegistrar(agent_id=agent_id)
    plugins = active_plugins(runtime.plugins, spec)
    for plugin in plugins:
        registrar.install(plugin)
    if spec.active_hook_filter:
        registrar.narrow(frozenset(spec.active_hook_filter))

    patterns = spec.tools or []
    tools: dict[str, Tool] = {
        name: tool
        for name, tool in runtime.tools.items()
        if matches_any(name, patterns) and not matches_any(name, spec.excluded_tools)
    }
    for name, tool in registrar.tools.items():
        if name in tools:
            raise ToolAlreadyRegistered(name)
        tools[name] = tool
    if spec.delegates:
        for delegate in spec.delegates:
            if delegate not in runtime.agents:
                raise ConfigError(f"agent {agent_id!r} delegates to {delegate!r}, which is not defined")
            tool = AgentTool(run, delegate, runtime.agents[delegate].description)
            tools[tool.name] = tool
    resolved = ResolvedAgent(
        spec=spec,
        model_name=model_name,
        executor=executor,
        tools=tools,
        plugins=plugins,
        registrar=registrar,
        hooks=index_hooks(registrar.hooks),
    )
    resolved.tool_json = [_tool_json(t) for t in tools.values()]
    return resolved


def active_plugins(registered: Sequence[Plugin], spec: AgentSpec) -> list[Plugin]:
    """The plugins ``spec`` uses, in registration order: the ones it lists and the always-active ones.

    A listed name no registered plugin has is a configuration error, as in the docs (``PluginNotFound``).
    """
    known = {p.name for p in registered}
    for name in spec.plugins:
        if name not in known:
            others = ", ".join(sorted(repr(n) for n in known)) or "none"
            raise ConfigError(
                f"agent {spec.id!r} uses plugin {name!r}, which is not registered on the runtime (registered: "
                f"{others}); register it with AgentRuntime(plugins=[...]) or runtime.add_plugin(...)"
            )
    listed = set(spec.plugins)
    return [p for p in registered if p.always_active or p.name in listed]


def check_plugins(runtime: Registry) -> None:
    """Every plugin an agent names is registered, and every registered plugin applies to some agent.

    A plugin no agent uses would do nothing, silently: its gates would guard nothing and its keys would not exist.
    That is always a mistake (often a forgotten ``plugins=[...]``), so it is an error, not a warning a library's
    caller may never see.
    """
    for spec in runtime.agents.values():
        active_plugins(runtime.plugins, spec)
    used = {name for spec in runtime.agents.values() for name in spec.plugins}
    for plugin in runtime.plugins:
        if not plugin.always_active and plugin.name not in used:
            name = plugin.name
            raise ConfigError(
                f"plugin {name!r} is registered but no agent uses it, so it would do nothing: name it in an "
                f"agent's plugins (AgentSpec(plugins=[{name!r}]), or plugins = [{name!r}] in [agents.<id>] of the "
                "config), or make it always_active"
            )


def explain_unknown_key(runtime: Registry, agent_id: str, key: str) -> str:
    """Why agent ``agent_id``'s run does not know the state key ``key``: which plugin registers it, if any."""
    spec = runtime.agents.get(agent_id)
    active = {p.name for p in active_plugins(runtime.plugins, spec)} if spec is not None else set[str]()
    for plugin in runtime.plugins:
        if plugin.name in active:
            continue
        scratch = PluginRegistrar()
        try:
            scratch.install(plugin)
        except Exception:  # only a hint: a plugin that cannot register alone is no owner we can name
            continue
        if key in scratch.key_owner:
            return (
                f"plugin {plugin.name!r} registers it, and agent {agent_id!r} does not use that plugin: add "
                f"{plugin.name!r} to the agent's plugins"
            )
    return f"no plugin that agent {agent_id!r} uses registers it"


def _tool_json(tool: Tool) -> dict[str, Any]:
    d = tool.descriptor
    return {"name": d.name, "description": d.description, "input_schema": d.parameters}
