"""The mailbox: a durable queue of run dispatches keyed by thread, and the effect ledger of tool calls.

A :class:`RunDispatch` carries its whole request (agent, messages, decisions, origin...) so any process sharing the
store can execute it after any restart. The queue guarantees that at most one dispatch of a thread is ``claimed`` at
a time: the claim (a token, an owner and a lease that the owner renews) is how processes agree which one of them
runs a thread, which is what makes a decision resume a run exactly once. Status machine::

    queued --claim--> claimed --ack--> acked
      |                  |--nack--> queued (attempt+1, retry later) | dead_letter (attempt+1 >= max_attempts)
      |                  |--dead_letter--> dead_letter
      |                  `--lease expired (reclaim) / transfer / interrupt--> queued | acked | superseded
      |--cancel--> cancelled
      `--interrupt (epoch bump)--> superseded

``acked`` means "handled", not "succeeded": the business outcome lives on the run record and in the projection
fields. Every write validates the row (:meth:`RunDispatch.validate`); a row that breaks an invariant is refused.

The effect ledger records a call ``started`` before a tool that changes something runs; the checkpoint holding its
result settles it. An entry a dead process left open is an unknown outcome: asked about again, never silently re-run
(``docs/approvals.md``). All times are unix milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

from awaken_stdio.contract.errors import StoreError
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message, message_from_json, message_to_json
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.contract.wakeup import Wakeup

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_PRIORITY",
    "OPEN_EFFECT_STATUSES",
    "TERMINAL_STATUSES",
    "DispatchKind",
    "DispatchRequest",
    "DispatchSettle",
    "DispatchStatus",
    "EffectRecord",
    "EffectStatus",
    "Fence",
    "InterruptResult",
    "InvalidDispatch",
    "MailboxStore",
    "RunDispatch",
    "outcome_unknown",
    "retry_delay_ms",
]

DispatchStatus = Literal["queued", "claimed", "acked", "cancelled", "superseded", "dead_letter"]
DispatchKind = Literal["run", "decide", "cancel"]
EffectStatus = Literal["started", "finished", "unknown_after_crash"]
# the entries a run on the thread settles first (``MailboxStore.open_effects``)
OPEN_EFFECT_STATUSES: tuple[EffectStatus, ...] = ("started", "unknown_after_crash")
TERMINAL_STATUSES: frozenset[DispatchStatus] = frozenset({"acked", "cancelled", "superseded", "dead_letter"})
DEFAULT_PRIORITY = 128
DEFAULT_MAX_ATTEMPTS = 5
RETRY_BASE_MS = 250
RETRY_CAP_MS = 30_000


def retry_delay_ms(attempt: int) -> int:
    """The wait before retry ``attempt`` (1-based): 250 ms doubling per attempt, at most 30 s."""
    return min(RETRY_BASE_MS * 2 ** min(max(attempt - 1, 0), 16), RETRY_CAP_MS)


class InvalidDispatch(StoreError):
    """A dispatch row breaks a mailbox invariant (refused on write, and on load)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchRequest:
    """What to do when the dispatch runs: start a run (``messages``), decide (``decisions``) or cancel it.

    ``sender`` names the process that recorded it; everything a restarted process needs travels here.
    """

    kind: DispatchKind = "run"
    agent_id: str | None = None
    messages: tuple[Message, ...] = ()
    decisions: tuple[tuple[str, ToolCallResume], ...] = ()
    origin: str = "user"
    session_id: str | None = None
    cwd: str | None = None
    sender: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "agent_id": self.agent_id,
            "messages": [message_to_json(m) for m in self.messages],
            "decisions": [[target, d.to_json()] for target, d in self.decisions],
            "origin": self.origin,
            "session_id": self.session_id,
            "cwd": self.cwd,
            "sender": self.sender,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> DispatchRequest:
        return DispatchRequest(
            kind=d.get("kind", "run"),
            agent_id=d.get("agent_id"),
            messages=tuple(message_from_json(m) for m in d.get("messages") or ()),
            decisions=tuple((t, ToolCallResume.from_json(r)) for t, r in d.get("decisions") or ()),
            origin=d.get("origin", "user"),
            session_id=d.get("session_id"),
            cwd=d.get("cwd"),
            sender=d.get("sender"),
        )


