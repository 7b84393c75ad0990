"""A nudge for whoever polls the mailbox: set after a write a poller acts on (a decision or cancel queued, a claim
released with work behind it, a cancel carried out), so a waiting poller looks now instead of at its next tick.

Where every other process's such write is pushed too (PostgreSQL with its LISTEN connection up: :attr:`pushed`), a
poller waits on the nudge alone and its interval grows to :data:`PUSHED_POLL_S`, a safety sweep for what nobody
announces. Where it is not (SQLite across processes, a LISTEN connection lost), the nudge is only ever early: every
waiter still wakes at its own poll interval, so a lost nudge costs what polling costs. Pushing going up or down
wakes every waiter once: a re-scan for what was missed meanwhile, and each wait then picks its new interval."""

from __future__ import annotations

import anyio
import anyio.lowlevel

__all__ = ["PUSHED_POLL_S", "Wakeup"]

# While pushed, a wait's timeout only backs up what no write announces: a holder that died without a word, a lease
# that lapsed, a retry whose backoff ended. The sweeper finds those at its own pace (``sweep_every_s``, 2 s), so
# waking sooner finds nothing more; it is a tenth of the 0.2 s polling's wake-ups.
PUSHED_POLL_S = 2.0


class Wakeup:
    """``set()`` wakes every ``wait`` in progress, and every later one that looks from before it: a poller takes
    ``generation`` before it looks at the mailbox and waits ``since`` it, so a nudge that came while it looked
    (while another waiter waited) is never lost to it.

    ``ticks`` counts the waits that ran to their interval: polls that no nudge asked for."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._pushed = False
        self.generation = 0
        self.ticks = 0

    @property
    def pushed(self) -> bool:
        """Every process's writes that pollers act on reach this wake-up (its store LISTENs)."""
        return self._pushed

    def push(self, up: bool) -> None:
        """Pushing came up (a LISTEN connected) or went down (it was lost): every waiter wakes to look once."""
        self._pushed = up
        self.set()

    def interval(self, poll_s: float) -> float:
        """How long a poller configured for ``poll_s`` waits for a nudge: that, or while pushed the safety sweep's
        :data:`PUSHED_POLL_S` (never shorter than ``poll_s``)."""
        return max(poll_s, PUSHED_POLL_S) if self._pushed else poll_s

    def set(self) -> None:
        self.generation += 1
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait(self, poll_s: float, since: int) -> None:
        """Return at once if ``set()`` came since ``generation`` was ``since``, else at the next ``set()`` or after
        ``interval(poll_s)``."""
        if self.generation != since:
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        with anyio.move_on_after(self.interval(poll_s)) as scope:
            await self._event.wait()
        if scope.cancelled_caught:
            self.ticks += 1
