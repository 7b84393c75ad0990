"""awaken-stdio: an agent runtime for ACP editors and MCP clients, with durable human-in-the-loop.

The public API is listed once in ``__all__`` and loaded lazily (PEP 562), so ``import awaken_stdio`` costs almost
nothing and the protocol servers answer their first request before the runtime's heavier parts are imported. With
the module ``awaken_stdio.contract.content`` (content blocks from bytes and files) it is the whole public API, as the
README says: every other module is internal and may move.

Example::

    from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]})
    runtime = AgentRuntime(agents=[AgentSpec(id="calc", model="m")], models={"m": model}, tools=[add])
"""

# The TYPE_CHECKING imports below re-export the lazily loaded names of ``__all__`` (built from ``_EXPORTS``).
# pyright: reportUnusedImport=false, reportUnsupportedDunderAll=false

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from awaken_stdio._version import __version__ as __version__

_EXPORTS: dict[str, str] = {
    "AgentEvent": "awaken_stdio.contract.events",
    "AgentMetrics": "awaken_stdio.runtime.observability",
    "AgentNotFound": "awaken_stdio.contract.errors",
    "AgentRunResult": "awaken_stdio.contract.activation",
    "AgentRuntime": "awaken_stdio.runtime.agent_runtime",
    "AgentSpec": "awaken_stdio.contract.agent",
    "AudioBlock": "awaken_stdio.contract.messages",
    "AwakenError": "awaken_stdio.contract.errors",
    "Block": "awaken_stdio.runtime.plugins",
    "build_runtime": "awaken_stdio.app.assemble",
    "Config": "awaken_stdio.app.config",
    "ConfigError": "awaken_stdio.contract.errors",
    "ContentBlock": "awaken_stdio.contract.messages",
    "DecisionTargetNotFound": "awaken_stdio.contract.errors",
    "FileChange": "awaken_stdio.contract.preview",
    "FunctionModel": "awaken_stdio.providers.scripted",
    "HandoffPlugin": "awaken_stdio.runtime.handoff",
    "ImageBlock": "awaken_stdio.contract.messages",
    "InferenceRequest": "awaken_stdio.contract.inference",
    "InMemorySink": "awaken_stdio.runtime.observability",
    "InvalidResume": "awaken_stdio.contract.errors",
    "LlmExecutor": "awaken_stdio.contract.inference",
    "load_config": "awaken_stdio.app.config",
    "Message": "awaken_stdio.contract.messages",
    "MetricsSink": "awaken_stdio.runtime.observability",
    "ModelPricing": "awaken_stdio.contract.inference",
    "ModelSpec": "awaken_stdio.contract.agent",
    "MutationBatch": "awaken_stdio.contract.state",
    "ObservabilityPlugin": "awaken_stdio.runtime.observability",
    "open_runtime": "awaken_stdio.app.assemble",
    "open_store": "awaken_stdio.stores",
    "PermissionPlugin": "awaken_stdio.runtime.permission",
    "PersistedState": "awaken_stdio.contract.state",
    "Phase": "awaken_stdio.runtime.plugins",
    "PhaseContext": "awaken_stdio.runtime.plugins",
    "Plugin": "awaken_stdio.runtime.plugins",
    "PluginRegistrar": "awaken_stdio.runtime.plugins",
    "ProfileAccess": "awaken_stdio.contract.profile",
    "ProfileKey": "awaken_stdio.contract.profile",
    "ProviderError": "awaken_stdio.contract.errors",
    "ResourceBlock": "awaken_stdio.contract.messages",
    "ResourceLinkBlock": "awaken_stdio.contract.messages",
    "RunActivation": "awaken_stdio.contract.activation",
    "RunEnvironment": "awaken_stdio.contract.environment",
    "RunError": "awaken_stdio.contract.errors",
    "RunIdentity": "awaken_stdio.contract.identity",
    "ScriptedModel": "awaken_stdio.providers.scripted",
    "SetResult": "awaken_stdio.runtime.plugins",
    "Snapshot": "awaken_stdio.contract.state",
    "StateCommand": "awaken_stdio.contract.state",
    "StateError": "awaken_stdio.contract.errors",
    "StateKey": "awaken_stdio.contract.state",
    "StateMap": "awaken_stdio.contract.state",
    "StateScope": "awaken_stdio.contract.profile",
    "StateStore": "awaken_stdio.runtime.state_store",
    "StoreError": "awaken_stdio.contract.errors",
    "StreamResult": "awaken_stdio.contract.inference",
    "Suspend": "awaken_stdio.runtime.plugins",
    "SuspendTicket": "awaken_stdio.contract.suspension",
    "TerminationReason": "awaken_stdio.contract.lifecycle",
    "TextBlock": "awaken_stdio.contract.messages",
    "ThreadAlreadyRunning": "awaken_stdio.contract.errors",
    "TokenUsage": "awaken_stdio.contract.inference",
    "Tool": "awaken_stdio.contract.tools",
    "tool": "awaken_stdio.tools.function",
    "ToolCallContext": "awaken_stdio.contract.tools",
    "ToolCallResume": "awaken_stdio.contract.suspension",
    "ToolDescriptor": "awaken_stdio.contract.tools",
    "ToolError": "awaken_stdio.contract.errors",
    "ToolFailure": "awaken_stdio.contract.errors",
    "ToolOutput": "awaken_stdio.contract.tools",
    "ToolPreview": "awaken_stdio.contract.preview",
    "ToolResult": "awaken_stdio.contract.tools",
    "UsageError": "awaken_stdio.contract.errors",
}

