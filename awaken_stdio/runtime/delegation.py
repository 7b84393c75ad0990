"""Delegation: another agent offered to the model as the tool ``agent_run_<id>``.

The child runs on a thread of its own (its state is isolated from the parent's) and reports progress through the
parent's tool call; its run names the parent's run, thread and tool call (``ctx.run_identity``). A child that ends
waiting for a decision suspends the parent's call in turn; one that fails (stopped, blocked, a fatal tool error) or
is cancelled is an error result for the parent, with the child's reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolResult

__all__ = ["AgentTool", "RunAgent", "delegate_tool_name"]

RunAgent = Callable[[RunActivation], Awaitable[AgentRunResult]]
"""Run an agent to its end (what a delegate tool calls): ``AgentRuntime.run``."""


def delegate_tool_name(agent_id: str) -> str:
    return f"agent_run_{agent_id}"


class AgentTool(Tool):
    def __init__(self, run: RunAgent, agent_id: str, description: str = "") -> None:
        self.run = run  # runs the child to its end (``AgentRuntime.run``)
        self.agent_id = agent_id
        self.descriptor = ToolDescriptor(
            name=delegate_tool_name(agent_id),
            description=description or f"Delegate a task to the agent '{agent_id}' and get its answer.",
            parameters={
                "type": "object",
                "properties": {"prompt": {"type": "string", "description": "The task for the agent, self-contained."}},
                "required": ["prompt"],
            },
            kind="think",
            title=f"Delegate to {agent_id}",
        )

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        prompt = args.get("prompt")
        if not isinstance(prompt, str):
            raise ToolFailure("prompt: a string is required", "invalid_arguments")
        if not prompt.strip():
            raise ToolFailure("prompt must not be empty", "invalid_arguments")
        return args

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if ctx.resume_input is not None:  # the child's wait was answered through this call
            return ToolResult.success(self.name, ctx.resume_input.result)
        await ctx.report_progress("running", f"delegating to {self.agent_id}")
        activation = RunActivation(
            messages=[Message.user(args["prompt"])],
            agent_id=self.agent_id,
            parent_run_id=ctx.run_id,
            parent_thread_id=ctx.thread_id,
            parent_tool_call_id=ctx.call_id,
            origin="delegate",
            env=ctx.env,  # the parent's: its directory, editor, client and mode
        )
        try:
            child = await self.run(activation)
        except Exception as exc:
            await ctx.report_progress("failed", str(exc))
            return ToolResult.error(self.name, f"agent '{self.agent_id}' failed: {exc}")
        data: dict[str, Any] = {
            "agent_id": self.agent_id,
            "status": child.status,
            "response": child.response,
            "output": child.response,
            "steps": child.steps,
        }
        if child.status == "waiting":
            await ctx.report_progress("pending", f"{self.agent_id} is waiting for a decision")
            ticket = SuspendTicket(
                suspension=Suspension(
                    id=f"delegate_run:{child.run_id}",
                    action="agent_delegate:suspended",
                    message=f"Agent '{self.agent_id}' is waiting for a decision",
                    parameters=data,
                ),
                pending=PendingToolCall(id=ctx.call_id, name=self.name, arguments=args),
                resume_mode="use_decision_as_tool_result",
            )
            result = ToolResult.suspended(self.name, ticket)
        elif child.status == "completed":
            await ctx.report_progress("done", f"{self.agent_id} finished")
            result = ToolResult.success(self.name, data)
        else:
            data["status_reason"] = child.status_reason
            reason = f"{child.status}: {child.status_reason}" if child.status == "failed" else child.status
            await ctx.report_progress("cancelled" if child.status == "cancelled" else "failed", reason)
            result = ToolResult.error(self.name, f"agent '{self.agent_id}' ended {reason}", data=data)
        result.metadata["child_run_id"] = child.run_id
        return result