@dataclass(slots=True, kw_only=True)
class RunDispatch:
    """One row of the mailbox. ``dispatch_epoch`` is assigned by the store (the thread's epoch at enqueue)."""

    dispatch_id: str
    thread_id: str
    run_id: str
    request: DispatchRequest = field(default_factory=DispatchRequest)
    priority: int = DEFAULT_PRIORITY
    dedupe_key: str | None = None
    dispatch_epoch: int = 0
    status: DispatchStatus = "queued"
    available_at: int = 0
    attempt_count: int = 0
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    last_error: str | None = None
    claim_token: str | None = None
    claimed_by: str | None = None
    lease_until: int | None = None
    # the runtime projection: what the execution of this dispatch did
    dispatch_instance_id: str | None = None
    run_status: str | None = None  # created | running | waiting | done
    termination: TerminationReason | None = None
    run_response: str | None = None
    run_error: str | None = None
    completed_at: int | None = None
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def has_projection(self) -> bool:
        return any(
            v is not None
            for v in (self.dispatch_instance_id, self.run_status, self.termination, self.run_response, self.run_error)
        )

    def clear_projection(self) -> None:
        self.dispatch_instance_id = self.run_status = self.termination = self.run_response = self.run_error = None

    def claimed_for(self, consumer: str) -> bool:
        """Claimed, and by ``consumer``: the row is that process's to execute."""
        return self.status == "claimed" and self.claimed_by == consumer

    def clear_claim(self) -> None:
        self.claim_token = self.claimed_by = self.lease_until = None

    def copy(self) -> RunDispatch:
        return replace(self)

    def validate(self) -> None:
        """Raise ``InvalidDispatch`` naming the first broken invariant."""
        problem = self._problem()
        if problem:
            raise InvalidDispatch(f"dispatch {self.dispatch_id or '?'}: {problem}")

    def _problem(self) -> str | None:
        if not (self.dispatch_id and self.thread_id and self.run_id):
            return "dispatch_id, thread_id and run_id must be non-empty"
        if not 0 <= self.priority <= 255:
            return f"priority {self.priority} is outside 0..255"
        if self.max_attempts <= 0:
            return "max_attempts must be positive"
        if not 0 <= self.attempt_count <= self.max_attempts:
            return f"attempt_count {self.attempt_count} exceeds max_attempts {self.max_attempts}"
        claim = (self.claim_token, self.claimed_by, self.lease_until)
        if self.status == "queued":
            if any(v is not None for v in claim) or self.completed_at is not None or self.has_projection():
                return "a queued dispatch has no claim, no completion and no projection"
        elif self.status == "claimed":
            if any(v is None for v in claim):
                return "a claimed dispatch has a claim token, an owner and a lease"
        elif self.status in TERMINAL_STATUSES:
            if any(v is not None for v in claim):
                return f"a {self.status} dispatch has no claim fields"
            if self.completed_at is None:
                return f"a {self.status} dispatch has completed_at"
        else:
            return f"unknown status {self.status!r}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "dispatch_id": self.dispatch_id,
            "thread_id": self.thread_id,
            "run_id": self.run_id,
            "request": self.request.to_json(),
            "priority": self.priority,
            "dedupe_key": self.dedupe_key,
            "dispatch_epoch": self.dispatch_epoch,
            "status": self.status,
            "available_at": self.available_at,
            "attempt_count": self.attempt_count,
            "max_attempts": self.max_attempts,
            "last_error": self.last_error,
            "claim_token": self.claim_token,
            "claimed_by": self.claimed_by,
            "lease_until": self.lease_until,
            "dispatch_instance_id": self.dispatch_instance_id,
            "run_status": self.run_status,
            "termination": self.termination.to_json() if self.termination else None,
            "run_response": self.run_response,
            "run_error": self.run_error,
            "completed_at": self.completed_at,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> RunDispatch:
        termination = d.get("termination")
        values: dict[str, Any] = {
            **d,
            "request": DispatchRequest.from_json(d.get("request") or {}),
            "termination": TerminationReason.from_json(termination) if termination else None,
        }
        return RunDispatch(**values)


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptResult:
    """What ``interrupt`` did: the thread's new epoch, its claimed dispatch (the caller cancels its run) and the
    queued dispatches it superseded."""

    epoch: int
    active: RunDispatch | None
    superseded: list[RunDispatch]


