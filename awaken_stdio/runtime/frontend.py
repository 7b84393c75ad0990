"""Frontend tools: tools the client runs. The call suspends; the client's answer becomes the tool's result."""

from __future__ import annotations

from typing import Any

from awaken_stdio.contract.suspension import PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolDescriptor, ToolResult

__all__ = ["FrontEndTool"]


class FrontEndTool(Tool):
    def __init__(self, descriptor: ToolDescriptor) -> None:
        self.descriptor = descriptor

    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolResult:
        if ctx.resume_input is not None:
            return ToolResult.success(self.name, ctx.resume_input.result)
        ticket = SuspendTicket(
            suspension=Suspension(
                id=f"suspend_{ctx.call_id}",
                action=f"tool:{self.name}",
                message=f"Waiting for the client to run '{self.name}'",
                parameters=args,
            ),
            pending=PendingToolCall(id=ctx.call_id, name=self.name, arguments=args),
            resume_mode="use_decision_as_tool_result",
        )
        return ToolResult.suspended(self.name, ticket)
