"""The mailbox service: every run, decision and cancellation becomes a dispatch row first. Only the process holding
the claim on the row's thread executes it, so every process sharing the store agrees who runs a thread.

A decision is recorded before anything acts on it, and every write under a claim is fenced by its token.
``docs/approvals.md`` draws the whole path and its faults. ``claims.py`` has the lease timings, owners and settles;
``verdicts.py`` what a decider is told (the "unknown" rule, who won).

``run`` is the long-lived loop (``await tg.start(service.run)``): recovery, then the renewer, the poller, the
sweeper and the garbage collector. ``dispatch_queued=False`` (the CLI) only renews and delivers for its own claims.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from anyio.abc import TaskGroup

from awaken_stdio.app.claims import (
    DecisionSuperseded,
    Followed,
    Held,
    MailboxConfig,
    classify_error,
    consumer_id,
    owner_is_dead,
    record_outcome,
    requeue_dead,
    settle_failure,
)
from awaken_stdio.app.perform import ContextFactory, Performer
from awaken_stdio.app.verdicts import not_waiting, refuse_blind_reruns
from awaken_stdio.contract.activation import AgentRunResult, EventSink, RunActivation
from awaken_stdio.contract.errors import (
    DecisionTargetNotFound,
    Fenced,
    InvalidResume,
    StoreError,
    ThreadAlreadyRunning,
    VersionConflict,
)
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.mailbox import DispatchKind, DispatchRequest, DispatchSettle, RunDispatch
from awaken_stdio.contract.stores import RunRecord, ThreadForRun
from awaken_stdio.contract.suspension import Decisions
from awaken_stdio.runtime.agent_runtime import AgentRuntime

__all__ = ["ContextFactory", "MailboxConfig", "MailboxService"]  # MailboxConfig: the service's own settings

log = logging.getLogger(__name__)
CONTROL_PRIORITY = 64  # decisions and cancellations go before runs queued at the default 128
OnWaiting = Callable[[], Awaitable[None]]


@dataclass(slots=True, kw_only=True)
class MailboxService:
    runtime: AgentRuntime
    config: MailboxConfig = field(default_factory=MailboxConfig)
    consumer: str = field(default_factory=consumer_id)
    context: ContextFactory | None = None  # where nobody holds the run's context: rebuilt from its records
    _held: dict[str, Held] = field(default_factory=dict)
    _awaiting: Counter[str] = field(default_factory=Counter[str])  # threads deciders here wait on: not the poller's
    _tg: TaskGroup | None = None

    @property
    def mailbox(self) -> Any:
        return self.runtime.store.mailbox

    # -- the long-lived loops -----------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Recover (requeue dead claims, dispatch queued work), then renew, poll, sweep and collect until cancelled."""
        c = self.config
        async with anyio.create_task_group() as tg:
            self._tg = tg
            if c.dispatch_queued:
                await self.sweep()
            tg.start_soon(self._every, c.renew_every_s, self.renew)
            tg.start_soon(self._every, c.poll_every_s, self.poll, True)  # when nudged (``Wakeup.interval``)
            if c.dispatch_queued:
                tg.start_soon(self._every, c.sweep_every_s, self.sweep)
                tg.start_soon(self._every, c.gc_every_s, self.collect)
            task_status.started()

    async def _every(self, seconds: float, fn: Callable[[], Awaitable[Any]], nudged: bool = False) -> None:
        while True:
            since = self.mailbox.wakeup.generation
            try:
                await fn()
            except StoreError:
                log.warning("mailbox: %s failed", fn.__name__, exc_info=True)
            await (self.mailbox.wakeup.wait(seconds, since) if nudged else anyio.sleep(seconds))

    async def renew(self) -> None:
        """Extend the lease of every held claim; a claim that was lost (interrupted, reclaimed) cancels its run."""
        c = self.config
        for thread_id, held in list(self._held.items()):
            async with held.lock:  # a take-over moves the claim: never renew the one it just acked
                dispatch_id, token = held.dispatch.dispatch_id, held.token
                if held.settled or await self.mailbox.extend_lease(dispatch_id, token, c.lease_ms, now_ms()):
                    continue
            log.warning("mailbox: lost the claim on thread %s; cancelling its run here", thread_id)
            held.lost = True
            held.send.close()
            await self.runtime.cancel(thread_id)

    async def poll(self) -> None:
        """Take over decisions recorded for the runs waiting here; claim and run queued work (worker mode)."""
        now = now_ms()
        if any(h.waiting for h in self._held.values()):
            for row in await self.mailbox.queued_for_holder(self.consumer):
                held = self._held.get(row.thread_id)
                if held is not None and held.waiting and row.request.kind != "run":
                    await self._take_over(held, row.dispatch_id)
        if self.config.dispatch_queued and self._tg is not None:
            for thread_id in await self.mailbox.queued_thread_ids(now):
                if thread_id in self._held or thread_id in self._awaiting:
                    continue  # held here, or a decider here is about to claim its own row
                for d in await self.mailbox.claim(thread_id, self.consumer, self.config.lease_ms, now):
                    self._held[thread_id] = Held(dispatch=d)  # before the task starts: the next poll skips the thread
                    self._tg.start_soon(self._background, thread_id)

    async def sweep(self) -> None:
        """Requeue expired claims, and at once those of owner processes of this machine that died."""
        now = now_ms()
        await self.mailbox.reclaim_expired_leases(now, 1000)
        for d in await self.mailbox.list_claimed():
            if d.claimed_by and owner_is_dead(d.claimed_by):
                await requeue_dead(self.mailbox, d, now)

    async def collect(self) -> None:
        await self.mailbox.purge_terminal(now_ms() - self.config.retain_terminal_ms)

    # -- what the app calls -------------------------------------------------------------------------------------

    async def submit(
        self,
        activation: RunActivation,
        sink: EventSink | None = None,
        give_up: Callable[[], bool] | None = None,
        on_waiting: OnWaiting | None = None,
    ) -> AgentRunResult:
        """Run ``activation`` here, holding its thread's claim; with ``wait_for_decisions`` a run that suspends
        keeps the claim and continues when a decision arrives from any process.

        With ``give_up``, a thread busy with another run (one resumed after a restart, or by a decision from another
        surface) is waited for, like a second prompt waits for the first, until ``give_up()`` says to stop; then,
        or without ``give_up``, ``ThreadAlreadyRunning``. ``on_waiting`` is awaited each time the run waits here for
        a decision (only then may a client ask its person: a decision then reaches the run from any surface).
        """
        thread_id = activation.thread_id or new_id()
        run_id = activation.continue_run_id or activation.run_id or new_id()
        if not activation.continue_run_id and not activation.run_id:
            activation = replace(activation, run_id=run_id, run_id_is_new=True)
        activation = replace(activation, thread_id=thread_id)
        request = DispatchRequest(
            kind="run",
            agent_id=activation.agent_id,
            messages=tuple(activation.messages),
            decisions=tuple(activation.decisions),
            origin=activation.origin,
            session_id=activation.session_id,
            cwd=activation.env.cwd,
            sender=self.consumer,
        )
        while True:
            row = loaded = None
            if not self.runtime.is_running(thread_id) and thread_id not in self._held:
                row, loaded = await self.runtime.store.claim_for_run(
                    self._new(thread_id, run_id, request, 128),
                    self.consumer,
                    self.config.lease_ms,
                    now_ms(),
                    queue_if_busy=False,
                )
            if row is not None:
                break
            if give_up is None or give_up():
                raise ThreadAlreadyRunning(thread_id)
            await anyio.sleep(self.config.poll_every_s / 4)
        result = await self._work(row, sink, activation, on_waiting=on_waiting, loaded=loaded)
        assert result is not None
        return result

    async def decide(
        self,
        run_id: str,
        decisions: Decisions,
        sink: EventSink | None = None,
        context: RunActivation | None = None,
        origin: str = "internal",
        on_waiting: OnWaiting | None = None,
        *,
        follow: bool = False,
    ) -> AgentRunResult | None:
        """Record decisions for a waiting run, then resume it exactly once: here when nobody holds its thread, or
        its holder's lease ran out (the result is returned), else in the live process that holds it (``None``,
        once that process has taken the decision; with ``follow``, when that process is this one, what the run
        came to once it waits again or ends). ``context`` gives a resume here the caller's environment (its
        directory, an editor's file system and terminal); ``origin`` names the deciding surface. A run already
        decided by someone else raises :class:`DecisionSuperseded`."""
        record = await self.waiting(run_id)
        targets = (
            {i for t in record.waiting.tickets for i in (t.ticket_id, t.tool_call_id)} if record.waiting else set()
        )
        for target, _ in decisions:
            if target not in targets:
                raise DecisionTargetNotFound(target)
        await refuse_blind_reruns(self.mailbox, self.runtime.store, record, decisions)
        return await self._control(
            "decide",
            record,
            decisions=decisions,
            sink=sink,
            context=context,
            origin=origin,
            on_waiting=on_waiting,
            follow=follow,
        )

    async def cancel(self, run_id: str) -> bool:
        """Cancel a run wherever it is: live here, held by another process, or waiting in the store."""
        record = await self.runtime.store.load_run(run_id)
        if record is None:
            raise InvalidResume(f"run {run_id} not found")
        if record.status == "done":
            return False
        if self.runtime.active_run_id(record.thread_id) == run_id and record.thread_id not in self._held:
            return await self.runtime.cancel_and_wait(record.thread_id)
        held = self._held.get(record.thread_id)
        if held is not None and not held.waiting:
            return await self.runtime.cancel_and_wait(record.thread_id)
        await self._control("cancel", record, [], None)
        return True

    async def dismiss(self, run_id: str) -> bool:
        """A person dismissed the question of a run waiting here: cancel it, unless a decision got there first.

        A decision recorded by another surface (``runs approve``, an MCP client) and not yet taken over is taken
        over now instead, and one already taken over has resumed the run: either way the run goes on and this
        returns False. True when the run was cancelled.
        """
        record = await self.runtime.store.load_run(run_id)
        if record is None or record.status == "done":
            return False
        held = self._held.get(record.thread_id)
        if held is None or held.dispatch.run_id != run_id:
            return await self.cancel(run_id)
        async with held.lock:
            if not held.waiting:
                return False  # a decision resumed it meanwhile
            queued = await self.mailbox.list_dispatches(record.thread_id, ["queued"])
            decided = [q for q in queued if q.request.kind == "decide" and q.run_id == run_id]
            if decided:
                await self._take_over_locked(held, decided[0].dispatch_id)
                return False
            row = await self.mailbox.enqueue(
                self._new(record.thread_id, run_id, self._request("cancel", record, [], "internal"), CONTROL_PRIORITY)
            )
            await self._take_over_locked(held, row.dispatch_id)
        return True

    async def release(self, run_id: str) -> bool:
        """Stop holding a run that waits here for a decision its client could not ask about: it stays waiting in
        the store, its claim released, for a decision from any surface. False when a decision took it over first
        (the run goes on here)."""
        held = next((h for h in self._held.values() if h.dispatch.run_id == run_id), None)
        if held is None:
            return True
        async with held.lock:  # against a take-over: the claim goes to a decision or back to the store, never both
            if not held.waiting:
                return False
            held.waiting = False
            held.send.close()  # the holder's wait ends; it acks its row with the run waiting
        return True

    # -- dispatching --------------------------------------------------------------------------------------------

    def _new(self, thread_id: str, run_id: str, request: DispatchRequest, priority: int) -> RunDispatch:
        now = now_ms()
        return RunDispatch(
            dispatch_id=new_id(),
            thread_id=thread_id,
            run_id=run_id,
            request=request,
            priority=priority,
            max_attempts=self.config.max_attempts,
            available_at=now,
            created_at=now,
            updated_at=now,
        )

    def _request(self, kind: DispatchKind, record: RunRecord, decisions: Decisions, origin: str) -> DispatchRequest:
        return DispatchRequest(
            kind=kind,
            agent_id=record.agent_id,
            messages=(),
            decisions=tuple(decisions),
            origin=origin,
            session_id=record.session_id,
            cwd=None,
            sender=self.consumer,
        )

    async def waiting(self, run_id: str) -> RunRecord:
        """The run, waiting for decisions; else ``InvalidResume`` (unknown run) or why not (:meth:`not_waiting`)."""
        return await self._performer.waiting(run_id)

    @property
    def _performer(self) -> Performer:
        return Performer(runtime=self.runtime, context=self.context)

    async def _control(
        self,
        kind: DispatchKind,
        record: RunRecord,
        decisions: Decisions,
        sink: EventSink | None,
        context: RunActivation | None = None,
        origin: str = "internal",
        on_waiting: OnWaiting | None = None,
        *,
        follow: bool = False,
    ) -> AgentRunResult | None:
        d = self._new(record.thread_id, record.run_id, self._request(kind, record, decisions, origin), CONTROL_PRIORITY)
        held, loaded, taken = self._held.get(record.thread_id), None, False
        followed: Followed | None = None  # with ``follow``: the outcome of this process's holder running our row
        self._awaiting[record.thread_id] += 1  # from the enqueue on: the row is this decider's to claim
        try:
            if held is not None:  # this process holds the thread: hand it over now rather than at the next poll
                row = await self.mailbox.enqueue(d)
                followed = held.followed.setdefault(row.dispatch_id, Followed()) if follow else None
                taken = await self._hand_over(held, record, row)
            else:
                row, loaded = await self.runtime.store.claim_for_run(d, self.consumer, self.config.lease_ms, now_ms())
            assert row is not None
            if not taken and row.status != "claimed":
                # a cancel waits for the holder to carry it out: only then is it known whether it came too late
                claimed = await self._await_turn(row, carried_out=kind == "cancel")
                taken = claimed is None  # the live holder took it over and continues the run
                row = claimed or row
        finally:
            self._awaiting[record.thread_id] -= 1
            if not self._awaiting[record.thread_id]:
                del self._awaiting[record.thread_id]
        if taken:
            return await followed.outcome() if followed is not None else None
        if held is not None:
            held.followed.pop(row.dispatch_id, None)  # ours to run here after all
        live = kind == "decide" and self.runtime.active_run_id(record.thread_id) == record.run_id
        if live and await self.runtime.send_decisions(record.thread_id, decisions):
            # a run started straight on the runtime (not through the mailbox) waits here live and took them
            await self.mailbox.ack(row.dispatch_id, row.claim_token or "", now_ms())
            return None
        try:
            return await self._work(row, sink, context, on_waiting=on_waiting, seen=record, loaded=loaded)
        except InvalidResume as exc:
            if kind != "decide" or isinstance(exc, DecisionSuperseded):
                raise
            latest = await self.runtime.store.load_run(record.run_id)
            if latest is None or latest.status == "waiting":
                raise
            raise await self.not_waiting(latest, row.dispatch_id) from None

    async def _await_turn(self, row: RunDispatch, *, carried_out: bool = False) -> RunDispatch | None:
        """Our recorded row waits behind the thread's holder: ``None`` once the holder has taken it over (with
        ``carried_out``: once it has carried it out, refused as :meth:`not_waiting` when it came too late), or the
        row claimed for us once the holder is gone (its process dead here, or its lease lapsed on any machine).

        A holder busy for longer than ``decide_wait_s`` keeps the row (it takes it when its run next waits): that is
        ``None`` too, and the row stays queued for it.
        """
        mb, c = self.mailbox, self.config
        with anyio.move_on_after(c.decide_wait_s):
            while True:
                now, since = now_ms(), mb.wakeup.generation
                current = await mb.load_dispatch(row.dispatch_id)
                if current is None or current.status != "queued":
                    if current is not None and current.claimed_for(self.consumer):
                        return current
                    if current is not None and current.status in ("acked", "dead_letter", "superseded", "cancelled"):
                        record = await self.runtime.store.load_run(row.run_id)
                        if record is not None and current.run_error:
                            raise await self.not_waiting(record, row.dispatch_id)
                    elif carried_out and current is not None:
                        await mb.wakeup.wait(c.poll_every_s, since)
                        continue
                    return None  # taken over by the holder (or already carried out by it)
                holders = await mb.list_dispatches(row.thread_id, ["claimed"])
                for h in holders:
                    if h.claimed_by and owner_is_dead(h.claimed_by):
                        await requeue_dead(self.mailbox, h, now)
                if any((h.lease_until or 0) < now for h in holders):
                    await mb.reclaim_expired_leases(now, 1000)
                claimed = await mb.claim_dispatch(row.dispatch_id, self.consumer, c.lease_ms, now)
                if claimed is not None:
                    return claimed
                await mb.wakeup.wait(c.poll_every_s, since)
        return None

    async def _hand_over(self, held: Held, record: RunRecord, row: RunDispatch) -> bool:
        """Our recorded row goes to the run this process holds: True once its holder has taken it over (or keeps
        it, busy past ``decide_wait_s``); False when the holder let go of the still waiting run without it, the row
        then ours to claim (:meth:`_await_turn`)."""
        if held.waiting:
            return await self._take_over(held, row.dispatch_id)
        # the run is still finishing its step: taken over as soon as it waits, not at the next poll
        held.early.append(row.dispatch_id)
        return await self._await_early(held, record, row)

    async def _await_early(self, held: Held, record: RunRecord, row: RunDispatch) -> bool:
        """Our row waits for the busy holder in this process: True once the holder took it over; refused (naming
        the decision that won) when the holder's run ended without it, the row then cancelled; False when it let
        go of the run still waiting. A holder busy past ``decide_wait_s`` keeps the row, as in :meth:`_await_turn`."""
        with anyio.move_on_after(self.config.decide_wait_s):
            while True:
                since, current = self.mailbox.wakeup.generation, await self.mailbox.load_dispatch(row.dispatch_id)
                if current is None or current.status != "queued":
                    return True  # taken over (or carried out)
                # the holder let go without taking it (while it holds on, a row no longer in ``early`` is being taken)
                if self._held.get(record.thread_id) is not held:
                    latest = await self.runtime.store.load_run(record.run_id)
                    moved_on = latest is not None and latest.status != "waiting"
                    if moved_on and await self.mailbox.cancel(row.dispatch_id, now_ms()) is not None:
                        assert latest is not None
                        raise await self.not_waiting(latest, row.dispatch_id)
                    return False  # it still waits: the row is ours to claim
                await self.mailbox.wakeup.wait(self.config.poll_every_s, since)
        return True

    async def not_waiting(self, record: RunRecord, ours: str | None = None) -> InvalidResume:
        """Why a decision cannot apply: the run moved on, and who moved it (``verdicts.not_waiting``)."""
        return await not_waiting(self.mailbox, record, ours)

    async def _take_over(self, held: Held, dispatch_id: str) -> bool:
        """Move the thread's claim to a recorded decision and hand it to the waiting run, once.

        The poller and a decision taken in this process can race here: serialised per thread, and the loser
        (the run no longer waits) leaves its decision queued for the next poll, so none is lost or taken twice.
        """
        async with held.lock:
            return await self._take_over_locked(held, dispatch_id)

    async def _take_over_locked(self, held: Held, dispatch_id: str) -> bool:
        """True when the claim moved to ``dispatch_id`` and the waiting run has it."""
        if not held.waiting:
            return False
        with anyio.CancelScope(shield=True):  # the claim moves in the store and here together, or not at all
            moved = await self.mailbox.transfer_claim(
                held.dispatch.dispatch_id, held.token, to_id=dispatch_id, lease_ms=self.config.lease_ms, now=now_ms()
            )
            if moved is not None:
                held.dispatch, held.waiting = moved, False
                held.send.send_nowait(moved)
                return True
        return False

    async def _background(self, thread_id: str) -> None:
        held = self._held[thread_id]
        try:
            await self._work(held.dispatch, None, None, held)
        except Exception:
            log.exception("mailbox: dispatch %s failed", held.dispatch.dispatch_id)

    async def _work(
        self,
        d: RunDispatch,
        sink: EventSink | None,
        activation: RunActivation | None,
        held: Held | None = None,
        on_waiting: OnWaiting | None = None,
        seen: RunRecord | None = None,
        loaded: ThreadForRun | None = None,
    ) -> AgentRunResult | None:
        """Execute ``d`` holding its thread; with a waiting activation, keep the thread and continue the run with
        each decision taken over, in the same context, until it no longer waits. Acks what it holds at the end.
        Errors reach a foreground caller (``held`` not given); background work only logs them. ``seen``: the run
        as the caller read it before claiming, and ``loaded``: its thread as the claim read it, neither read
        again."""
        foreground = held is None
        held = held or Held(dispatch=d)
        held.activation, held.seen, held.loaded = activation, seen, loaded
        self._held[d.thread_id] = held
        wait = activation is not None and activation.wait_for_decisions
        try:
            result = await self._execute(held, sink, foreground)
            while wait and result is not None and result.status == "waiting" and not held.lost:
                # the row shows the run waiting until taken over
                await record_outcome(self.mailbox, held, result, ack=False)
                held.waiting = True  # only now may the poller move the claim: the write above uses the old one
                self.mailbox.wakeup.set()  # and it looks now: a decision may have come while the step finished
                if held.early:  # decided before it waited: no need to ask anyone
                    await self._take_over(held, held.early.pop(0))
                elif on_waiting is not None:
                    await on_waiting()
                try:
                    await held.receive.receive()
                except (anyio.EndOfStream, anyio.ClosedResourceError):
                    break
                following = await self._execute(held, sink, foreground)
                if following is None:  # superseded, or failed in the background: nothing more to wait for
                    break
                result = following
            return result
        finally:
            with anyio.CancelScope(shield=True):
                if self._held.get(d.thread_id) is held:
                    del self._held[d.thread_id]
                if held.early:  # deciders here wait for it to take their rows: it let go instead
                    self.mailbox.wakeup.set()
                held.send.close()
                held.receive.close()
                held.let_go()
                if not held.settled and not held.lost:
                    try:
                        await record_outcome(self.mailbox, held, held.result, ack=True)
                    except VersionConflict:
                        log.warning("mailbox: dispatch %s was taken from us", held.dispatch.dispatch_id)

    async def _execute(self, held: Held, sink: EventSink | None, foreground: bool) -> AgentRunResult | None:
        result, dispatch_id = None, held.dispatch.dispatch_id
        try:
            result = await self._execute_once(held, sink, foreground)
        finally:
            held.executed(dispatch_id, result)
        return result

    async def _execute_once(self, held: Held, sink: EventSink | None, foreground: bool) -> AgentRunResult | None:
        d, mb = held.dispatch, self.mailbox
        held.result = held.settle = None
        try:
            if d.dispatch_instance_id != self.consumer or d.run_status != "running":  # not started with its claim
                held.dispatch = await mb.record_dispatch_start(d.dispatch_id, held.token, self.consumer, now_ms())
        except VersionConflict:
            held.settled = True  # superseded by an interrupt: never run it
            return None
        waits = held.activation is not None and held.activation.wait_for_decisions  # the row stays claimed then
        held.settle = DispatchSettle(dispatch_id=d.dispatch_id, claim_token=held.token, ack_if_waiting=not waits)
        try:
            # Only the first execution starts from what its claim read (the thread, the run record): a later one, on
            # a decision taken over while the run waits, reads them as they are then (a handoff may have moved on).
            loaded, held.loaded = held.loaded, None
            seen, held.seen = held.seen, None
            result = await self._performer.perform(
                d, sink, activation=held.activation, seen=seen, settle=held.settle, loaded=loaded
            )
        except Fenced as exc:  # paused or cut off past the lease: the run is another holder's, write nothing
            log.warning("mailbox: dispatch %s: %s", d.dispatch_id, exc)
            held.lost = True
            if foreground:
                raise
            return None
        except Exception as exc:
            # a caller that sees the error is its owner: its failure is final, never retried behind its back
            kind = "permanent" if foreground and classify_error(exc) == "transient" else classify_error(exc)
            with anyio.CancelScope(shield=True):
                await settle_failure(self.mailbox, held, exc, kind)
            if foreground:
                raise
            return None
        held.result = result
        return result
