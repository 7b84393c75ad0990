"""Checkpoints and the end of a run: what reaches the durable store, and how a run is recorded as over.

The conversation and the run record reach the store only here: at every step end, before anyone is asked
anything, and at the end (finished, cancelled or failed), never per event. A run waiting in the store that no
process runs is ended here too (``cancel_stored``), and every write goes through one retry (``write_checkpoint``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import anyio

from awaken_stdio.contract.activation import AgentRunResult
from awaken_stdio.contract.errors import InvalidResume, ProviderError, VersionConflict
from awaken_stdio.contract.events import ErrorEvent, RunFinish, RunResult
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message, TextBlock, valid_text
from awaken_stdio.contract.state import PersistedState, StateCommand
from awaken_stdio.contract.stores import Checkpoint, LoadedThread, RunRecord, Store
from awaken_stdio.runtime.plugins import Phase
from awaken_stdio.runtime.run.calls import CANCELLED_WITH_RUN, cancel_suspended, cancelled_calls
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, TOOL_CALL_STATES, LifecycleUpdate

__all__ = [
    "CHECKPOINT_RETRIES",
    "cancel_stored",
    "checkpoint",
    "fail",
    "finish_or_fail",
    "result",
    "write_checkpoint",
]

log = logging.getLogger(__name__)

CHECKPOINT_RETRIES = 8  # checkpoints lost to other writers' appends before giving up


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

    def after(loaded: LoadedThread | None) -> Checkpoint:  # another writer appended meanwhile: ours go after theirs
        return Checkpoint(run.thread_id, loaded.thread.message_count if loaded else 0, new, record, thread_state)

    with anyio.CancelScope(shield=True):
        first = Checkpoint(run.thread_id, run.stored_count, new, record, thread_state)
        written = await write_checkpoint(run.store, run.thread_id, after, first)
        run.written += len(new)
        run.stored_count = written.expected_message_count + len(new)


async def write_checkpoint(
    store: Store, thread_id: str, build: Callable[[LoadedThread | None], Checkpoint], first: Checkpoint | None = None
) -> Checkpoint:
    """Write ``first``, or what ``build`` makes of the thread as the store holds it; when another writer appended to
    the thread in between (``VersionConflict``: it guards the message count), read it again and build anew, up to
    ``CHECKPOINT_RETRIES`` times. Returns the checkpoint written."""
    attempt, expected = first, 0
    for _ in range(CHECKPOINT_RETRIES):
        if attempt is None:
            attempt = build(await store.load_thread(thread_id))
        expected = attempt.expected_message_count
        try:
            await store.checkpoint(attempt)
        except VersionConflict:
            attempt = None
            continue
        return attempt
    raise VersionConflict(f"thread {thread_id}", expected, None)


async def cancel_stored(store: Store, run_id: str) -> AgentRunResult | None:
    """End a run that waits in the store (or died running), where no process runs it, as cancelled: one checkpoint
    with each suspended call cancelled (a tool message saying so, as when a live run is cancelled) and the run done.
    None when there is no such run or it is over already."""
    record = await store.load_run(run_id)
    if record is None or record.status == "done":
        return None
    loaded = await store.load_thread(record.thread_id)
    if loaded is None:
        return None
    record.status, record.termination, record.status_reason = "done", TerminationReason.cancelled(), "cancelled"
    record.waiting, record.updated_at = None, now_ms()

    def cancelling(loaded: LoadedThread | None) -> Checkpoint:
        if loaded is None:
            raise InvalidResume(f"the thread of run {run_id} was deleted while it was being cancelled")
        state = loaded.state or PersistedState()
        states = TOOL_CALL_STATES.decode(state.extensions.get(TOOL_CALL_STATES.key))
        suspended = sorted((s for s in states.values() if s.status == "suspended"), key=lambda s: s.call_id)
        settled, messages = cancelled_calls(suspended, run_id, CANCELLED_WITH_RUN)
        states.update((s.call_id, s) for s in settled)
        extensions = {**state.extensions, TOOL_CALL_STATES.key: TOOL_CALL_STATES.encode(states)}
        new_state = PersistedState(state.revision + 1, extensions)
        return Checkpoint(record.thread_id, loaded.thread.message_count, messages, record, new_state)

    await write_checkpoint(store, record.thread_id, cancelling, cancelling(loaded))
    return AgentRunResult(
        run_id, record.thread_id, record.agent_id, "", record.termination, record.steps, status="cancelled"
    )


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
        await cancel_suspended(run, CANCELLED_WITH_RUN)
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
