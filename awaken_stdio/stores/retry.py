"""Bounded retry with exponential backoff and full jitter, for transient contention between processes.

SQLite's busy timeout already waits for a lock inside the driver; this covers what it cannot (a busy snapshot, WAL
recovery by another process, a lock released and re-taken between our attempts) and PostgreSQL serialization
failures and deadlocks. The whole transaction is retried, never a single statement of it.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import anyio

__all__ = ["RetryPolicy", "retrying"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    attempts: int = 8
    first_delay_s: float = 0.005
    max_delay_s: float = 0.5

    def delay(self, attempt: int) -> float:
        """Full jitter (uniform in [0, cap]) so processes that collided once do not collide again in lockstep."""
        return random.uniform(0, min(self.max_delay_s, self.first_delay_s * (2**attempt)))


async def retrying(
    op: Callable[[], Awaitable[T]], transient: Callable[[BaseException], bool], policy: RetryPolicy
) -> T:
    """Run ``op``; when it raises a ``transient`` error, wait and run it again, at most ``policy.attempts`` times.
    The last error propagates unchanged, for the caller's translation seam to name."""
    for attempt in range(policy.attempts - 1):
        try:
            return await op()
        except Exception as exc:
            if not transient(exc):
                raise
        await anyio.sleep(policy.delay(attempt))
    return await op()
