"""The mailbox's transitions, written once for every backend against a small table seam.

A backend supplies a :class:`MailboxTable` (rows in, rows out; the memory one over dicts, the SQL one over a
transaction) and ``_write``/``_read``, which run a function on a table inside one transaction. :class:`MailboxBase`
implements the whole :class:`~awaken_stdio.contract.mailbox.MailboxStore` on top, so the state machine, the
ordering and the invariant checks cannot differ between backends. Every row written goes through
``RunDispatch.validate``.

Refusals that follow a write (a stale claim is superseded, then refused) are returned as :class:`Refused` and
raised only after the transaction commits, so the write is not rolled back with the error.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from awaken_stdio.contract.errors import AlreadyExists, Fenced, NotFound, StoreError, VersionConflict
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import (
    TERMINAL_STATUSES,
    DispatchSettle,
    DispatchStatus,
    EffectRecord,
    Fence,
    InterruptResult,
    MailboxStore,
    RunDispatch,
)
from awaken_stdio.contract.stores import RunRecord
from awaken_stdio.contract.wakeup import Wakeup

__all__ = ["ACTIVE", "MailboxBase", "MailboxTable", "Refused", "check_fence", "enqueue_and_claim_op", "settle_with"]

T = TypeVar("T")
ACTIVE: tuple[DispatchStatus, ...] = ("queued", "claimed")
TERMINAL: tuple[DispatchStatus, ...] = tuple(sorted(TERMINAL_STATUSES))
INTERRUPTED = "queued dispatch superseded by interrupt"
STALE = "dispatch superseded: its thread was interrupted (stale epoch)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """An error to raise once the transaction that produced it has committed."""

    error: StoreError


class MailboxTable(Protocol):
    """Row access inside one transaction. Lists come by priority, then age (``created_at``, then id)."""

    async def lock_thread(self, thread_id: str) -> int:
        """Create the thread's epoch row if missing, lock it until the transaction ends; its epoch."""
        ...

    async def try_lock_thread(self, thread_id: str) -> int | None:
        """``lock_thread`` for a worker's claim, ``None`` (and nothing locked) where another transaction holds the
        lock: a worker skips a thread another is claiming (PostgreSQL's ``SKIP LOCKED``) instead of queueing behind
        it; that one's change wakes the pollers if it leaves work. Elsewhere the lock is simply taken."""
        return await self.lock_thread(thread_id)

    async def locked_get(self, dispatch_id: str) -> tuple[RunDispatch | None, int]:
        """The row, read only once its thread's lock is held (so it is current; its thread id never changes), and
        the thread's epoch; ``(None, 0)`` when there is no such dispatch."""
        ...

    async def epoch(self, thread_id: str) -> int: ...

    async def set_epoch(self, thread_id: str, epoch: int) -> None: ...

    async def get(self, dispatch_id: str) -> RunDispatch | None: ...

    async def insert(self, d: RunDispatch) -> None: ...

    async def update(self, d: RunDispatch) -> None: ...

    async def thread_rows(
        self, thread_id: str, statuses: tuple[str, ...] | None, limit: int | None = None, offset: int = 0
    ) -> list[RunDispatch]: ...

    async def dedupe_taken(self, thread_id: str, key: str) -> bool:
        """A non-terminal dispatch of the thread has this dedupe key."""
        ...

    async def expired(self, now: int, limit: int) -> list[RunDispatch]: ...

    async def by_status(self, statuses: tuple[str, ...], limit: int, offset: int) -> list[RunDispatch]: ...

    async def counts(self) -> dict[str, int]: ...

    async def queued_threads(self, now: int | None) -> list[str]: ...

    async def queued_for_holder(self, consumer: str) -> list[RunDispatch]: ...

    async def purge(self, older_than: int) -> int: ...

    async def effect_put(self, e: EffectRecord) -> None: ...

    async def effect_finish(self, thread_id: str, call_id: str, result: dict[str, Any] | None, now: int) -> None: ...

    async def effects_open(self, thread_id: str) -> list[EffectRecord]: ...

    async def effects_unknown(self, thread_id: str, call_ids: list[str], now: int) -> None: ...

    async def wake(self) -> None:
        """This transaction made work a poller acts on: every process sharing the store is to look once it commits
        (PostgreSQL NOTIFYs inside it, so only a committed change is told, and told even if this process dies
        next). Sets ``woken``, which each transaction starts without."""
        ...

    woken: bool


