"""Identifiers and clocks shared by every layer.

Ids are UUIDv7 strings: time-ordered, so "latest run of a thread" and the mailbox's FIFO order sort naturally, and
unique across processes that share one database. Times are unix milliseconds everywhere (records, events, leases).
"""

from __future__ import annotations

import os
import threading
import time

from awaken_stdio.contract._speed import random_generator

__all__ = ["iso_ms", "new_id", "now_ms"]

_lock = threading.Lock()
_last_ms = 0
_seq = 0
# An id's 62 random bits: unique, not secret (nothing trusts an id it did not hand out), so a generator seeded from
# the OS at import, and again in a forked child, instead of a slower getrandom call per id.
_random = random_generator()
os.register_at_fork(after_in_child=_random.seed)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso_ms(ms: int) -> str:
    """Unix milliseconds as ISO 8601 UTC with a ``Z`` (what ACP's ``updatedAt`` and the CLI's JSON show)."""
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_id(prefix: str = "") -> str:
    """A UUIDv7 (RFC 9562) string, monotonic within this process, optionally prefixed (``sess_``, ``call_``)."""
    global _last_ms, _seq
    with _lock:
        ms = now_ms()
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
            if _seq >= 1 << 12:  # 12-bit counter exhausted in this millisecond: borrow the next one
                ms += 1
                _seq = 0
        else:
            _seq = 0
        _last_ms = ms
        seq = _seq
    rand = _random.getrandbits(62)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | rand
    h = f"{value:032x}"  # the 8-4-4-4-12 form of str(uuid.UUID(int=value)), without importing uuid (platform)
    return f"{prefix}{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
