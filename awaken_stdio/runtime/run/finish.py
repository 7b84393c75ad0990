"""Checkpoints and the end of a run: what reaches the durable store, and how a run is recorded as over.

The conversation and the run record reach the store only here: at every step end, before anyone is asked
anything, and at the end (finished, cancelled or failed), never per event.
"""

from __future__ import annotations

import logging

import anyio

from awaken_stdio.contract.errors import ProviderError, VersionConflict
from awaken_stdio.contract.events import ErrorEvent, RunFinish, RunResult
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message, TextBlock, valid_text
from awaken_stdio.contract.state import StateCommand
from awaken_stdio.contract.stores import Checkpoint, RunRecord
from awaken_stdio.runtime.activation import AgentRunResult
from awaken_stdio.runtime.plugins import Phase
from awaken_stdio.runtime.run.calls import cancel_suspended
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, LifecycleUpdate

__all__ = ["CHECKPOINT_RETRIES", "checkpoint", "fail", "finish_or_fail", "result"]

log = logging.getLogger(__name__)

CHECKPOINT_RETRIES = 8  # checkpoints lost to other writers' appends before giving up
_CANCELLED_WITH_RUN = "[tool call cancelled with the run]"


def _sync_record(run: RunState) -> RunRecord:
    lifecycle = run.state.snapshot().get(RUN_LIFECYCLE)
    r = run.record
    r.status = lifecycle.status if lifecycle.run_id else r.status
    if r.status != "waiting":
        r.waiting = None
    r.status_reason = lifecycle.status_reason
    r.steps = run.steps
    r.usage = run.usage
    r.response = run.response or r.response
    r.updated_at = now_ms()
    r.state = run.state.export_run_scoped()
    return r


async def checkpoint(run: RunState) -> None:
    """Write the new messages, the run record and the thread state in one atomic store call."""
    if run.store is None:
        return
    record = _sync_record(run).copy()
    thread_state = run.state.export_thread_scoped()
    new = run.messages[run.written :]
    with anyio.CancelScope(shield=True):
        for _ in range(CHECKPOINT_RETRIES):
            try:
                await run.store.checkpoint(Checkpoint(run.thread_id, run.stored_count, new, record, thread_state))
            except VersionConflict:
                # Another writer appended to the thread meanwhile: our messages go after theirs.
                loaded = await run.store.load_thread(run.thread_id)
                run.stored_count = loaded.thread.message_count if loaded else 0
                continue
            run.written += len(new)
            run.stored_count += len(new)
            return
        raise VersionConflict(f"thread {run.thread_id}", run.stored_count, None)


async def _finish(run: RunState, termination: TerminationReason) -> None:
    if termination.type == "cancelled" and run.partial_text:
        text = "".join(run.partial_text)
        run.messages.append(
            Message(
                "assistant",
                (TextBlock(text),),
                id=run.partial_id or new_id(),
                run_id=run.run_id,
                interrupted=True,
            )
        )
        run.partial_text = []
    if termination.type == "cancelled":
        await cancel_suspended(run, _CANCELLED_WITH_RUN)
    await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.done_reason)))
    run.engine.drop_pending()
    try:
        await run.engine.run_phase(Phase.RUN_END, run.ctx(Phase.RUN_END))
    except Exception:
        log.exception("run_end hooks failed for run %s", run.run_id)
    run.record.termination = termination
    run.record.waiting = None
    if termination.type == "error":
        run.record.error = str(termination.value)
    await checkpoint(run)
    await run.emit_state()
    status = run.record.display_status
    await run.emit(
        RunFinish(run.thread_id, run.run_id, termination, RunResult(run.response, status, termination.done_reason))
    )


async def finish_or_fail(run: RunState, termination: TerminationReason) -> Exception | None:
    """Record the run's end; if that fails (the store, a hook, the sink), the run is recorded failed instead and
    the failure returned for the caller to raise."""
    try:
        await _finish(run, termination)
    except Exception as exc:
        await fail(run, exc)
        return exc
    return None


async def fail(run: RunState, error: BaseException) -> None:
    """An infrastructure failure: the run recorded as failed with the error as its reason, then an ``error``
    event (no RunFinish). Each part is best effort: the store or the sink may be what failed."""
    code = error.kind if isinstance(error, ProviderError) else type(error).__name__
    termination = TerminationReason.error(valid_text(str(error) or type(error).__name__))
    try:
        await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.done_reason)))
        run.record.termination = termination
        run.record.error = termination.done_reason
        run.record.waiting = None
        await checkpoint(run)
    except Exception:
        log.exception("could not record the failure of run %s", run.run_id)
    try:
        await run.emit(ErrorEvent(termination.done_reason or "error", code))
        make = run.ctx(Phase.RUN_END)
        for plugin in run.agent.plugins:
            await plugin.on_run_failed(make(), error)
    except Exception:
        log.exception("could not report the failure of run %s", run.run_id)


def result(run: RunState, termination: TerminationReason) -> AgentRunResult:
    run.record.termination = run.record.termination or termination
    waiting = run.record.waiting
    pending = list(waiting.tickets) if termination.type == "suspended" and waiting else []
    return AgentRunResult(
        run.run_id,
        run.thread_id,
        run.agent.id,
        run.response,
        termination,
        run.steps,
        run.usage,
        "waiting" if termination.type == "suspended" else run.record.display_status,
        pending,
        termination.done_reason,
    )