@dataclass(slots=True, kw_only=True)
class DispatchSettle:
    """The dispatch a run is executing, to settle with the run's checkpoint when it ends or waits (one write, not
    two): the run's result recorded on the row, and the row acked when the run is over, or waiting with
    ``ack_if_waiting``. A store that can sets ``settled`` when it did; the dispatcher settles the row itself when
    it did not (a store that cannot, or a claim that moved meanwhile)."""

    dispatch_id: str
    claim_token: str
    ack_if_waiting: bool = True
    settled: bool = False
    acked: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Fence:
    """The claim a holder acts under. A lease says who *should* run a thread; the fence says who *may*.

    Every durable write of a run commits only while the dispatch is still claimed with this token, checked in the
    write's own transaction. So a holder paused past its lease, while another took the run over, can neither write
    nor start an effect. A new claim gets a new token (``docs/approvals.md``)."""

    dispatch_id: str
    claim_token: str

    @staticmethod
    def of(settle: DispatchSettle | None) -> Fence | None:
        return Fence(dispatch_id=settle.dispatch_id, claim_token=settle.claim_token) if settle is not None else None


@dataclass(slots=True, kw_only=True)
class EffectRecord:
    """One tool call in the effect ledger, keyed by (thread, call). ``result``: the ``ToolResult`` JSON of a call
    settled on its own (a pending one), reported after a crash rather than asked about again."""

    thread_id: str
    call_id: str
    run_id: str
    tool_name: str
    arguments: Any = None
    status: EffectStatus = "started"
    decision_id: str | None = None  # the decision that let the call run, if one did
    result: dict[str, Any] | None = None
    started_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
    claim_token: str | None = None  # the claim it started under: the call runs now only while that claim is live


def outcome_unknown(effects: list[EffectRecord], call_ids: list[str], *, live_claim: str | None) -> list[str]:
    """The calls among ``call_ids`` whose outcome nobody knows: their start is in the effect ledger and their end is
    not (a checkpoint appending a call's result settles its entry in the same transaction). The one rule every
    decider reads, editor, MCP client and CLI alike: such a call is never run again unless the person says so.

    ``live_claim``: the token of the thread's claim when a live process holds it (lease current): a ``started``
    entry made under that very claim is its call running right now, not an unknown one."""
    unknown = {
        e.call_id
        for e in effects
        if e.status == "unknown_after_crash" or live_claim is None or e.claim_token != live_claim
    }
    return [c for c in call_ids if c in unknown]


