"""Crash recovery from the effect ledger: the calls a dead process left behind, settled before the run goes on."""

from __future__ import annotations

import anyio

from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, PendingToolCall, SuspendTicket, Suspension
from awaken_stdio.runtime.run.calls import suspend_call
from awaken_stdio.runtime.run.state import RunState

__all__ = ["recover_effects"]


async def recover_effects(run: RunState) -> set[str]:
    """Settle the calls a dead process left behind, from the effect ledger.

    The ledger's open entries come with the thread (``Store.load_thread_for_run``). A call that started and whose
    result never reached the conversation (the checkpoint appending it settles its entry) is marked
    ``unknown_after_crash`` and offered for approval again, saying so, never silently run again. Returns the ids of
    the decisions those unknown attempts ran under: they cannot approve the call a second time.
    """
    if run.deps.ledger is None or not run.open_effects:  # read with the thread; a thread made for this run has no past
        return set()
    answered = {m.tool_call_id for m in run.messages if m.role == "tool"}
    effects = [e for e in run.open_effects if e.call_id not in answered]
    run.open_effects = []
    if not effects:
        return set()
    calls = {c.id: c for m in run.messages for c in m.tool_calls}
    states = run.tool_states()
    with anyio.CancelScope(shield=True):
        started = [e.call_id for e in effects if e.status == "started"]
        await run.deps.ledger.mark_effects_unknown(run.thread_id, started, now_ms(), run.fence)
    for e in effects:
        state = states.get(e.call_id)
        if e.status == "unknown_after_crash" and state is not None and state.status == "suspended":
            continue  # already offered again
        call = calls.get(e.call_id) or ToolCall(id=e.call_id, name=e.tool_name, arguments=e.arguments)
        if e.call_id not in calls:  # its step was never committed: the call joins the conversation now
            run.messages.append(Message(role="assistant", content=(), tool_calls=(call,), run_id=run.run_id))
        message = (
            f"The earlier attempt of tool '{call.name}' was interrupted (the process stopped) and its outcome "
            "is unknown; approve to run it again"
        )
        ticket = SuspendTicket(
            suspension=Suspension(
                id=f"perm_{call.id}", action=OUTCOME_UNKNOWN_ACTION, message=message, parameters=call.arguments
            ),
            pending=PendingToolCall(id=f"perm_{call.id}", name="permission_confirm", arguments=call.arguments),
            resume_mode="replay_tool_call",
        )
        await suspend_call(run, call, ticket=ticket, message=message, metadata={"unknown_after_crash": True})
        run.reasked = True
    return {e.decision_id for e in effects if e.decision_id}