Op = Callable[[MailboxTable], Coroutine[Any, Any, T]]


def _claim(d: RunDispatch, token: str, consumer: str, lease_ms: int, now: int) -> None:
    d.status, d.claim_token, d.claimed_by, d.lease_until, d.updated_at = "claimed", token, consumer, now + lease_ms, now


def _finish(d: RunDispatch, status: DispatchStatus, now: int, error: str | None = None) -> None:
    d.status = status
    d.clear_claim()
    d.completed_at = d.completed_at or now
    d.updated_at = now
    if error is not None:
        d.last_error = error


def _requeue(d: RunDispatch, available_at: int, now: int, error: str) -> None:
    """attempt+1: back to queued, or dead-lettered once the attempts are spent."""
    d.attempt_count += 1
    d.clear_projection()
    if d.attempt_count >= d.max_attempts:
        d.completed_at = None
        _finish(d, "dead_letter", now, error)
        return
    d.status, d.available_at, d.last_error, d.completed_at, d.updated_at = "queued", available_at, error, None, now
    d.clear_claim()


async def _put(t: MailboxTable, d: RunDispatch) -> RunDispatch:
    d.validate()
    await t.update(d)
    return d


async def _released(t: MailboxTable, d: RunDispatch) -> None:
    """``d`` no longer holds its thread (acked, requeued, dead-lettered, superseded): pollers act only when rows are
    queued on the thread (a worker or a waiting decider may claim it now; a requeued ``d`` is one) or when ``d`` was
    a cancel (its decider waits to hear it carried out). Any other release, the approval's own ack among them, is
    nobody's business: no wake-up, no poll."""
    if d.status != "claimed" and (d.request.kind == "cancel" or await t.thread_rows(d.thread_id, ("queued",), 1)):
        await t.wake()


def _run_result(
    d: RunDispatch,
    run_status: str,
    termination: TerminationReason | None,
    response: str | None,
    error: str | None,
    now: int,
    ack: bool,
) -> None:
    d.run_status, d.termination, d.run_response, d.run_error = run_status, termination, response, error
    d.completed_at, d.updated_at = now, now
    if ack:
        _finish(d, "acked", now)


async def settle_with(t: MailboxTable, settle: DispatchSettle, run: RunRecord, now: int) -> None:
    """Inside a checkpoint's transaction: ``run``'s result on the dispatch executing it, acked when the run is over
    (or waits, with ``ack_if_waiting``). ``settle`` says whether the claim still held; a claim that moved is left
    for the dispatcher, whose own settle then names the conflict."""
    settle.settled = settle.acked = False
    d = await _own(t, settle.dispatch_id, settle.claim_token, now)
    if isinstance(d, Refused):
        return
    waiting = run.status == "waiting"
    ack = not waiting or settle.ack_if_waiting
    termination = TerminationReason.suspended() if waiting else run.termination
    _run_result(
        d,
        "waiting" if waiting else "done",
        termination=termination,
        response=run.response,
        error=None,
        now=now,
        ack=ack,
    )
    await _put(t, d)
    await _released(t, d)
    settle.settled, settle.acked = True, ack


async def _own(t: MailboxTable, dispatch_id: str, token: str, now: int) -> RunDispatch | Refused:
    """The row claimed with ``token`` at the current epoch; a stale claim is superseded and refused."""
    d, epoch = await t.locked_get(dispatch_id)
    if d is None:
        return Refused(error=NotFound(f"dispatch {dispatch_id}"))
    if d.status != "claimed" or d.claim_token != token:
        return Refused(error=VersionConflict(f"claim on dispatch {dispatch_id}", token, d.claim_token or d.status))
    if d.dispatch_epoch < epoch:
        _finish(d, "superseded", now, STALE)
        await _put(t, d)
        return Refused(error=VersionConflict(f"epoch of dispatch {dispatch_id}", d.dispatch_epoch, epoch))
    return d


async def check_fence(t: MailboxTable, fence: Fence | None, now: int) -> Refused | None:
    """Inside a holder's write: ``None`` while its claim is current, else the ``Fenced`` refusal that aborts the
    write (the caller raises it inside the transaction, so nothing of the write commits)."""
    if fence is None:
        return None
    d = await _own(t, fence.dispatch_id, fence.claim_token, now)
    if not isinstance(d, Refused):
        return None
    current = await t.get(fence.dispatch_id)
    return Refused(error=Fenced(fence.dispatch_id, fence.claim_token, current.claimed_by if current else None))


