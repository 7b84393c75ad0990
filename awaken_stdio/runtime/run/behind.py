"""What a run writes behind its loop: the step end to store (:class:`EndOfStep`) and the one writer at a time that
stores it (:class:`WriteBehind`). ``finish.py`` decides when and how; this module holds the state, so that the run
(``state.py``) can hold a writer without importing ``finish.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskGroup

from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.state import Snapshot

__all__ = ["EndOfStep", "WriteBehind"]


@dataclass(frozen=True, slots=True, kw_only=True)
class EndOfStep:
    """What a checkpoint taken at a step end holds, captured in O(1): the state is an immutable snapshot, so the
    run record and the thread state are exported from it only when a write takes it (most step ends of a fast run
    are superseded before any write starts)."""

    upto: int  # messages[:upto]
    state: Snapshot
    steps: int
    usage: TokenUsage
    response: str
    at: int


@dataclass(slots=True, kw_only=True)
class WriteBehind:
    """The step checkpoints of one run on a durable store, written behind its loop by one writer at a time, a task of
    the run's own task group (``AgentLoop.run``), which does not end before its writer does.

    The writer starts ``finish.WRITE_BEHIND_AFTER_S`` after a step end (a timer), unless a checkpoint that carries the
    step came first: a run whose model answers sooner carries its step ends into its next checkpoint without a task ever
    being made, and one that waits long on its model has the step written meanwhile. The run waits for the writer at
    every ``flush`` and before it returns (``AgentLoop.run``), so no write outlives it."""

    write: Callable[[WriteBehind], Coroutine[Any, Any, None]]  # the writer's body (``finish._write_behind``)
    tasks: TaskGroup  # the run's: where the writer runs
    wanted: EndOfStep | None = None  # the latest step end not yet in flight
    scheduled: asyncio.TimerHandle | None = None  # the writer's start, while it has not run
    writing: bool = False  # while the writer runs
    idle: anyio.Event | None = None  # made by a waiter, set by the writer when it is done
    error: Exception | None = None  # what a write behind raised, for the next ``flush`` to raise

    @property
    def busy(self) -> bool:
        return self.scheduled is not None or self.writing

    def schedule(self, delay: float) -> None:
        """Start the writer ``delay`` seconds from now, unless it is scheduled or running. The timer is asyncio's own
        (anyio has none; a task sleeping instead would cost one for every step end, most of them superseded): it
        fires only while the run lets the event loop go on."""
        if not self.busy:
            self.scheduled = asyncio.get_running_loop().call_later(delay, self.start)

    def start(self) -> None:
        self.scheduled = None
        self.writing = True
        self.tasks.start_soon(self.write, self)

    def done(self) -> None:
        """Called by the writer as it ends: whoever waits for it is woken."""
        self.writing = False
        if self.idle is not None:
            self.idle.set()

    def hurry(self) -> None:
        """Start a scheduled writer now: somebody waits for its step ends to be stored."""
        if self.scheduled is not None:
            self.scheduled.cancel()
            self.start()

    def unschedule(self) -> None:
        """Drop a writer that has not started: its step ends are superseded, or the run is over. Whoever waits
        for it is woken: there is no writer left to wake them."""
        if self.scheduled is not None:
            self.scheduled.cancel()
            self.scheduled = None
            if self.idle is not None:
                self.idle.set()

    async def wait(self) -> None:
        """Until no writer is scheduled or running (shielded: a write in flight is never abandoned)."""
        if not self.busy:  # the usual case at a run's end: no scope to open
            return
        with anyio.CancelScope(shield=True):
            while self.busy:
                if self.idle is None or self.idle.is_set():
                    self.idle = anyio.Event()
                await self.idle.wait()
