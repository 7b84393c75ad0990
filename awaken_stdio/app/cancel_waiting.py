"""Ending a run that waits in the store (or died running) as cancelled, where no process runs it.

The mailbox service carries out a ``cancel`` dispatch with it. It writes one checkpoint: each suspended call
cancelled (with a tool message saying so), the run done. A live run is cancelled by its loop instead.
"""

from __future__ import annotations

from dataclasses import replace

from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import Checkpoint, Store
from awaken_stdio.runtime.activation import AgentRunResult
from awaken_stdio.runtime.runtime_keys import TOOL_CALL_STATES

__all__ = ["CANCELLED_TEXT", "cancel_waiting"]

CANCELLED_TEXT = "[tool call cancelled with the run]"


async def cancel_waiting(store: Store, run_id: str) -> AgentRunResult | None:
    """End a run that waits in the store (or died running) as cancelled, its suspended calls cancelled."""
    record = await store.load_run(run_id)
    if record is None or record.status == "done":
        return None
    loaded = await store.load_thread(record.thread_id)
    if loaded is None:
        return None
    state = loaded.state or PersistedState()
    states = TOOL_CALL_STATES.decode(state.extensions.get(TOOL_CALL_STATES.key))
    messages = []
    now = now_ms()
    for call_id, s in sorted(states.items()):
        if s.status == "suspended":
            states[call_id] = replace(s, status="cancelled", updated_at=now)
            messages.append(replace(Message.tool(call_id, CANCELLED_TEXT, internal=True), run_id=run_id))
    extensions = {**state.extensions, TOOL_CALL_STATES.key: TOOL_CALL_STATES.encode(states)}
    record.status, record.termination, record.status_reason = "done", TerminationReason.cancelled(), "cancelled"
    record.waiting, record.updated_at = None, now
    new_state = PersistedState(state.revision + 1, extensions)
    await store.checkpoint(Checkpoint(record.thread_id, loaded.thread.message_count, messages, record, new_state))
    return AgentRunResult(
        run_id, record.thread_id, record.agent_id, "", record.termination, record.steps, status="cancelled"
    )
