"""Plugins: how behaviour is added to the loop without touching it.

A :class:`Plugin` registers what it brings through a :class:`PluginRegistrar`: state and profile keys, phase hooks,
tool-gate hooks, request transforms, tools, scheduled-action and effect handlers. The runtime installs the
registrations of every plugin an agent uses into that run's state store and phase engine.

A plugin registered on the runtime is *active* for an agent when the agent lists its name in ``AgentSpec.plugins``
(as the docs' agents list ``plugin_ids``) or when the plugin is ``always_active`` (the runtime's own: permission,
observability, handoff). Only active plugins contribute hooks, gates, request transforms and tools to the agent's
runs; a non-empty ``AgentSpec.active_hook_filter`` narrows those contributions to the plugins it names. A registered
plugin that no agent names, or a name that no registered plugin has, is a ``ConfigError`` before anything runs
(``AgentRuntime.check``): a plugin that silently did nothing would leave its gates unguarded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import (
    EffectHandlerAlreadyRegistered,
    HandlerAlreadyRegistered,
    KeyAlreadyRegistered,
    ToolAlreadyRegistered,
)
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.state import MutationBatch, Snapshot, StateCommand, StateKey
from awaken_stdio.contract.tools import CancelToken, Tool, ToolResult

if TYPE_CHECKING:
    from awaken_stdio.contract.agent import AgentSpec
    from awaken_stdio.contract.identity import RunIdentity
    from awaken_stdio.contract.inference import InferenceRequest, StreamResult
    from awaken_stdio.contract.profile import ProfileAccess, ProfileKey
    from awaken_stdio.contract.suspension import SuspendTicket, ToolCallResume
    from awaken_stdio.contract.tools import ToolDescriptor

__all__ = [
    "Block",
    "EffectHandler",
    "GateDecision",
    "Phase",
    "PhaseContext",
    "PhaseHook",
    "Plugin",
    "PluginRegistrar",
    "RequestTransform",
    "ScheduledActionHandler",
    "SetResult",
    "Suspend",
    "ToolGateHook",
]


class Phase(StrEnum):
    RUN_START = "run_start"
    STEP_START = "step_start"
    BEFORE_INFERENCE = "before_inference"
    AFTER_INFERENCE = "after_inference"
    TOOL_GATE = "tool_gate"
    BEFORE_TOOL_EXECUTE = "before_tool_execute"
    AFTER_TOOL_EXECUTE = "after_tool_execute"
    STEP_END = "step_end"
    RUN_END = "run_end"


@dataclass(slots=True, kw_only=True)
class PhaseContext:
    """What a hook sees. Tool fields are set in the tool phases, ``response`` after inference, ``offered_tools``
    (the descriptors of the tools in the request, by name) for request transforms. ``run_identity`` names the run
    and its lineage (a delegate's parent run, thread and tool call); ``env`` is where the run runs (its directory,
    permission mode, the client's trace context)."""

    phase: Phase
    snapshot: Snapshot
    thread_id: str
    run_id: str
    agent: AgentSpec
    messages: list[Message]
    step: int = 0
    tool_name: str | None = None
    tool_call_id: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_result: ToolResult | None = None
    tool_descriptor: Any = None
    response: StreamResult | None = None
    resume_input: ToolCallResume | None = None
    env: RunEnvironment = field(default_factory=RunEnvironment)
    profile: ProfileAccess | None = None
    cancel: CancelToken | None = None
    offered_tools: Mapping[str, ToolDescriptor] = field(default_factory=dict)
    run_identity: RunIdentity | None = None

    def state(self, key: StateKey[Any, Any]) -> Any:
        return self.snapshot.get(key)


PhaseHook = Callable[[PhaseContext], Awaitable[StateCommand | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Block:
    """Refuse the call; the run ends ``blocked`` with this reason."""

    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspend:
    """Hold the call until a person decides."""

    ticket: SuspendTicket


@dataclass(frozen=True, slots=True, kw_only=True)
class SetResult:
    """Answer the call without running the tool."""

    result: ToolResult


GateDecision = Block | Suspend | SetResult
ToolGateHook = Callable[[PhaseContext], Awaitable[GateDecision | None]]
RequestTransform = Callable[["InferenceRequest", PhaseContext], "InferenceRequest"]
ScheduledActionHandler = Callable[[PhaseContext, Any], Awaitable[StateCommand | None]]
EffectHandler = Callable[[Any, Snapshot], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class PluginRegistrar:
    """Collects a plugin's registrations; duplicates are errors, never silent overrides.

    ``agent_id`` is the agent whose plugins are being installed: an error about a key names it and both plugins.
    """

    plugin_id: str = ""
    agent_id: str = ""
    keys: list[StateKey[Any, Any]] = field(default_factory=list)
    profile_keys: list[ProfileKey[Any]] = field(default_factory=list)
    hooks: list[tuple[str, Phase, PhaseHook]] = field(default_factory=list)
    gates: list[tuple[str, ToolGateHook]] = field(default_factory=list)
    transforms: list[tuple[str, RequestTransform]] = field(default_factory=list)
    tools: dict[str, Tool] = field(default_factory=dict)
    tool_owner: dict[str, str] = field(default_factory=dict)
    actions: dict[str, tuple[Phase, ScheduledActionHandler]] = field(default_factory=dict)
    effects: dict[str, EffectHandler] = field(default_factory=dict)
    key_owner: dict[str, str] = field(default_factory=dict)
    profile_key_owner: dict[str, str] = field(default_factory=dict)

    def register_key(self, key: StateKey[Any, Any]) -> None:
        if key.key in self.key_owner:
            raise KeyAlreadyRegistered(key.key, self._clash(self.key_owner[key.key]))
        self.keys.append(key)
        self.key_owner[key.key] = self.plugin_id

    def register_profile_key(self, key: ProfileKey[Any]) -> None:
        if key.namespace in self.profile_key_owner:
            raise KeyAlreadyRegistered(key.namespace, self._clash(self.profile_key_owner[key.namespace]))
        self.profile_keys.append(key)
        self.profile_key_owner[key.namespace] = self.plugin_id

    def _clash(self, first: str) -> str:
        """Who registers a key twice (nothing to say for a registrar used outside plugins)."""
        if not (first or self.plugin_id):
            return ""
        if first == self.plugin_id:
            who = f"plugin {first!r} registers it twice"
        else:
            who = f"plugins {first!r} and {self.plugin_id!r} both register it"
        return f"{who}, for agent {self.agent_id!r}" if self.agent_id else who

    def phase_hook(self, phase: Phase, hook: PhaseHook) -> None:
        self.hooks.append((self.plugin_id, Phase(phase), hook))

    def tool_gate(self, hook: ToolGateHook) -> None:
        self.gates.append((self.plugin_id, hook))

    def request_transform(self, transform: RequestTransform) -> None:
        """Rewrite each request of the agent's runs right before the model call (registration order).

        The request is the transform's own: it may edit ``request.messages`` (a copy of the history: append,
        insert, replace or drop items), ``tools`` and ``overrides`` in place, or return a new request; the stored
        conversation changes only through the runtime. Messages themselves are frozen: replace one to change it.
        """
        self.transforms.append((self.plugin_id, transform))

    def register_tool(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise ToolAlreadyRegistered(tool.name)
        self.tools[tool.name] = tool
        self.tool_owner[tool.name] = self.plugin_id

    def scheduled_action(self, name: str, phase: Phase, handler: ScheduledActionHandler) -> None:
        if name in self.actions:
            raise HandlerAlreadyRegistered(name)
        self.actions[name] = (Phase(phase), handler)

    def effect(self, name: str, handler: EffectHandler) -> None:
        if name in self.effects:
            raise EffectHandlerAlreadyRegistered(name)
        self.effects[name] = handler

    def install(self, plugin: Plugin) -> None:
        """Add ``plugin``'s registrations to this registrar (which may already hold other plugins')."""
        self.plugin_id, previous = plugin.name, self.plugin_id
        try:
            plugin.register(self)
        finally:
            self.plugin_id = previous

    def narrow(self, plugin_ids: frozenset[str]) -> None:
        """Keep only the hooks, gates, transforms and tools of ``plugin_ids`` (an agent's ``active_hook_filter``);
        keys and handlers stay, as they are structural."""
        self.hooks = [h for h in self.hooks if h[0] in plugin_ids]
        self.gates = [g for g in self.gates if g[0] in plugin_ids]
        self.transforms = [t for t in self.transforms if t[0] in plugin_ids]
        self.tools = {n: t for n, t in self.tools.items() if self.tool_owner[n] in plugin_ids}


class Plugin:
    """Extend the runtime: override :meth:`register`, and optionally the activation hooks.

    An agent uses the plugin when its ``AgentSpec.plugins`` names it (``name``), or always when ``always_active``.

    ``on_activate`` seeds state when an agent using the plugin becomes active (a run starts or a handoff switches
    to it); ``on_deactivate`` cleans up when a handoff switches away.
    """

    name: str = "plugin"
    # active for every agent, listed in ``AgentSpec.plugins`` or not (the runtime's own plugins)
    always_active: ClassVar[bool] = False

    def register(self, registrar: PluginRegistrar) -> None:
        """Add keys, hooks, tools and handlers."""

    def on_activate(self, agent: AgentSpec, batch: MutationBatch) -> None:
        """Seed state for ``agent``."""

    def on_deactivate(self, batch: MutationBatch) -> None:
        """Clean up state when the agent is switched away from."""

    async def on_decision(self, ctx: PhaseContext, decision: ToolCallResume) -> None:
        """A person decided on a suspended call (``ctx.tool_*`` name it), from whichever surface.

        Called once per applied decision, before the call is replayed or cancelled; e.g. the permission plugin
        remembers "always" answers here.
        """

    async def on_run_failed(self, ctx: PhaseContext, error: BaseException) -> None:
        """The run ended on an infrastructure failure (a provider or store error): no ``run_end`` phase follows."""

    def config_schema(self) -> dict[str, Any] | None:
        """JSON Schema of this plugin's section in an agent definition (``AgentSpec.sections[name]``)."""
        return None
