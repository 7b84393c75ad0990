"""Recording what became of a tool call: its result in the conversation, its suspension, the run's waiting state.

The bottom of the step modules: every path that settles a call (a tool ran, a gate decided, a decision came, a
crash left it behind, the run ended) records it here, so state, tool message and event always agree.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from dataclasses import replace
from typing import Any

from awaken_stdio.contract.events import ToolCallDone, ToolCallResumed
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.messages import Message, TextBlock, ToolCall, valid_text, valid_value
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.stores import WaitingState, WaitingTicket
from awaken_stdio.contract.suspension import PendingToolCall, SuspendTicket, Suspension, waiting_reason_for
from awaken_stdio.contract.tools import ToolResult, preview_call
from awaken_stdio.runtime.executors import CallResult
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import (
    RUN_LIFECYCLE,
    TOOL_CALL_STATES,
    LifecycleUpdate,
    ToolCallState,
    ToolCallStatesUpdate,
)

__all__ = [
    "AWAITING_APPROVAL",
    "CANCELLED_WITH_RUN",
    "cancel_suspended",
    "cancelled_calls",
    "commit_call",
    "default_ticket",
    "set_waiting",
    "suspend_call",
    "waiting_state",
]

AWAITING_APPROVAL = "Tool '{}' suspended: awaiting approval"
CANCELLED_WITH_RUN = "[tool call cancelled with the run]"


async def commit_call(run: RunState, outcome: CallResult, *, resumed: bool = False) -> None:
    """Record one finished call: state, tool message, event."""
    call, result = outcome.call, _valid_result(outcome.result)
    if outcome.fatal is not None and run.fatal is None:
        run.fatal = outcome.fatal
    if result.is_pending:
        ticket = result.suspension or default_ticket(call)
        await run.commit(outcome.command)
        message = result.message or f"Tool '{call.name}' suspended: awaiting decision"
        await suspend_call(run, call, ticket=ticket, message=message, metadata=result.metadata)
        return
    status = "failed" if result.is_error else "succeeded"
    previous = run.tool_states().get(call.id)
    state = ToolCallState(
        call_id=call.id, tool_name=call.name, arguments=call.arguments, status=status, updated_at=now_ms()
    )
    if previous is not None:
        state = replace(previous, status=status, updated_at=state.updated_at)
    cmd = StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(state))
    await run.commit(cmd.extend(outcome.command))
    # the final status travels with the durable message, so a replay (ACP session/load) shows failures
    metadata = {"status": "failed"} if result.is_error else None
    text = (TextBlock(text=result.text_for_model()),)
    message = Message(role="tool", content=text, tool_call_id=call.id, run_id=run.run_id, metadata=metadata)
    run.messages.append(message)
    if run.deps.sink is None:  # an event is built only for someone who listens
        return
    if resumed:
        await run.emit(
            ToolCallResumed(target_id=call.id, result=_resumed_payload(result), outcome=status, tool_result=result)
        )
    else:
        await run.emit(ToolCallDone(id=call.id, message_id=message.id, result=result, outcome=status))


async def suspend_call(
    run: RunState, call: ToolCall, ticket: SuspendTicket, message: str, metadata: dict[str, Any] | None = None
) -> None:
    ticket = await _with_preview(run, call, ticket)
    state = ToolCallState(
        call_id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        status="suspended",
        updated_at=now_ms(),
        resume_mode=ticket.resume_mode,
        suspension_id=ticket.suspension.id,
        suspension_reason=ticket.suspension.action,
        ticket=ticket,
    )
    await run.commit(StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(state)))
    result = replace(ToolResult.suspended(call.name, ticket, message), metadata=dict(metadata or {}))
    await run.emit(ToolCallDone(id=call.id, message_id=new_id(), result=result, outcome="suspended"))


async def _with_preview(run: RunState, call: ToolCall, ticket: SuspendTicket) -> SuspendTicket:
    """``ticket`` with what approving would do (``Tool.preview``), worked out now through the call's own context
    (the editor's file system when there is one)."""
    tool = run.tool(call.name)
    if tool is None or ticket.resume_mode != "replay_tool_call" or ticket.suspension.preview is not None:
        return ticket
    preview = await preview_call(tool, call.arguments, run.call_context(call, run.state.snapshot(), None))
    if preview is None:
        return ticket
    return replace(ticket, suspension=replace(ticket.suspension, preview=preview))


def waiting_state(run: RunState) -> WaitingState:
    tickets: list[WaitingTicket] = []
    for s in run.suspended_calls():
        t = s.ticket or default_ticket(ToolCall(id=s.call_id, name=s.tool_name, arguments=s.arguments))
        tickets.append(
            WaitingTicket(
                ticket_id=t.suspension.id or s.call_id,
                tool_call_id=s.call_id,
                tool_name=s.tool_name,
                arguments=s.arguments,
                resume_mode=s.resume_mode,
                reason=t.suspension.action,
                message=t.suspension.message,
                updated_at=s.updated_at,
                preview=t.suspension.preview,
            )
        )
    return WaitingState(reason=waiting_reason_for("suspended"), tickets=tuple(tickets))


async def set_waiting(run: RunState) -> None:
    await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_waiting("suspended")))
    run.record.waiting = waiting_state(run)


async def cancel_suspended(run: RunState, marker: str, *, keep: Collection[str] = ()) -> None:
    """Cancel every suspended call but those in ``keep``, answering each with ``marker`` so the model sees it
    settled."""
    suspended = [s for s in run.suspended_calls() if s.call_id not in keep]
    states, messages = cancelled_calls(suspended, run.run_id, marker)
    cmd = StateCommand()
    for s in states:
        cmd.update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(s))
    run.messages.extend(messages)
    await run.commit(cmd)


def cancelled_calls(
    suspended: Iterable[ToolCallState], run_id: str, marker: str
) -> tuple[list[ToolCallState], list[Message]]:
    """The ``suspended`` calls cancelled, each with the tool message (``marker``) that settles it for the model: one
    answer for a live run ending and for a run ended in the store (``finish.cancel_stored``)."""
    now = now_ms()
    states = [replace(s, status="cancelled", updated_at=now) for s in suspended]
    messages = [replace(Message.tool(s.call_id, marker, internal=True), run_id=run_id) for s in states]
    return states, messages


def default_ticket(call: ToolCall) -> SuspendTicket:
    return SuspendTicket(
        suspension=Suspension(
            id=call.id,
            action=f"tool:{call.name}",
            message=f"Tool '{call.name}' is waiting for a decision",
            parameters=call.arguments,
        ),
        pending=PendingToolCall(id=call.id, name=call.name, arguments=call.arguments),
        resume_mode="pass_decision_to_tool",
    )


def _valid_result(result: ToolResult) -> ToolResult:
    """The result with valid text only (what the conversation stores and clients are sent)."""
    message = valid_text(result.message) if result.message is not None else None
    data = valid_value(result.data)
    if message is result.message and data is result.data:
        return result
    return replace(result, message=message, data=data)


def _resumed_payload(result: ToolResult) -> Any:
    if result.is_error:
        return {"error": result.message or json.dumps(result.data, default=str)}
    if result.metadata:
        return {"data": result.data, "metadata": result.metadata}
    return result.data