async def _fenced(t: MailboxTable, fence: Fence | None, now: int, write: Op[None]) -> None:
    refused = await check_fence(t, fence, now)
    if refused is not None:
        raise refused.error
    await write(t)


def enqueue_and_claim_op(
    dispatch: RunDispatch, consumer: str, lease_ms: int, now: int, queue_if_busy: bool
) -> Op[RunDispatch | Refused | None]:
    """``enqueue_and_claim`` as one operation on the table, for a backend to run in a transaction of its own."""
    row = dispatch.copy()

    async def op(t: MailboxTable) -> RunDispatch | Refused | None:
        row.dispatch_epoch = await t.lock_thread(row.thread_id)
        if row.dedupe_key is not None and await t.dedupe_taken(row.thread_id, row.dedupe_key):
            return Refused(error=AlreadyExists(f"dispatch with dedupe key {row.dedupe_key} on thread {row.thread_id}"))
        if consumer:
            busy = bool(await t.thread_rows(row.thread_id, ("claimed",), 1))
            if busy and not queue_if_busy:
                return None
            if not busy:
                _claim(row, new_id(), consumer=consumer, lease_ms=lease_ms, now=now)
                row.dispatch_instance_id, row.run_status = consumer, "running"
        row.validate()
        await t.insert(row)
        if row.status == "queued":
            await t.wake()  # a decision or cancel for the thread's holder, or work for a worker
        return row

    return op


