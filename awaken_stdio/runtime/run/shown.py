"""Approvals bound to what was shown: an approved call whose target changed since its preview is asked again.

A person approves the diff they saw (``contract.suspension.bind``). Before the approved call runs, its preview is worked
out again through the call's own context (the editor's file system when there is one); when the targets no longer
hold the text the approved preview assumed, running it would change something nobody saw, so it is suspended again
with the new preview, saying why.
"""

from __future__ import annotations

from dataclasses import replace

from awaken_stdio.contract.messages import ToolCall
from awaken_stdio.contract.preview import CHANGED
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, SuspendTicket, bound_digest
from awaken_stdio.contract.tools import Tool, preview_call
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import ToolCallState

__all__ = ["changed_since_shown"]


async def changed_since_shown(run: RunState, call: ToolCall, tool: Tool, state: ToolCallState) -> SuspendTicket | None:
    """The ticket to ask about ``call`` again when its target changed since the approved preview; ``None`` when it
    may run (not bound to a preview, unchanged, or no preview can be worked out now: the built-in file tools then
    check again as they write)."""
    decision = state.resume_input
    approved = bound_digest(decision)
    if approved is None or state.ticket is None or (decision is not None and decision.unknown == "done"):
        return None  # not bound to a preview, or recorded as done without running
    now = await preview_call(tool, call.arguments, run.call_context(call, run.state.snapshot(), None))
    if now is None or now.digest() == approved:
        return None
    asked = state.ticket.suspension
    # an earlier attempt's unknown outcome stays the question; the new preview says the file changed
    message = asked.message if asked.action == OUTCOME_UNKNOWN_ACTION else CHANGED
    return replace(state.ticket, suspension=replace(asked, message=message, preview=now.changed()))
