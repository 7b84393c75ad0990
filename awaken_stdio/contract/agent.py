"""Agent and model definitions: what the config file describes and the runtime resolves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awaken_stdio.contract.inference import ModelPricing

__all__ = ["AgentSpec", "ModelSpec"]


@dataclass(slots=True, kw_only=True)
class ModelSpec:
    """A named model: which provider serves it and with which upstream model id.

    ``pricing`` (when known) prices its usage, e.g. the cost an ACP ``usage_update`` reports; ``knowledge_cutoff``
    is the date its training data ends (``2024-06``), for prompts and clients that show it.
    """

    id: str
    provider: str  # openai | anthropic | scripted | a provider registered on the runtime
    model: str = ""
    options: dict[str, Any] = field(default_factory=dict)  # base_url, api_key_env, script, capabilities...
    pricing: ModelPricing | None = None
    knowledge_cutoff: str | None = None


@dataclass(slots=True, kw_only=True)
class AgentSpec:
    """An agent: its model, prompt, tools, delegates and plugin sections.

    ``tools`` are names or globs (``*`` = every registered tool). ``plugins`` names the runtime's plugins this agent
    uses (the always-active ones apply anyway); ``active_hook_filter``, when set, keeps only the hooks, gates,
    transforms and tools of the plugins it names. ``sections`` carry per-plugin configuration, e.g.
    ``{"permission": {"default": "ask", "rules": [...]}}``.
    """

    id: str
    model: str = "default"
    system_prompt: str = ""
    description: str = ""
    tools: list[str] = field(default_factory=lambda: ["*"])
    excluded_tools: list[str] = field(default_factory=list)
    delegates: list[str] = field(default_factory=list)
    max_rounds: int = 16
    max_continuation_retries: int = 2
    max_tokens: int | None = None  # token budget for a run (input + output), None = unlimited
    timeout_s: float | None = None
    tool_executor: str = "sequential"  # sequential | parallel
    plugins: list[str] = field(default_factory=list)
    active_hook_filter: list[str] = field(default_factory=list)
    expose_mcp: bool = False
    sections: dict[str, Any] = field(default_factory=dict)
