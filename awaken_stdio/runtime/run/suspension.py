"""Decisions for suspended calls: checking and applying them, waiting for them on a live channel, and replaying
the calls they resume (through gate and tool again) or reporting the ones they cancel.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from awaken_stdio.contract.errors import DecisionTargetNotFound
from awaken_stdio.contract.events import RunFinish, RunResult, RunStart, ToolCallResumed
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.suspension import Decisions, ToolCallResume, bind
from awaken_stdio.contract.tools import ToolResult
from awaken_stdio.runtime.executors import CallResult
from awaken_stdio.runtime.plugins import Block, Phase, SetResult, Suspend
from awaken_stdio.runtime.run.calls import AWAITING_APPROVAL, commit_call, set_waiting, suspend_call
from awaken_stdio.runtime.run.finish import checkpoint
from awaken_stdio.runtime.run.shown import changed_since_shown
from awaken_stdio.runtime.run.state import RunState, StopRun
from awaken_stdio.runtime.run.tools import after_tool, gate, invoke, not_found, rejected
from awaken_stdio.runtime.runtime_keys import (
    RUN_LIFECYCLE,
    TOOL_CALL_STATES,
    LifecycleUpdate,
    ToolCallState,
    ToolCallStatesUpdate,
)

__all__ = ["apply_decisions", "check_decisions", "replay", "suspend_and_wait"]

log = logging.getLogger(__name__)
# the result of a call whose earlier attempt's outcome was unknown, recorded as done by the person, not run again
RECORDED_DONE = "Not run again: the earlier attempt was interrupted and the person recorded it as done."


def check_decisions(run: RunState, decisions: Decisions) -> None:
    """Refuse an activation whose decisions name no call of the thread, before the run starts or changes."""
    states = run.tool_states()
    for target, _ in decisions:
        if _decision_target(states, target) is None:
            raise DecisionTargetNotFound(target)


async def apply_decisions(run: RunState, decisions: Decisions) -> list[str]:
    """Move each targeted suspended call to resuming (resume) or cancelled (cancel); returns the call ids.

    An activation's decisions were checked by :func:`check_decisions`; live decisions for a call this run does
    not know are logged and dropped, so a stale answer cannot kill a run.
    """
    states = run.tool_states()
    cmd = StateCommand()
    targets: list[str] = []
    for target, decision in decisions:
        state = _decision_target(states, target)
        if state is None:
            log.warning("run %s: dropping a decision for unknown call or suspension %s", run.run_id, target)
            continue
        if state.status != "suspended" or state.call_id in targets:
            continue  # a duplicate delivery of an applied decision: idempotent
        if decision.action == "resume" and decision.unknown is None and state.outcome_unknown:
            log.warning("run %s: not running %s again without the person's choice", run.run_id, state.call_id)
            continue  # the earlier attempt may have had its effect: it stays asked, "unknown" (``OutcomeUnknown``)
        status = "resuming" if decision.action == "resume" else "cancelled"
        # an approval holds for the preview stored with the question, unless its surface showed one worked out again
        decision = bind(decision, state.ticket.suspension.preview if state.ticket else None)
        new = replace(state, status=status, resume_input=decision, updated_at=now_ms())
        cmd.update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(new))
        targets.append(state.call_id)
        make = run.tool_ctx(
            Phase.TOOL_GATE,
            ToolCall(id=state.call_id, name=state.tool_name, arguments=state.arguments),
            resume_input=decision,
        )
        for plugin in run.deps.agent.plugins:
            await plugin.on_decision(make(), decision)
    await run.commit(cmd)
    return sorted(targets)


async def suspend_and_wait(run: RunState) -> TerminationReason | None:
    """Report the suspension; then either end the run (no live channel) or wait for decisions.

    Returns ``None`` when every suspended call is resolved and the loop should infer again.
    """
    while True:
        if run.record.waiting is None or run.state.snapshot().get(RUN_LIFECYCLE).status != "waiting":
            await set_waiting(run)
            await checkpoint(run, settles=True)
            await run.emit_state()
        await run.emit(
            RunFinish(
                thread_id=run.thread_id,
                run_id=run.run_id,
                termination=TerminationReason.suspended(),
                result=RunResult(response=run.response, status="waiting"),
            )
        )
        if run.deps.decisions is None or not run.deps.activation.wait_for_decisions:
            return TerminationReason.suspended()
        targets = await _receive_decisions(run, run.deps.decisions)
        await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_running()))
        run.record.waiting = None
        await run.emit(
            RunStart(
                thread_id=run.thread_id,
                run_id=run.run_id,
                agent_id=run.deps.agent.id,
                parent_run_id=run.deps.activation.parent_run_id,
            )
        )
        blocked = await replay(run, targets)
        if blocked is not None:
            raise StopRun(blocked)
        if not run.suspended_calls():
            return None


async def _receive_decisions(run: RunState, decisions: MemoryObjectReceiveStream[Decisions]) -> list[str]:
    """Wait until decisions resolve at least one suspended call; returns the resolved call ids."""
    while True:
        batch = await decisions.receive()
        while True:  # everything already queued is applied together
            try:
                batch = batch + decisions.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream):
                break
        targets = await apply_decisions(run, batch)
        if targets:
            return targets


async def replay(run: RunState, targets: list[str]) -> TerminationReason | None:
    """Report cancelled calls and re-run resuming ones through gate and tool; ``blocked`` (or a fatal tool
    error) ends the run. An approved call whose target changed since its preview is suspended again instead."""
    states = run.tool_states()
    for call_id in targets:
        state = states[call_id]
        decision = state.resume_input
        if state.status != "cancelled" or decision is None:
            continue
        text = _rejection_text(state.tool_name, decision)
        # failed, as it is reported now: the status travels with the message, so a replay (ACP session/load) agrees
        message = replace(Message.tool(call_id, text), run_id=run.run_id, metadata={"status": "failed"})
        run.messages.append(message)
        await run.emit(ToolCallResumed(target_id=call_id, result=decision.result, outcome="failed"))
    for call_id in targets:
        state = run.tool_states()[call_id]
        if state.status != "resuming":
            continue
        call = ToolCall(
            id=call_id, name=state.tool_name, arguments=state.arguments if isinstance(state.arguments, dict) else {}
        )
        if state.resume_input is not None and state.resume_input.unknown == "done":
            await commit_call(
                run, CallResult(call=call, result=ToolResult.success(call.name, RECORDED_DONE)), resumed=True
            )
            continue
        tool = run.tool(call.name)
        if tool is None:
            await commit_call(run, not_found(call), resumed=True)
            continue
        decision = await gate(run, call, tool, state.resume_input)
        if isinstance(decision, Block):
            await commit_call(run, rejected(call, decision), resumed=True)
            return TerminationReason.blocked(decision.reason)
        if isinstance(decision, Suspend):
            await suspend_call(run, call, decision.ticket, AWAITING_APPROVAL.format(call.name))
            continue
        if isinstance(decision, SetResult):
            outcome = await after_tool(
                run, call, tool=tool, result=decision.result, command=StateCommand(), resume=state.resume_input
            )
        elif (again := await changed_since_shown(run, call, tool, state)) is not None:
            await suspend_call(run, call, again, again.suspension.message)  # never blind: the new diff is asked
            continue
        else:
            outcome = await invoke(run, call, None, state)
        await commit_call(run, outcome, resumed=True)
        if run.fatal is not None:
            return TerminationReason.error(run.fatal)
    return None


def _decision_target(states: dict[str, ToolCallState], target: str) -> ToolCallState | None:
    """The call a decision targets, by call id or suspension id, if it is (or was just) waiting for one."""
    state = states.get(target) or next((s for s in states.values() if s.suspension_id == target), None)
    if state is None or state.status not in ("suspended", "resuming", "cancelled"):
        return None
    return state


def _rejection_text(tool_name: str, decision: ToolCallResume) -> str:
    result = decision.result
    if isinstance(result, dict) and result.get("approved") is False:
        reason = decision.reason or result.get("reason")
        return f"The user rejected the call to '{tool_name}'" + (f": {reason}" if reason else ".")
    if result is None:
        return f"The call to '{tool_name}' was cancelled" + (f": {decision.reason}" if decision.reason else ".")
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