class MailboxBase(MailboxStore):
    """Every mailbox operation, over the backend's ``_write``/``_read``."""

    _wakeup: Wakeup | None = None

    @property
    def wakeup(self) -> Wakeup:
        if self._wakeup is None:
            self._wakeup = Wakeup()
        return self._wakeup

    async def _write(self, fn: Op[T]) -> T:
        raise NotImplementedError

    async def _read(self, fn: Op[T]) -> T:
        raise NotImplementedError

    async def _write_urgent(self, fn: Op[T]) -> T:
        """``_write`` ahead of the writes queued before it, where the backend queues them (a lease renewal must not
        lapse behind a burst of checkpoints); the same checks, only sooner."""
        return await self._write(fn)

    async def _acting(self, fn: Op[T]) -> T:
        """``_write`` of ``fn``, then, if it made work a poller acts on (``MailboxTable.wake``), a nudge for this
        process's pollers: only after the commit, so that none looks before the change is there to find."""
        woken = False

        async def op(t: MailboxTable) -> T:
            nonlocal woken
            t.woken = False
            result = await fn(t)
            woken = t.woken
            return result

        result = await self._write(op)
        if woken:
            self.wakeup.set()
        return result

    async def _change(self, fn: Op[T | Refused]) -> T:
        result = await self._acting(fn)
        if isinstance(result, Refused):
            raise result.error
        return result

    # -- queue ------------------------------------------------------------------------------------------------

    async def enqueue(self, dispatch: RunDispatch) -> RunDispatch:
        row = await self.enqueue_and_claim(dispatch, "", 0, 0)
        assert row is not None
        return row

    async def enqueue_and_claim(
        self, dispatch: RunDispatch, consumer: str, lease_ms: int, now: int, *, queue_if_busy: bool = True
    ) -> RunDispatch | None:
        return await self._change(
            enqueue_and_claim_op(dispatch, consumer, lease_ms=lease_ms, now=now, queue_if_busy=queue_if_busy)
        )

    async def claim(self, thread_id: str, consumer: str, lease_ms: int, now: int, limit: int = 1) -> list[RunDispatch]:
        async def op(t: MailboxTable) -> list[RunDispatch]:
            epoch = await t.try_lock_thread(thread_id)
            if epoch is None:
                return []
            rows = await t.thread_rows(thread_id, ACTIVE)
            for r in rows:
                if r.status == "queued" and r.dispatch_epoch < epoch:
                    _finish(r, "superseded", now, STALE)
                    await _put(t, r)
                    await t.wake()  # its decider waits to hear
            if any(r.status == "claimed" for r in rows):
                return []
            ready = [r for r in rows if r.status == "queued" and r.available_at <= now][:limit]
            token = new_id()
            for r in ready:
                _claim(r, token, consumer=consumer, lease_ms=lease_ms, now=now)
                await _put(t, r)
            return ready

        return await self._change(op)

    async def claim_dispatch(self, dispatch_id: str, consumer: str, lease_ms: int, now: int) -> RunDispatch | None:
        async def op(t: MailboxTable) -> RunDispatch | None:
            d, epoch = await t.locked_get(dispatch_id)
            if d is None or d.status != "queued":
                return None
            if d.dispatch_epoch < epoch:
                _finish(d, "superseded", now, STALE)
                await _put(t, d)
                return None
            if await t.thread_rows(d.thread_id, ("claimed",), 1):
                return None
            _claim(d, new_id(), consumer=consumer, lease_ms=lease_ms, now=now)
            return await _put(t, d)

        return await self._change(op)

    async def transfer_claim(
        self, from_id: str, claim_token: str, to_id: str, lease_ms: int, now: int
    ) -> RunDispatch | None:
        async def op(t: MailboxTable) -> RunDispatch | Refused | None:
            src = await _own(t, from_id, claim_token, now)
            if isinstance(src, Refused):
                return src
            dst = await t.get(to_id)
            if dst is None or dst.status != "queued" or dst.thread_id != src.thread_id:
                return None
            await t.wake()  # the decider of ``dst`` waits for it to be taken over (or refused), in any process
            if dst.dispatch_epoch < src.dispatch_epoch:
                _finish(dst, "superseded", now, STALE)
                await _put(t, dst)
                return None
            consumer = src.claimed_by or ""
            _finish(src, "acked", now)
            await _put(t, src)
            _claim(dst, new_id(), consumer=consumer, lease_ms=lease_ms, now=now)
            # started with its claim, as enqueue_and_claim starts a row: its holder runs it at once
            dst.clear_projection()
            dst.dispatch_instance_id, dst.run_status = consumer, "running"
            return await _put(t, dst)

        return await self._change(op)

    async def _settle(
        self, dispatch_id: str, token: str, now: int, change: Callable[[RunDispatch], None]
    ) -> RunDispatch:
        async def op(t: MailboxTable) -> RunDispatch | Refused:
            d = await _own(t, dispatch_id, token, now)
            if isinstance(d, Refused):
                return d
            change(d)
            await _put(t, d)
            await _released(t, d)
            return d

        return await self._change(op)

    async def ack(self, dispatch_id: str, claim_token: str, now: int) -> RunDispatch:
        return await self._settle(dispatch_id, claim_token, now, lambda d: _finish(d, "acked", now))

    async def nack(self, dispatch_id: str, claim_token: str, retry_at: int, error: str, now: int) -> RunDispatch:
        return await self._settle(dispatch_id, claim_token, now, lambda d: _requeue(d, retry_at, now, error))

    async def dead_letter(self, dispatch_id: str, claim_token: str, error: str, now: int) -> RunDispatch:
        return await self._settle(dispatch_id, claim_token, now, lambda d: _finish(d, "dead_letter", now, error))

    async def record_dispatch_start(
        self, dispatch_id: str, claim_token: str, instance_id: str, now: int
    ) -> RunDispatch:
        def start(d: RunDispatch) -> None:
            d.clear_projection()
            d.dispatch_instance_id, d.run_status, d.completed_at, d.updated_at = instance_id, "running", None, now

        return await self._settle(dispatch_id, claim_token, now, start)

    async def record_run_result(
        self,
        dispatch_id: str,
        claim_token: str,
        run_status: str,
        termination: TerminationReason | None,
        response: str | None,
        error: str | None,
        now: int,
        *,
        ack: bool = False,
    ) -> RunDispatch:
        def result(d: RunDispatch) -> None:
            _run_result(d, run_status, termination=termination, response=response, error=error, now=now, ack=ack)

        return await self._settle(dispatch_id, claim_token, now, result)

    async def cancel(self, dispatch_id: str, now: int) -> RunDispatch | None:
        async def op(t: MailboxTable) -> RunDispatch | None:
            d, _ = await t.locked_get(dispatch_id)
            if d is None or d.status != "queued":
                return None
            _finish(d, "cancelled", now)
            await t.wake()  # its decider waits to hear
            return await _put(t, d)

        return await self._change(op)

    async def extend_lease(self, dispatch_id: str, claim_token: str, extension_ms: int, now: int) -> bool:
        async def op(t: MailboxTable) -> bool:
            d = await _own(t, dispatch_id, claim_token, now)
            if isinstance(d, Refused):
                return False
            d.lease_until, d.updated_at = now + extension_ms, now
            await _put(t, d)
            return True

        return await self._write_urgent(op)

    async def interrupt(self, thread_id: str, now: int) -> InterruptResult:
        async def op(t: MailboxTable) -> InterruptResult:
            epoch = await t.lock_thread(thread_id) + 1
            await t.set_epoch(thread_id, epoch)
            active: RunDispatch | None = None
            superseded = []
            for r in await t.thread_rows(thread_id, ACTIVE):
                if r.status == "claimed":
                    active = active or r
                elif r.dispatch_epoch < epoch:
                    _finish(r, "superseded", now, INTERRUPTED)
                    superseded.append(await _put(t, r))
                    await t.wake()  # its decider waits to hear
            return InterruptResult(epoch=epoch, active=active, superseded=superseded)

        return await self._acting(op)

    async def current_dispatch_epoch(self, thread_id: str) -> int:
        return await self._read(lambda t: t.epoch(thread_id))

    async def supersede_claimed(self, dispatch_id: str, reason: str, now: int) -> RunDispatch | None:
        async def op(t: MailboxTable) -> RunDispatch | None:
            d, _ = await t.locked_get(dispatch_id)
            if d is None or d.status != "claimed":
                return None
            _finish(d, "superseded", now, reason)
            await _put(t, d)
            await _released(t, d)
            return d

        return await self._acting(op)

    async def load_dispatch(self, dispatch_id: str) -> RunDispatch | None:
        return await self._read(lambda t: t.get(dispatch_id))

    async def list_dispatches(
        self, thread_id: str, statuses: list[DispatchStatus] | None = None, limit: int = 100, offset: int = 0
    ) -> list[RunDispatch]:
        wanted = tuple(statuses) if statuses is not None else None
        return await self._read(lambda t: t.thread_rows(thread_id, wanted, limit, offset))

    async def count_dispatches_by_status(self) -> dict[str, int]:
        return await self._read(lambda t: t.counts())

    async def list_terminal_dispatches(self, limit: int = 100, offset: int = 0) -> list[RunDispatch]:
        return await self._read(lambda t: t.by_status(TERMINAL, limit, offset))

    async def list_claimed(self, limit: int = 1000) -> list[RunDispatch]:
        return await self._read(lambda t: t.by_status(("claimed",), limit, 0))

    async def queued_for_holder(self, consumer: str) -> list[RunDispatch]:
        return await self._read(lambda t: t.queued_for_holder(consumer))

    async def reclaim_expired_leases(self, now: int, limit: int = 100) -> list[RunDispatch]:
        async def op(t: MailboxTable) -> list[RunDispatch]:
            out = []
            for found in await t.expired(now, limit):
                d, epoch = await t.locked_get(found.dispatch_id)
                if d is None or d.status != "claimed" or d.lease_until is None or d.lease_until >= now:
                    continue  # another sweeper got there first
                if d.dispatch_epoch < epoch:
                    _finish(d, "superseded", now, STALE)
                    await _put(t, d)
                    continue
                _requeue(d, now, now, "lease expired")
                out.append(await _put(t, d))
                await _released(t, d)
            return out

        return await self._acting(op)

    async def purge_terminal(self, older_than: int) -> int:
        return await self._write(lambda t: t.purge(older_than))

    async def queued_thread_ids(self, now: int | None = None) -> list[str]:
        return await self._read(lambda t: t.queued_threads(now))

    # -- effect ledger ----------------------------------------------------------------------------------------

    async def effect_started(self, effect: EffectRecord, fence: Fence | None = None) -> None:
        await self._write(lambda t: _fenced(t, fence, effect.updated_at, lambda t: t.effect_put(effect)))

    async def effect_finished(
        self, thread_id: str, call_id: str, result: dict[str, Any] | None, now: int, fence: Fence | None = None
    ) -> None:
        await self._write(lambda t: _fenced(t, fence, now, lambda t: t.effect_finish(thread_id, call_id, result, now)))

    async def open_effects(self, thread_id: str) -> list[EffectRecord]:
        return await self._read(lambda t: t.effects_open(thread_id))

    async def mark_effects_unknown(
        self, thread_id: str, call_ids: list[str], now: int, fence: Fence | None = None
    ) -> None:
        if call_ids:
            await self._write(lambda t: _fenced(t, fence, now, lambda t: t.effects_unknown(thread_id, call_ids, now)))

    async def holds(self, fence: Fence, now: int) -> bool:
        async def op(t: MailboxTable) -> bool:
            d = await t.get(fence.dispatch_id)
            return d is not None and d.status == "claimed" and d.claim_token == fence.claim_token

        return await self._read(op)
