"""The mailbox of ``memory://`` (dicts of this process), and its tables, which ``file://`` keeps in one JSON file.

The memory mailbox runs the shared logic (``mailbox_core``) on dicts without an ``await`` in the middle, so each
operation is atomic on the event loop. The file mailbox (``file.py``) keeps the same tables in ``mailbox.json`` in
the store directory: each operation, under the store's ``flock``, loads the file, runs the same logic and replaces
the file atomically if it changed. That costs a whole-file rewrite per write, which suits the file backend (a handful of
processes, terminal rows purged after a day) and needs no database beside the JSON files people can read.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any, TypeVar

from awaken_stdio.contract.mailbox import (
    OPEN_EFFECT_STATUSES,
    TERMINAL_STATUSES,
    EffectRecord,
    EffectStatus,
    RunDispatch,
)
from awaken_stdio.stores._codec import FAR
from awaken_stdio.stores.mailbox_core import MailboxBase, MailboxTable, Op

__all__ = ["MailboxTables", "MemoryMailbox"]

T = TypeVar("T")


def _order(d: RunDispatch) -> tuple[int, int, str]:
    return d.priority, d.created_at, d.dispatch_id


def _page(rows: list[RunDispatch], limit: int | None, offset: int) -> list[RunDispatch]:
    rows.sort(key=_order)
    return [r.copy() for r in rows[offset : None if limit is None else offset + limit]]


class MailboxTables(MailboxTable):
    """The mailbox's tables as dicts: rows by thread, thread epochs, ledger entries. Rows are copied in and out."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, RunDispatch]] = {}  # thread -> dispatch id -> row
        self.thread_of: dict[str, str] = {}
        self.epochs: dict[str, int] = {}
        self.effects: dict[tuple[str, str], EffectRecord] = {}
        self.open_effects: dict[str, set[str]] = {}  # thread -> calls with an open entry: no full scans
        self.dirty = False
        self.woken = False

    async def wake(self) -> None:
        self.woken = True  # one process: its own pollers are every poller there is

    def _all(self) -> list[RunDispatch]:
        return [d for rows in self.rows.values() for d in rows.values()]

    async def lock_thread(self, thread_id: str) -> int:
        if thread_id not in self.epochs:
            self.epochs[thread_id] = 0
            self.dirty = True
        return self.epochs[thread_id]

    async def locked_get(self, dispatch_id: str) -> tuple[RunDispatch | None, int]:
        thread = self.thread_of.get(dispatch_id)
        if thread is None:
            return None, 0
        epoch = await self.lock_thread(thread)
        return self.rows[thread][dispatch_id].copy(), epoch

    async def epoch(self, thread_id: str) -> int:
        return self.epochs.get(thread_id, 0)

    async def set_epoch(self, thread_id: str, epoch: int) -> None:
        self.epochs[thread_id] = epoch
        self.dirty = True

    async def get(self, dispatch_id: str) -> RunDispatch | None:
        thread = self.thread_of.get(dispatch_id)
        return self.rows[thread][dispatch_id].copy() if thread is not None else None

    async def insert(self, d: RunDispatch) -> None:
        self.rows.setdefault(d.thread_id, {})[d.dispatch_id] = d.copy()
        self.thread_of[d.dispatch_id] = d.thread_id
        self.dirty = True

    async def update(self, d: RunDispatch) -> None:
        self.rows[d.thread_id][d.dispatch_id] = d.copy()
        self.dirty = True

    async def thread_rows(
        self, thread_id: str, statuses: tuple[str, ...] | None, limit: int | None = None, offset: int = 0
    ) -> list[RunDispatch]:
        rows = self.rows.get(thread_id, {}).values()
        return _page([d for d in rows if statuses is None or d.status in statuses], limit, offset)

    async def dedupe_taken(self, thread_id: str, key: str) -> bool:
        rows = self.rows.get(thread_id, {}).values()
        return any(d.dedupe_key == key and not d.terminal for d in rows)

    async def expired(self, now: int, limit: int) -> list[RunDispatch]:
        found = [d for d in self._all() if d.status == "claimed" and (d.lease_until or 0) < now]
        found.sort(key=lambda d: (d.lease_until or 0, d.dispatch_id))
        return [d.copy() for d in found[:limit]]

    async def by_status(self, statuses: tuple[str, ...], limit: int, offset: int) -> list[RunDispatch]:
        found = sorted((d for d in self._all() if d.status in statuses), key=lambda d: (d.created_at, d.dispatch_id))
        return [d.copy() for d in found[offset : offset + limit]]

    async def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self._all():
            out[d.status] = out.get(d.status, 0) + 1
        return out

    async def queued_threads(self, now: int | None) -> list[str]:
        at = FAR if now is None else now
        return sorted(
            t
            for t, rows in self.rows.items()
            if any(d.status == "queued" and d.available_at <= at for d in rows.values())
        )

    async def queued_for_holder(self, consumer: str) -> list[RunDispatch]:
        held = [t for t, rows in self.rows.items() if any(d.claimed_by == consumer for d in rows.values())]
        found = [d for t in held for d in self.rows[t].values() if d.status == "queued"]
        found.sort(key=lambda d: (d.created_at, d.dispatch_id))
        return [d.copy() for d in found]

    async def purge(self, older_than: int) -> int:
        doomed = [d for d in self._all() if d.status in TERMINAL_STATUSES and d.updated_at < older_than]
        for d in doomed:
            del self.rows[d.thread_id][d.dispatch_id]
            del self.thread_of[d.dispatch_id]
        done = [key for key, e in self.effects.items() if e.status == "finished" and e.updated_at < older_than]
        for key in done:
            del self.effects[key]
        self.dirty = self.dirty or bool(doomed or done)
        return len(doomed)

    async def effect_put(self, e: EffectRecord) -> None:
        self.effects[(e.thread_id, e.call_id)] = replace(e)  # records are never mutated in place outside
        self._track(e)
        self.dirty = True

    def _track(self, e: EffectRecord) -> None:
        calls = self.open_effects.setdefault(e.thread_id, set())
        if e.status in OPEN_EFFECT_STATUSES:
            calls.add(e.call_id)
        else:
            calls.discard(e.call_id)

    async def effect_finish(self, thread_id: str, call_id: str, result: dict[str, Any] | None, now: int) -> None:
        e = self.effects.get((thread_id, call_id))
        if e is not None:
            e.status, e.result, e.updated_at = "finished", result, now
            self._track(e)
            self.dirty = True

    def settle(self, thread_id: str, call_ids: list[str], now: int) -> None:
        """Open entries among ``call_ids`` become ``finished`` (their results reached the conversation)."""
        self._leave(thread_id, call_ids, leaving=OPEN_EFFECT_STATUSES, status="finished", now=now)

    def _leave(
        self, thread_id: str, call_ids: list[str], leaving: tuple[EffectStatus, ...], status: EffectStatus, now: int
    ) -> None:
        for c in call_ids:
            e = self.effects.get((thread_id, c))
            if e is not None and e.status in leaving:
                e.status, e.updated_at = status, now
                self._track(e)
                self.dirty = True

    async def effects_open(self, thread_id: str) -> list[EffectRecord]:
        found = [replace(self.effects[(thread_id, c)]) for c in self.open_effects.get(thread_id, ())]
        return sorted(found, key=lambda e: (e.started_at, e.call_id))

    async def effects_unknown(self, thread_id: str, call_ids: list[str], now: int) -> None:
        self._leave(thread_id, call_ids, leaving=("started",), status="unknown_after_crash", now=now)

    # -- the file form -----------------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "dispatches": [d.to_json() for d in self._all()],
            "epochs": self.epochs,
            "effects": [asdict(e) for e in self.effects.values()],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> MailboxTables:
        tables = MailboxTables()
        for raw in data.get("dispatches", ()):
            d = RunDispatch.from_json(raw)
            d.validate()
            tables.rows.setdefault(d.thread_id, {})[d.dispatch_id] = d
            tables.thread_of[d.dispatch_id] = d.thread_id
        tables.epochs = {k: int(v) for k, v in data.get("epochs", {}).items()}
        for raw in data.get("effects", ()):
            e = EffectRecord(**raw)
            tables.effects[(e.thread_id, e.call_id)] = e
            tables._track(e)
        return tables


class MemoryMailbox(MailboxBase):
    def __init__(self, check_open: Any = None) -> None:
        self.tables = MailboxTables()  # the memory store's checkpoints settle effect-ledger entries here
        self._check_open = check_open or (lambda: None)

    async def _write(self, fn: Op[T]) -> T:
        self._check_open()
        return await fn(self.tables)

    async def _read(self, fn: Op[T]) -> T:
        return await self._write(fn)
