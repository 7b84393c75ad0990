"""awaken-stdio: an agent runtime for ACP editors and MCP clients, with durable human-in-the-loop.

The public API is listed once in ``__all__`` and loaded lazily (PEP 562), so ``import awaken_stdio`` costs almost
nothing and the protocol servers answer their first request before the runtime's heavier parts are imported.

Example::

    from awaken_stdio import AgentRuntime, AgentSpec, ScriptedModel, tool

    @tool
    def add(a: int, b: int) -> int:
        "Add two numbers."
        return a + b

    model = ScriptedModel({"turns": [{"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}, {"text": "5"}]})
    runtime = AgentRuntime(agents=[AgentSpec("calc", model="m")], models={"m": model}, tools=[add])
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "AgentEvent": "awaken_stdio.contract.events",
    "AgentRunResult": "awaken_stdio.runtime.activation",
    "AgentRuntime": "awaken_stdio.runtime.agent_runtime",
    "AgentSpec": "awaken_stdio.contract.agent",
    "AwakenError": "awaken_stdio.contract.errors",
    "Block": "awaken_stdio.runtime.plugins",
    "Config": "awaken_stdio.config",
    "FunctionModel": "awaken_stdio.providers.scripted",
    "HandoffPlugin": "awaken_stdio.runtime.handoff",
    "LlmExecutor": "awaken_stdio.contract.inference",
    "Message": "awaken_stdio.contract.messages",
    "MutationBatch": "awaken_stdio.contract.state",
    "Phase": "awaken_stdio.runtime.plugins",
    "PhaseContext": "awaken_stdio.runtime.plugins",
    "Plugin": "awaken_stdio.runtime.plugins",
    "PluginRegistrar": "awaken_stdio.runtime.plugins",
    "ProfileAccess": "awaken_stdio.contract.profile",
    "ProfileKey": "awaken_stdio.contract.profile",
    "ProviderError": "awaken_stdio.contract.errors",
    "RunActivation": "awaken_stdio.runtime.activation",
    "ScriptedModel": "awaken_stdio.providers.scripted",
    "SetResult": "awaken_stdio.runtime.plugins",
    "Snapshot": "awaken_stdio.contract.state",
    "StateCommand": "awaken_stdio.contract.state",
    "StateKey": "awaken_stdio.contract.state",
    "StateScope": "awaken_stdio.contract.profile",
    "StateStore": "awaken_stdio.runtime.state_store",
    "Suspend": "awaken_stdio.runtime.plugins",
    "SuspendTicket": "awaken_stdio.contract.suspension",
    "Tool": "awaken_stdio.contract.tools",
    "ToolCallContext": "awaken_stdio.contract.tools",
    "ToolCallResume": "awaken_stdio.contract.suspension",
    "ToolDescriptor": "awaken_stdio.contract.tools",
    "ToolError": "awaken_stdio.contract.errors",
    "ToolOutput": "awaken_stdio.contract.tools",
    "ToolResult": "awaken_stdio.contract.tools",
    "build_runtime": "awaken_stdio.config",
    "load_config": "awaken_stdio.config",
    "open_store": "awaken_stdio.stores",
    "tool": "awaken_stdio.tools.function",
}

__all__ = sorted(_EXPORTS, key=str.casefold)

if TYPE_CHECKING:
    from awaken_stdio.config import Config, build_runtime, load_config
    from awaken_stdio.contract.agent import AgentSpec
    from awaken_stdio.contract.errors import AwakenError, ProviderError, ToolError
    from awaken_stdio.contract.events import AgentEvent
    from awaken_stdio.contract.inference import LlmExecutor
    from awaken_stdio.contract.messages import Message
    from awaken_stdio.contract.profile import ProfileAccess, ProfileKey, StateScope
    from awaken_stdio.contract.state import MutationBatch, Snapshot, StateCommand, StateKey
    from awaken_stdio.contract.suspension import SuspendTicket, ToolCallResume
    from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolOutput, ToolResult
    from awaken_stdio.providers.scripted import FunctionModel, ScriptedModel
    from awaken_stdio.runtime.activation import AgentRunResult, RunActivation
    from awaken_stdio.runtime.agent_runtime import AgentRuntime
    from awaken_stdio.runtime.handoff import HandoffPlugin
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
