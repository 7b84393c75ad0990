"""Checkpoints and the end of a run: what reaches the durable store, and how a run is recorded as over.

The conversation and the run record reach the store only here: at every step end, before anyone is asked
anything, and at the end (finished, cancelled or failed), never per event. A run waiting in the store that no
process runs is ended here too (``cancel_stored``), and every write goes through one retry (``write_checkpoint``).

On a durable store a step end does not wait for its write (``checkpoint_soon``): it is written behind the loop only
when no other write comes within ``WRITE_BEHIND_AFTER_S`` (a slow model), one write in flight at a time, on the
database's own thread, and the step ends reached meanwhile are coalesced into the next write. A run whose model
answers sooner writes once per step that changes something (the checkpoint carrying its tool's start mark) and once
at its end. Everything the world outside the process sees waits for them (``flush``): a tool's durable start mark,
a question, the run's end. A crash can so lose only steps that did nothing outside the process (model turns,
read-only tools) and the results of calls whose start mark is stored: the first are done again, the second are
asked about (their outcome is unknown), and nothing that had an effect runs twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial

import anyio
from anyio.abc import TaskGroup

from awaken_stdio.contract.activation import AgentRunResult
from awaken_stdio.contract.errors import Fenced, InvalidResume, ProviderError, VersionConflict
from awaken_stdio.contract.events import ErrorEvent, RunFinish, RunResult
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import EffectRecord, Fence
from awaken_stdio.contract.messages import Message, TextBlock, valid_text
from awaken_stdio.contract.state import PersistedState, StateCommand
from awaken_stdio.contract.stores import Checkpoint, LoadedThread, RunRecord, Store
from awaken_stdio.runtime.plugins import Phase
from awaken_stdio.runtime.run.behind import EndOfStep, WriteBehind
from awaken_stdio.runtime.run.calls import CANCELLED_WITH_RUN, cancel_suspended, cancelled_calls
from awaken_stdio.runtime.run.state import RunState
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, TOOL_CALL_STATES, LifecycleUpdate

__all__ = [
    "CHECKPOINT_RETRIES",
    "WRITE_BEHIND_AFTER_S",
    "cancel_stored",
    "checkpoint",
    "checkpoint_soon",
    "fail",
    "finish_or_fail",
    "flush",
    "result",
    "write_behind",
    "write_checkpoint",
]

log = logging.getLogger(__name__)

CHECKPOINT_RETRIES = 8  # checkpoints lost to other writers' appends before giving up
# how long a step end waits for a write that carries it (the next step's mark, a question, the run's end) before it
# is written on its own: a model that answers within it costs no write of its own; a slow one has the step stored
# while it thinks, at one write for a step that took far longer than the write
WRITE_BEHIND_AFTER_S = 0.25


def _end_of_step(run: RunState) -> EndOfStep:
    return EndOfStep(
        upto=len(run.messages),
        state=run.state.snapshot(),
        steps=run.steps,
        usage=run.usage,
        response=run.response,
        at=now_ms(),
    )


def _written_at(run: RunState, end: EndOfStep, *, behind: bool = False) -> tuple[RunRecord, PersistedState]:
    """The run record and the thread state a checkpoint of ``end`` writes. The loop's own checkpoint keeps the record
    in ``run.record`` (the run's result reads it); a write ``behind`` the loop fills a copy: its step end may be
    older than what the loop has set since (the tickets of a question it asks), which it must not undo."""
    record = _record_at(run, end, run.record.copy() if behind else run.record)
    return record, run.state.export_thread_scoped(end.state)


def _record_at(run: RunState, end: EndOfStep, r: RunRecord) -> RunRecord:
    """``r`` brought to ``end``; a copy of it when it is ``run.record``."""
    lifecycle = end.state.get(RUN_LIFECYCLE)
    r.status = lifecycle.status if lifecycle.run_id else r.status
    if r.status != "waiting":
        r.waiting = None
    ended = r.termination if lifecycle.status == "done" else None  # a result's words, not the lifecycle key's
    r.status_reason = ended.done_reason if ended is not None else lifecycle.status_reason
    r.steps = end.steps
    r.usage = end.usage
    r.response = end.response or r.response
    r.updated_at = end.at
    r.state = run.state.export_run_scoped(end.state)
    return r.copy() if r is run.record else r


async def checkpoint(run: RunState, *, settles: bool = False, marks: Sequence[EffectRecord] = ()) -> None:
    """Write the new messages, the run record and the thread state in one atomic store call (after any write
    still behind the loop); when the run ends or waits (``settles``), with the dispatch executing it settled; with
    the effect-ledger ``marks`` of calls about to run."""
    if run.deps.store is None:
        return
    store = run.deps.store
    with anyio.CancelScope(shield=True):
        await flush(run, superseded=True)
        end = _end_of_step(run)
        upto, (record, thread_state) = end.upto, _written_at(run, end)
        new = run.messages[run.written : upto]

        settle = run.deps.activation.settle if settles else None
        if settle is not None and settle.acked:  # acked when the run waited: the dispatch is over already
            settle = None

        def at(count: int) -> Checkpoint:
            return Checkpoint(
                thread_id=run.thread_id,
                expected_message_count=count,
                messages=new,
                run=record,
                thread_state=thread_state,
                settle=settle,
                fence=run.fence,
                marks=list(marks),
            )

        def after(loaded: LoadedThread | None) -> Checkpoint:  # another writer appended meanwhile: ours go after
            return at(loaded.thread.message_count if loaded else 0)

        first = at(run.stored_count)
        written = await write_checkpoint(store, run.thread_id, after, first)
        run.written = upto
        run.stored_count = written.expected_message_count + len(new)


def write_behind(run: RunState, tasks: TaskGroup) -> WriteBehind:
    """The writer of ``run``'s step checkpoints behind its loop, in the run's ``tasks`` (``AgentLoop.run``, on a
    durable store)."""
    return WriteBehind(write=partial(_write_behind, run), tasks=tasks)


async def checkpoint_soon(run: RunState) -> None:
    """A step end's checkpoint, written behind the loop on a durable store when no checkpoint carries it within
    ``WRITE_BEHIND_AFTER_S``. In memory none is: nothing there outlives the process, so the next checkpoint (a
    question, the run's end) carries this step with it."""
    behind = run.deps.behind
    if behind is None:  # in memory (``AgentLoop.run`` writes behind on every durable store)
        return
    behind.wanted = _end_of_step(run)
    behind.schedule(WRITE_BEHIND_AFTER_S)


async def _write_behind(run: RunState, behind: WriteBehind) -> None:
    """Write the wanted step ends, latest first taken, until none is left. Shielded, and its own record of what
    reached the store is exact: a conversation written twice is the one thing a retry could not undo."""
    assert run.deps.store is not None
    with anyio.CancelScope(shield=True):
        try:
            while behind.wanted is not None and behind.error is None:
                end, behind.wanted = behind.wanted, None
                new = run.messages[run.written : end.upto]
                record, thread_state = _written_at(run, end, behind=True)
                await run.deps.store.checkpoint(
                    Checkpoint(
                        thread_id=run.thread_id,
                        expected_message_count=run.stored_count,
                        messages=new,
                        run=record,
                        thread_state=thread_state,
                        fence=run.fence,
                    )
                )
                run.written = end.upto
                run.stored_count += len(new)
        except Exception as exc:  # raised by the next flush, where the loop can fail the run
            behind.error, behind.wanted = exc, None
        finally:
            behind.done()


async def flush(run: RunState, *, superseded: bool = False) -> None:
    """Wait until every step end is in the store, or (``superseded``: the caller checkpoints everything next) until
    the write in flight is. A write behind that failed raises here; one that lost the thread to another writer
    (``VersionConflict``) is left for the next checkpoint, which reads the thread and writes after it."""
    behind = run.deps.behind
    if behind is None:
        return
    if superseded:
        behind.wanted = None
        behind.unschedule()
    else:
        behind.hurry()
    await behind.wait()
    error, behind.error = behind.error, None
    if error is not None and not isinstance(error, VersionConflict):
        raise error  # ``Fenced`` among them: a holder that lost its claim goes no further


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


async def cancel_stored(store: Store, run_id: str, fence: Fence | None = None) -> AgentRunResult | None:
    """End a run that waits in the store (or died running), where no process runs it, as cancelled: one checkpoint
    with each suspended call cancelled (a tool message saying so, as when a live run is cancelled) and the run done.
    None when there is no such run or it is over already. ``fence``: the claim the canceller holds."""
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
        new_state = PersistedState(revision=state.revision + 1, extensions=extensions)
        return Checkpoint(
            thread_id=record.thread_id,
            expected_message_count=loaded.thread.message_count,
            messages=messages,
            run=record,
            thread_state=new_state,
            fence=fence,
        )

    await write_checkpoint(store, record.thread_id, cancelling, cancelling(loaded))
    return AgentRunResult(
        run_id=run_id,
        thread_id=record.thread_id,
        agent_id=record.agent_id,
        response="",
        termination=record.termination,
        steps=record.steps,
        status="cancelled",
    )


async def _finish(run: RunState, termination: TerminationReason) -> None:
    if termination.type == "cancelled" and run.partial_text:
        text = "".join(run.partial_text)
        run.messages.append(
            Message(
                role="assistant",
                content=(TextBlock(text=text),),
                id=run.partial_id or new_id(),
                run_id=run.run_id,
                interrupted=True,
            )
        )
        run.partial_text = []
    if termination.type == "cancelled":
        await cancel_suspended(run, CANCELLED_WITH_RUN)
    await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.lifecycle_reason)))
    run.deps.engine.drop_pending()
    try:
        if not run.deps.engine.idle(Phase.RUN_END):
            await run.deps.engine.run_phase(Phase.RUN_END, run.ctx(Phase.RUN_END))
    except Exception:
        log.exception("run_end hooks failed for run %s", run.run_id)
    run.record.termination = termination
    run.record.waiting = None
    if termination.type == "error":
        run.record.error = str(termination.value)
    await checkpoint(run, settles=True)
    if run.deps.sink is not None:
        await run.emit_state()
        status = run.record.display_status
        result = RunResult(response=run.response, status=status, status_reason=termination.done_reason)
        await run.emit(RunFinish(thread_id=run.thread_id, run_id=run.run_id, termination=termination, result=result))


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
    if isinstance(error, Fenced):  # the run is another process's now: nothing of it is written from here
        log.warning("run %s: %s", run.run_id, error)
    else:
        try:
            await run.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.lifecycle_reason)))
            run.record.termination = termination
            run.record.error = termination.done_reason
            run.record.waiting = None
            await checkpoint(run)
        except Exception:
            log.exception("could not record the failure of run %s", run.run_id)
    try:
        await run.emit(ErrorEvent(message=termination.done_reason or "error", code=code))
        make = run.ctx(Phase.RUN_END)
        for plugin in run.deps.agent.plugins:
            await plugin.on_run_failed(make(), error)
    except Exception:
        log.exception("could not report the failure of run %s", run.run_id)


def result(run: RunState, termination: TerminationReason) -> AgentRunResult:
    run.record.termination = run.record.termination or termination
    waiting = run.record.waiting
    pending = list(waiting.tickets) if termination.type == "suspended" and waiting else []
    return AgentRunResult(
        run_id=run.run_id,
        thread_id=run.thread_id,
        agent_id=run.deps.agent.id,
        response=run.response,
        termination=termination,
        steps=run.steps,
        usage=run.usage,
        status="waiting" if termination.type == "suspended" else run.record.display_status,
        pending=pending,
        status_reason=termination.done_reason,
    )