__all__ = sorted(_EXPORTS, key=str.casefold)

if TYPE_CHECKING:
    from awaken_stdio.app.assemble import build_runtime, open_runtime
    from awaken_stdio.app.config import Config, load_config
    from awaken_stdio.contract.activation import AgentRunResult, RunActivation
    from awaken_stdio.contract.agent import AgentSpec, ModelSpec
    from awaken_stdio.contract.environment import RunEnvironment
    from awaken_stdio.contract.errors import (
        AgentNotFound,
        AwakenError,
        ConfigError,
        DecisionTargetNotFound,
        InvalidResume,
        ProviderError,
        RunError,
        StateError,
        StoreError,
        ThreadAlreadyRunning,
        ToolError,
        ToolFailure,
        UsageError,
    )
    from awaken_stdio.contract.events import AgentEvent
    from awaken_stdio.contract.identity import RunIdentity
    from awaken_stdio.contract.inference import InferenceRequest, LlmExecutor, ModelPricing, StreamResult, TokenUsage
    from awaken_stdio.contract.lifecycle import TerminationReason
    from awaken_stdio.contract.messages import (
        AudioBlock,
        ContentBlock,
        ImageBlock,
        Message,
        ResourceBlock,
        ResourceLinkBlock,
        TextBlock,
    )
    from awaken_stdio.contract.preview import FileChange, ToolPreview
    from awaken_stdio.contract.profile import ProfileAccess, ProfileKey, StateScope
    from awaken_stdio.contract.state import MutationBatch, PersistedState, Snapshot, StateCommand, StateKey, StateMap
    from awaken_stdio.contract.suspension import SuspendTicket, ToolCallResume
    from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolOutput, ToolResult
    from awaken_stdio.providers.scripted import FunctionModel, ScriptedModel
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.runtime.handoff import HandoffPlugin
    from awaken_stdio.runtime.observability import AgentMetrics, InMemorySink, MetricsSink, ObservabilityPlugin
    from awaken_stdio.runtime.permission import PermissionPlugin
    from awaken_stdio.runtime.plugins import Block, Phase, PhaseContext, Plugin, PluginRegistrar, SetResult, Suspend
    from awaken_stdio.runtime.state_store import StateStore
    from awaken_stdio.stores import open_store
    from awaken_stdio.tools.function import tool


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'awaken_stdio' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return [*__all__, "__version__"]
