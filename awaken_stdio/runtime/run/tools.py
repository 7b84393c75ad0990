"""Running the model's tool calls: gates, the tool itself between its phases, and the effect ledger's marks.

Every call goes through :func:`invoke`: the tool found, its arguments checked, BEFORE/AFTER_TOOL_EXECUTE around it.
A tool that changes something is marked started in the effect ledger first, so a crash never runs it twice unasked
(``docs/approvals.md``). ``calls.commit_call`` records the outcome. The tool itself runs in :func:`execute_tool`,
which a client's direct call outside any run (``App.call_tool``) shares.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from awaken_stdio.contract.errors import Fenced, ToolError, ToolFailure
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import EffectRecord
from awaken_stdio.contract.messages import ToolCall, valid_text
from awaken_stdio.contract.state import Snapshot, StateCommand
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.tools import Tool, ToolCallContext, ToolOutput, ToolResult, tool_error_result
from awaken_stdio.runtime.executors import INTERRUPTED, CallResult, executor_for
from awaken_stdio.runtime.plugins import Block, GateDecision, Phase, SetResult, Suspend
from awaken_stdio.runtime.run.calls import AWAITING_APPROVAL, commit_call, suspend_call
from awaken_stdio.runtime.run.finish import checkpoint, flush
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import ToolCallState

__all__ = [
    "Executed",
    "after_tool",
    "execute_tool",
    "gate",
    "interrupt",
    "invoke",
    "not_found",
    "rejected",
    "run_tools",
]

log = logging.getLogger(__name__)

_GATE_PRIORITY = {Block: 3, Suspend: 2, SetResult: 1}
_RAW_ARGUMENTS = "__raw_arguments"  # what StreamAccumulator keeps of arguments that did not parse


async def gate(run: RunState, call: ToolCall, tool: Tool, resume_input: ToolCallResume | None) -> GateDecision | None:
    gates = run.deps.agent.registrar.gates
    if not gates:
        return None
    make = run.tool_ctx(Phase.TOOL_GATE, call, tool, resume_input=resume_input)
    if len(gates) == 1:
        return await gates[0][1](make())
    decisions: list[GateDecision | None] = [None] * len(gates)

    async def one(i: int) -> None:
        decisions[i] = await gates[i][1](make())

    async with anyio.create_task_group() as tg:
        for i in range(len(gates)):
            tg.start_soon(one, i)
    best: GateDecision | None = None
    for d in decisions:
        if d is not None and (best is None or _GATE_PRIORITY[type(d)] > _GATE_PRIORITY[type(best)]):
            best = d
    return best


async def run_tools(run: RunState, calls: tuple[ToolCall, ...] | list[ToolCall]) -> TerminationReason | None:
    """Gate each call in order; run allowed ones in batches.

    Returns the termination a call decided: ``blocked`` by a gate, or ``error`` when a tool raised a fatal
    ``ToolError`` (the calls after it are interrupted, and the model is not called again).
    """
    executor = executor_for(run.deps.agent.spec.tool_executor)
    gated = bool(run.deps.agent.registrar.gates)  # else no call is gated: no coroutine per call to learn it
    batch: list[ToolCall] = []

    async def flush() -> bool:
        nonlocal batch
        if not batch:
            return True
        todo, batch = batch, []
        done = await executor.execute(todo, partial(invoke, run), partial(commit_call, run), run.state.snapshot())
        return done and run.fatal is None

    for i, call in enumerate(calls):
        tool = run.tool(call.name)
        if tool is None:
            batch.append(call)  # invoke reports "tool 'X' not found"
            continue
        decision = await gate(run, call, tool, None) if gated else None
        if decision is not None and batch:
            if not await flush():
                await interrupt(run, calls[i:])
                return _fatal_end(run)
            decision = await gate(run, call, tool, None)  # re-evaluated on the state after the batch
        if decision is None:
            batch.append(call)
        elif isinstance(decision, Block):
            await commit_call(run, rejected(call, decision))
            await interrupt(run, calls[i + 1 :])
            return TerminationReason.blocked(decision.reason)
        elif isinstance(decision, Suspend):
            await suspend_call(run, call, decision.ticket, AWAITING_APPROVAL.format(call.name))
        else:
            await commit_call(
                run, await after_tool(run, call, tool=tool, result=decision.result, command=StateCommand())
            )
    await flush()
    return _fatal_end(run)


def _fatal_end(run: RunState) -> TerminationReason | None:
    return TerminationReason.error(run.fatal) if run.fatal is not None else None


async def interrupt(run: RunState, calls: tuple[ToolCall, ...] | list[ToolCall]) -> None:
    for call in calls:
        await commit_call(run, CallResult(call=call, result=ToolResult.error(call.name, INTERRUPTED)))


async def invoke(
    run: RunState, call: ToolCall, snapshot: Snapshot | None, state: ToolCallState | None = None
) -> CallResult:
    tool = run.tool(call.name)
    if tool is None:
        return not_found(call)
    resume = state.resume_input if state else None
    if run.deps.engine.hooked(Phase.BEFORE_TOOL_EXECUTE):  # else no context is built for nobody
        ctx = run.tool_ctx(Phase.BEFORE_TOOL_EXECUTE, call, tool, resume_input=resume)
        await run.commit(await run.deps.engine.collect_commands(Phase.BEFORE_TOOL_EXECUTE, ctx))
    ctx = run.call_context(call, snapshot or run.state.snapshot(), state)
    started = False

    async def mark() -> None:
        nonlocal started
        started = await _effect_started(run, call, tool, resume)

    try:
        # in memory there is no ledger to mark anything in
        before = mark if run.deps.ledger is not None else None
        done = await execute_tool(tool, call.arguments, ctx, before=before, passing=(Fenced,))
    except anyio.get_cancelled_exc_class():
        if started:  # cancelled with the run, in a live process: not an unknown outcome to ask about later
            with contextlib.suppress(Fenced):  # unless the run is another holder's now: its ledger, not ours
                await _effect_finished(run, call, None)
        raise
    if started and done.result.is_pending:  # no result reaches the conversation: the mark settles the call
        await _effect_finished(run, call, done.result)
    outcome = await after_tool(run, call, tool=tool, result=done.result, command=done.command, resume=resume)
    outcome.fatal = done.fatal
    return outcome


@dataclass(slots=True, kw_only=True)
class Executed:
    """What one call of a tool came to: its result, the state command it returned, and ``fatal``, the reason to end
    the run when the tool's own work raised a ``ToolError`` (wrong arguments stay the model's to fix)."""

    result: ToolResult
    command: StateCommand = field(default_factory=StateCommand)
    fatal: str | None = None


async def execute_tool(
    tool: Tool,
    args: Any,
    ctx: ToolCallContext,
    *,
    before: Callable[[], Awaitable[None]] | None = None,
    passing: tuple[type[Exception], ...] = (),
) -> Executed:
    """Run one call of ``tool``, a run's or a client's direct one (``App.call_tool``): its arguments checked,
    ``before`` awaited (the effect ledger's mark), the tool run, and what it returned or raised made a result.
    ``passing``: exceptions that are the caller's signals (an MCP client's question), raised on, not a failure."""
    executing = False
    try:
        # a stored conversation (message_from_json) may hold any JSON value there
        checked: dict[str, Any] = args if isinstance(args, dict) else {}
        if _RAW_ARGUMENTS in checked:  # the model's arguments were not JSON: let it fix them, never run on junk
            raise ToolFailure(f"not valid JSON: {checked[_RAW_ARGUMENTS]}", "invalid_arguments")
        checked = tool.validate_args(checked)
        if before is not None:
            await before()
        executing = True
        out = await tool.execute(checked, ctx)
    except passing:
        raise
    except Exception as exc:
        log.debug("tool %s failed", tool.name, exc_info=True)
        fatal = executing and isinstance(exc, ToolError) and not isinstance(exc, ToolFailure)
        return Executed(
            result=tool_error_result(tool.name, exc), fatal=valid_text(f"{tool.name}: {exc}") if fatal else None
        )
    if isinstance(out, ToolOutput):
        return Executed(result=out.result, command=out.command)
    return Executed(result=out if isinstance(out, ToolResult) else ToolResult.success(tool.name, out))


async def _effect_started(run: RunState, call: ToolCall, tool: Tool, resume: ToolCallResume | None) -> bool:
    """The effect ledger's ``started`` mark, durable before the tool runs: written with everything of the run up to
    this call (its step included) in one checkpoint, fenced by the run's claim (``Fenced``: it moved on, so the
    call does not run). A crash before its result is checkpointed leaves the outcome unknown, visible to every
    decider and asked about, never silently run again. A read-only tool needs none (running it again changes
    nothing). The checkpoint that appends the result settles the mark. A store that failed fails the run here."""
    if run.deps.ledger is None or tool.descriptor.read_only:
        return False
    decision = resume.decision_id if resume is not None else None
    token = run.fence.claim_token if run.fence is not None else None
    record = EffectRecord(
        thread_id=run.thread_id,
        call_id=call.id,
        run_id=run.run_id,
        tool_name=call.name,
        arguments=call.arguments,
        decision_id=decision,
        claim_token=token,
    )
    async with run.deps.marking:  # calls run in parallel mark one at a time: each checkpoint follows the last
        if _stored(run, call):  # an approved call: its step was stored when it asked, the run still reads waiting
            await flush(run)
            with anyio.CancelScope(shield=True):
                await run.deps.ledger.effect_started(record, run.fence)
        else:
            await checkpoint(run, marks=[record])
    return True


def _stored(run: RunState, call: ToolCall) -> bool:
    """Whether the step that made ``call`` is in the store already. Searched from the newest message back: the step
    is the last one or close to it, so this costs the same at any conversation length."""
    messages = run.messages
    for i in range(len(messages) - 1, -1, -1):
        if any(c.id == call.id for c in messages[i].tool_calls):
            return i < run.written
    return False


async def _effect_finished(run: RunState, call: ToolCall, result: ToolResult | None) -> None:
    """The ``finished`` mark with the result to report after a crash (``None``: nothing to report)."""
    if run.deps.ledger is not None:
        data = result.to_json() if result is not None else None
        with anyio.CancelScope(shield=True):
            await run.deps.ledger.effect_finished(run.thread_id, call.id, result=data, now=now_ms(), fence=run.fence)


async def after_tool(
    run: RunState,
    call: ToolCall,
    tool: Tool,
    result: ToolResult,
    command: StateCommand,
    resume: ToolCallResume | None = None,
) -> CallResult:
    if run.deps.engine.hooked(Phase.AFTER_TOOL_EXECUTE):
        ctx = run.tool_ctx(Phase.AFTER_TOOL_EXECUTE, call, tool, tool_result=result, resume_input=resume)
        command.extend(await run.deps.engine.collect_commands(Phase.AFTER_TOOL_EXECUTE, ctx))
    return CallResult(call=call, result=result, command=command)


def not_found(call: ToolCall) -> CallResult:
    return CallResult(call=call, result=ToolResult.error(call.name, f"tool '{call.name}' not found"))


def rejected(call: ToolCall, block: Block) -> CallResult:
    """A call a gate blocked: an error result marked ``rejected``."""
    result = ToolResult.error(call.name, block.reason)
    result.metadata["rejected"] = True
    return CallResult(call=call, result=result)
