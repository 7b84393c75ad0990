"""A nudge for whoever polls the mailbox: set after a write another holder may act on (a decision queued, a claim
moved or settled), so a waiting poll loop looks now instead of at its next tick. Only ever early, never instead:
every waiter still wakes at its own interval, so a lost nudge costs what polling costs, and no semantics change."""

from __future__ import annotations

import anyio
import anyio.lowlevel

__all__ = ["Wakeup"]


class Wakeup:
    """``set()`` wakes every ``wait`` in progress; one that came while nobody waited wakes the next ``wait``."""

    def __init__(self) -> None:
        self._event: anyio.Event | None = None
        self._waiting = 0
        self._pending = False

    def set(self) -> None:
        if self._waiting and self._event is not None:
            self._event.set()
            self._event = None
        else:
            self._pending = True

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - a poll interval, not a deadline
        """Return after ``timeout`` seconds, or at the first ``set()`` (or at once after an unseen one)."""
        if self._pending:
            self._pending = False
            await anyio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = anyio.Event()
        event = self._event
        self._waiting += 1
        try:
            with anyio.move_on_after(timeout):
                await event.wait()
        finally:
            self._waiting -= 1
