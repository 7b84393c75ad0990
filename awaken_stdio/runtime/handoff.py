"""Handoff: switch the agent of a thread at the next step boundary, keeping the run, thread and history.

A tool (or any hook) requests an agent; a hook at run start and step end promotes the request; the loop then
re-resolves the agent before the next step. The active agent id is thread state, so the next run on the thread
starts with the agent it ended with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.state import StateCommand, StateKey
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolOutput, ToolResult
from awaken_stdio.runtime.plugins import Phase, PhaseContext, Plugin, PluginRegistrar

__all__ = ["ACTIVE_AGENT", "ACTIVE_AGENT_ID", "HandoffPlugin", "request_handoff"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ActiveAgent:
    active_agent: str | None = None
    requested_agent: str | None = None


def _apply(value: ActiveAgent, update: tuple[str, str | None]) -> ActiveAgent:
    op, agent = update
    if op == "request":
        return ActiveAgent(active_agent=value.active_agent, requested_agent=agent)
    if op == "activate":
        return ActiveAgent(active_agent=agent, requested_agent=None)
    return ActiveAgent()


ACTIVE_AGENT: StateKey[ActiveAgent, tuple[str, str | None]] = StateKey(
    "agent_handoff.active_agent",
    default=ActiveAgent,
    apply=_apply,
    scope="thread",
    encode=lambda v: {"active_agent": v.active_agent, "requested_agent": v.requested_agent},
    decode=lambda d: ActiveAgent(active_agent=d.get("active_agent"), requested_agent=d.get("requested_agent")),
)
ACTIVE_AGENT_ID: StateKey[str | None, str | None] = StateKey("agent_handoff.active_agent_id", scope="thread")


def request_handoff(agent_id: str) -> StateCommand:
    """The command that asks for a switch to ``agent_id`` at the next step boundary."""
    return StateCommand().update(ACTIVE_AGENT, ("request", agent_id))


async def _promote(ctx: PhaseContext) -> StateCommand | None:
    requested = ctx.snapshot.get(ACTIVE_AGENT).requested_agent
    if not requested:
        return None
    return StateCommand().update(ACTIVE_AGENT, ("activate", requested)).update(ACTIVE_AGENT_ID, requested)


class HandoffTool(Tool):
    def __init__(self, agents: list[str]) -> None:
        self.agents = agents
        self.descriptor = ToolDescriptor(
            name="handoff",
            description="Hand the conversation over to another agent, which takes over from the next step.",
            parameters={
                "type": "object",
                "properties": {
                    "agent": {"type": "string", "enum": agents, "description": "The agent to hand over to."},
                    "reason": {"type": "string", "description": "Why, for the next agent."},
                },
                "required": ["agent"],
            },
            kind="switch_mode",
        )

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolOutput:
        agent = args.get("agent")
        if agent not in self.agents:
            raise ToolFailure(f"agent must be one of {', '.join(self.agents)}", "invalid_arguments")
        return ToolOutput(result=ToolResult.success(self.name, {"handoff_to": agent}), command=request_handoff(agent))


class HandoffPlugin(Plugin):
    """Adds the handoff keys and hooks; with ``agents`` also the ``handoff`` tool the model can call."""

    name = "agent_handoff"
    always_active = True  # the runtime's own: every agent, listed or not

    def __init__(self, agents: list[str] | None = None) -> None:
        self.agents = list(agents or [])

    def register(self, registrar: PluginRegistrar) -> None:
        registrar.register_key(ACTIVE_AGENT)
        registrar.register_key(ACTIVE_AGENT_ID)
        registrar.phase_hook(Phase.RUN_START, _promote)
        registrar.phase_hook(Phase.STEP_END, _promote)
        if self.agents:
            registrar.register_tool(HandoffTool(self.agents))
