"""Who holds a thread and how its dispatches settle: the lease timings, claim owners (``host:pid:instance``) and
whether one died, how a failure is settled, and the claim this process holds while it runs or waits.

The mailbox service (``dispatch.py``) is built on these; they hold no loop of their own.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.errors import (
    AgentNotFound,
    DecisionTargetNotFound,
    InvalidResume,
    ProviderError,
    UsageError,
    VersionConflict,
)
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import DispatchSettle, MailboxStore, RunDispatch, retry_delay_ms
from awaken_stdio.contract.stores import RunRecord, ThreadForRun

__all__ = [
    "DecisionSuperseded",
    "ErrorClass",
    "Followed",
    "Held",
    "MailboxConfig",
    "classify_error",
    "consumer_id",
    "owner_is_dead",
    "record_outcome",
    "requeue_dead",
    "settle_failure",
]

ErrorClass = Literal["ok", "transient", "permanent"]


class DecisionSuperseded(InvalidResume):
    """The run was decided (or ended) by someone else first; this decision was recorded but not applied."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MailboxConfig:
    lease_ms: int = 6_000  # a dead holder's claim (waiting runs too) lapses within this, on any machine
    renew_every_s: float = 1.5
    poll_every_s: float = 0.2
    sweep_every_s: float = 2.0
    decide_wait_s: float = 30.0  # how long a decider waits for a busy holder to take its decision
    gc_every_s: float = 60.0
    retain_terminal_ms: int = 24 * 3600 * 1000
    max_attempts: int = 5
    dispatch_queued: bool = True


def consumer_id() -> str:
    """``host:pid:instance``: names this service as a claim owner, and lets a neighbour see when it has died."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()[-12:]}"


def owner_is_dead(owner: str) -> bool:
    """True only when ``owner`` is a process of this machine that no longer exists (never for another host's)."""
    host, _, rest = owner.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit() or int(pid_text) == os.getpid():
        return False
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def requeue_dead(mailbox: MailboxStore, d: RunDispatch, now: int) -> None:
    """Requeue a claim whose owner process died (:func:`owner_is_dead`) at once, not when its lease lapses."""
    try:
        await mailbox.nack(
            d.dispatch_id, d.claim_token or "", retry_at=now, error=f"owner {d.claimed_by} died", now=now
        )
    except VersionConflict:
        pass  # someone else requeued it first


def classify_error(exc: BaseException) -> ErrorClass:
    """How a failed dispatch is settled: ``ok`` (ack; the run record says what happened), ``transient`` (nack and
    retry with backoff) or ``permanent`` (dead-letter after this one run)."""
    if isinstance(exc, InvalidResume | DecisionTargetNotFound):
        return "ok"  # the run moved on (resumed elsewhere, finished): nothing left to do
    if isinstance(exc, AgentNotFound | UsageError):
        return "permanent"
    if isinstance(exc, ProviderError):
        return "transient" if exc.retryable else "permanent"
    return "transient"  # ThreadAlreadyRunning, StoreError and anything unforeseen: retried with backoff


@dataclass(slots=True, kw_only=True)
class Followed:
    """What the holder's execution of one taken-over row came to, for a decider in this process that waits on it:
    ``None`` when the holder let go without executing it."""

    done: anyio.Event = field(default_factory=anyio.Event)
    result: AgentRunResult | None = None

    async def outcome(self) -> AgentRunResult | None:
        await self.done.wait()
        return self.result


@dataclass(slots=True, kw_only=True)
class Held:
    """A thread this process holds the claim on, and the dispatch it is executing."""

    dispatch: RunDispatch
    waiting: bool = False  # the run waits for a person here: decisions recorded elsewhere are taken over
    settled: bool = False  # nacked or dead-lettered: nothing to ack at the end
    lost: bool = False
    result: AgentRunResult | None = None  # of the last execution, recorded with the final ack
    early: list[str] = field(default_factory=list)  # decisions recorded here before the run reached its wait
    activation: RunActivation | None = None  # the holder's context: every resume here runs with it
    seen: RunRecord | None = None  # the run as the decider read it before claiming (its context, not its status)
    settle: DispatchSettle | None = None  # of the execution under way: the run's checkpoint may settle the row
    loaded: ThreadForRun | None = None  # the thread as the claim read it, for the first execution only
    lock: anyio.Lock = field(default_factory=anyio.Lock)  # one take-over at a time
    followed: dict[str, Followed] = field(default_factory=dict[str, Followed])  # rows deciders here wait on
    send: Any = None
    receive: Any = None

    def __post_init__(self) -> None:
        self.send, self.receive = anyio.create_memory_object_stream[RunDispatch](64)

    @property
    def token(self) -> str:
        return self.dispatch.claim_token or ""

    def executed(self, dispatch_id: str, result: AgentRunResult | None) -> None:
        """The execution of ``dispatch_id`` ended with ``result``: its decider, if one waits here, is told."""
        if (followed := self.followed.pop(dispatch_id, None)) is not None:
            followed.result = result
            followed.done.set()

    def let_go(self) -> None:
        """The holder ends: deciders still waiting on rows it never executed are told ``None``."""
        for dispatch_id in list(self.followed):
            self.executed(dispatch_id, None)


async def record_outcome(mailbox: MailboxStore, held: Held, result: AgentRunResult | None, *, ack: bool) -> None:
    """The execution's outcome on the row (one write), acking it at the end; nothing when the run's own checkpoint
    recorded it already (``held.settle``)."""
    s = held.settle
    if result is not None and s is not None and s.settled and (s.acked or not ack):
        return
    d, now = held.dispatch, now_ms()
    if result is None:
        if ack:
            await mailbox.ack(d.dispatch_id, held.token, now)
        return
    status = "waiting" if result.status == "waiting" else "done"
    await mailbox.record_run_result(
        d.dispatch_id,
        held.token,
        run_status=status,
        termination=result.termination,
        response=result.response,
        error=None,
        now=now,
        ack=ack,
    )


async def settle_failure(mailbox: MailboxStore, held: Held, exc: Exception, kind: ErrorClass) -> None:
    """A failed execution on its row: its error recorded, then retried later (``transient``), dead-lettered
    (``permanent``) or left to the final ack (``ok``). A claim that moved meanwhile is the new holder's to settle."""
    d, now = held.dispatch, now_ms()
    error = str(exc) or type(exc).__name__
    try:
        await mailbox.record_run_result(
            d.dispatch_id,
            held.token,
            run_status="done",
            termination=TerminationReason.error(error),
            response=None,
            error=error,
            now=now,
        )
        if kind == "transient":
            held.settled = True
            await mailbox.nack(
                d.dispatch_id, held.token, retry_at=now + retry_delay_ms(d.attempt_count + 1), error=error, now=now
            )
        elif kind == "permanent":
            held.settled = True
            await mailbox.dead_letter(d.dispatch_id, held.token, error, now)
    except VersionConflict:
        held.settled = True
