"""Crash recovery from the effect ledger: the calls a dead process left behind, settled before the run goes on."""

from __future__ import annotations

import anyio

from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.contract.tools import ToolResult
from awaken_stdio.runtime.executors import CallResult
from awaken_stdio.runtime.run.calls import commit_call, suspend_call
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import TOOL_CALL_STATES, ToolCallState, ToolCallStatesUpdate

__all__ = ["recover_effects"]


async def recover_effects(run: RunState) -> set[str]:
    """Settle the calls a dead process left behind, from the effect ledger.

    A call that finished but whose result never reached the conversation is reported with its recorded result
    (not run again); one that started and never finished is marked ``unknown_after_crash`` and offered for
    approval again, saying so. Returns the ids of the decisions those unknown attempts ran under: they cannot
    approve the call a second time.
    """
    if run.ledger is None or run.activation.thread_id is None:  # a thread made for this run has no past
        return set()
    answered = {m.tool_call_id for m in run.messages if m.role == "tool"}
    calls = {c.id: c for m in run.messages for c in m.tool_calls}
    states = run.tool_states()
    wanted = {c for c, s in states.items() if s.status in ("suspended", "resuming", "running")}
    wanted.update(c for c in calls if c not in answered)
    effects = [e for e in await run.ledger.open_effects(run.thread_id, sorted(wanted)) if e.call_id not in answered]
    if not effects:
        return set()
    with anyio.CancelScope(shield=True):
        started = [e.call_id for e in effects if e.status == "started"]
        await run.ledger.mark_effects_unknown(run.thread_id, started, now_ms())
    for e in effects:
        state = states.get(e.call_id)
        result = ToolResult.from_json(e.result) if e.status == "finished" and e.result is not None else None
        if e.status == "finished" and (result is None or result.is_pending):
            continue
        if e.status == "unknown_after_crash" and state is not None and state.status == "suspended":
            continue  # already offered again
        call = calls.get(e.call_id) or ToolCall(e.call_id, e.tool_name, e.arguments)
        if e.call_id not in calls:  # its step was never committed: the call joins the conversation now
            run.messages.append(Message("assistant", (), (call,), run_id=run.run_id))
        if result is not None:
            put = ToolCallStatesUpdate.put(ToolCallState(call.id, call.name, call.arguments, "resuming"))
            await run.commit(StateCommand().update(TOOL_CALL_STATES, put))
            await commit_call(run, CallResult(call, result), resumed=True)
            continue
        message = (
            f"The earlier attempt of tool '{call.name}' was interrupted (the process stopped) and its outcome "
            "is unknown; approve to run it again"
        )
        ticket = SuspendTicket(
            Suspension(f"perm_{call.id}", OUTCOME_UNKNOWN_ACTION, message, call.arguments),
            PendingToolCall(f"perm_{call.id}", "permission_confirm", call.arguments),
            "replay_tool_call",
        )
        await suspend_call(run, call, ticket, message, {"unknown_after_crash": True})
        run.reasked = True
    return {e.decision_id for e in effects if e.status != "finished" and e.decision_id}