@runtime_checkable
class MailboxStore(Protocol):
    """The mailbox and effect ledger of a store (``store.mailbox``). Times (``now``) are explicit, in ms.

    Methods that take a ``claim_token`` refuse a wrong token or an unclaimed row with ``VersionConflict`` and a
    missing row with ``NotFound``; a claim whose epoch is stale (the thread was interrupted) is superseded and
    refused with ``VersionConflict``.
    """

    @property
    def wakeup(self) -> Wakeup:
        """Set after a write another holder may act on: here in this process; on PostgreSQL in every process
        sharing the database (LISTEN/NOTIFY). Pollers wait on it instead of sleeping."""
        ...

    # -- queue ------------------------------------------------------------------------------------------------

    async def enqueue(self, dispatch: RunDispatch) -> RunDispatch:
        """Store a queued dispatch at the thread's current epoch (the caller's is ignored). A ``dedupe_key`` equal
        to a non-terminal dispatch's of the same thread raises ``AlreadyExists``."""
        ...

    async def enqueue_and_claim(
        self, dispatch: RunDispatch, consumer: str, lease_ms: int, now: int, *, queue_if_busy: bool = True
    ) -> RunDispatch | None:
        """Enqueue and, in the same transaction, claim it (and record its start, instance ``consumer``) when no
        dispatch of the thread is claimed. When one is: leave it queued (``queue_if_busy``) or store nothing and
        return ``None``."""
        ...

    async def claim(self, thread_id: str, consumer: str, lease_ms: int, now: int, limit: int = 1) -> list[RunDispatch]:
        """Supersede stale-epoch queued rows; then, unless a dispatch of the thread is claimed, claim up to
        ``limit`` queued rows available at ``now`` (priority, then age), all with one new token."""
        ...

    async def claim_dispatch(self, dispatch_id: str, consumer: str, lease_ms: int, now: int) -> RunDispatch | None:
        """Claim one queued dispatch by id, whatever its ``available_at``; ``None`` when it is not queued, is stale
        (then superseded) or another dispatch of its thread is claimed."""
        ...

    async def transfer_claim(
        self, from_id: str, claim_token: str, to_id: str, lease_ms: int, now: int
    ) -> RunDispatch | None:
        """Atomically ack the claimed ``from_id`` and claim the queued ``to_id`` of the same thread for the same
        owner: how the process holding a thread takes a decision recorded by another. ``None`` if ``to_id`` is
        no longer queued."""
        ...

    async def ack(self, dispatch_id: str, claim_token: str, now: int) -> RunDispatch: ...

    async def nack(self, dispatch_id: str, claim_token: str, retry_at: int, error: str, now: int) -> RunDispatch:
        """Back to queued at ``retry_at`` with attempt+1 and the projection cleared, or dead-lettered when
        attempt+1 reaches ``max_attempts``."""
        ...

    async def dead_letter(self, dispatch_id: str, claim_token: str, error: str, now: int) -> RunDispatch: ...

    async def record_dispatch_start(
        self, dispatch_id: str, claim_token: str, instance_id: str, now: int
    ) -> RunDispatch:
        """Mark the claimed dispatch's run as running (clearing earlier results)."""
        ...

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
        """Set the projection and ``completed_at``; the status does not change unless ``ack`` (then it is acked in
        the same transaction)."""
        ...

    async def cancel(self, dispatch_id: str, now: int) -> RunDispatch | None:
        """Cancel a queued dispatch; ``None`` (and no change) for any other status."""
        ...

    async def extend_lease(self, dispatch_id: str, claim_token: str, extension_ms: int, now: int) -> bool:
        """``lease_until = now + extension_ms``; False for a wrong token, an unclaimed or a stale-epoch row."""
        ...

    async def interrupt(self, thread_id: str, now: int) -> InterruptResult: ...

    async def current_dispatch_epoch(self, thread_id: str) -> int: ...

    async def supersede_claimed(self, dispatch_id: str, reason: str, now: int) -> RunDispatch | None:
        """Terminalize a claimed dispatch as superseded (``None`` if it is not claimed)."""
        ...

    async def load_dispatch(self, dispatch_id: str) -> RunDispatch | None: ...

    async def list_dispatches(
        self, thread_id: str, statuses: list[DispatchStatus] | None = None, limit: int = 100, offset: int = 0
    ) -> list[RunDispatch]:
        """By priority, then age."""
        ...

    async def count_dispatches_by_status(self) -> dict[str, int]: ...

    async def list_terminal_dispatches(self, limit: int = 100, offset: int = 0) -> list[RunDispatch]: ...

    async def list_claimed(self, limit: int = 1000) -> list[RunDispatch]:
        """Claimed dispatches of every thread (the sweeper looks for owners that died)."""
        ...

    async def queued_for_holder(self, consumer: str) -> list[RunDispatch]:
        """Queued dispatches of the threads ``consumer`` holds a claim on, oldest first (decisions to deliver)."""
        ...

    async def reclaim_expired_leases(self, now: int, limit: int = 100) -> list[RunDispatch]:
        """Claimed rows whose lease ended before ``now``: stale ones are superseded (not returned); the others go
        back to queued with attempt+1, or are dead-lettered at ``max_attempts``; returned."""
        ...

    async def purge_terminal(self, older_than: int) -> int:
        """Delete terminal dispatches (and finished ledger entries) last updated before ``older_than``."""
        ...

    async def queued_thread_ids(self, now: int | None = None) -> list[str]:
        """Threads with queued dispatches (available at ``now`` when given), sorted."""
        ...

    # -- effect ledger ----------------------------------------------------------------------------------------

    async def effect_started(self, effect: EffectRecord, fence: Fence | None = None) -> None:
        """Record (or re-record) that the call is about to run; with ``fence``, only while that claim is current
        (else ``Fenced``, nothing written): an effect runs only under a current claim."""
        ...

    async def effect_finished(
        self, thread_id: str, call_id: str, result: dict[str, Any] | None, now: int, fence: Fence | None = None
    ) -> None: ...

    async def open_effects(self, thread_id: str) -> list[EffectRecord]:
        """Entries of the thread whose outcome is not settled: ``started`` (a process died running the call) or
        ``unknown_after_crash`` (offered again, not answered yet). A call's entry is settled by the checkpoint that
        appends its result to the conversation."""
        ...

    async def mark_effects_unknown(
        self, thread_id: str, call_ids: list[str], now: int, fence: Fence | None = None
    ) -> None:
        """``started`` entries among ``call_ids`` become ``unknown_after_crash``."""
        ...

    async def holds(self, fence: Fence, now: int) -> bool:
        """Whether ``fence``'s claim is still current (a read: a holder checks before it reports or acts)."""
        ...
