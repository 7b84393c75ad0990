"""``update_plan``: the model's to-do list for the task, which clients show (the ACP ``plan`` update).

The tool only echoes the plan back: the whole list each time, as ACP wants. ``data["entries"]`` is the plan, with
every priority filled in.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from awaken_stdio.contract.tools import ToolCallContext, ToolResult
from awaken_stdio.tools.builtin._results import success
from awaken_stdio.tools.function import tool

__all__ = ["PlanEntry", "update_plan"]

_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}


class PlanEntry(BaseModel):
    """One step of the plan."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(description="What the step does, in a few words.")
    status: Literal["pending", "in_progress", "completed"]
    priority: Literal["high", "medium", "low"] = "medium"


@tool(kind="think", read_only=True, title="Update plan")
async def update_plan(ctx: ToolCallContext, entries: list[PlanEntry]) -> ToolResult:
    """Write down or update the plan for the current task, so the user can follow along.

    Send the whole list every time, in order, with each step's status; keep one step `in_progress` while you
    work on it and mark steps `completed` as soon as they are done.

    Args:
        entries: Every step of the plan.
    """
    plan = [e.model_dump() for e in entries]
    lines = [f"{_MARKS[e.status]} {e.content}" for e in entries]
    return success(ctx.tool_name, "\n".join(lines) or "(the plan is empty)", {"entries": plan}, [])
