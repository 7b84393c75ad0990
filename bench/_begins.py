"""Counting an in-process SQLite store's transactions (its ``BEGIN`` statements), for the per-operation figures."""

from __future__ import annotations

from typing import Any


class Begins:
    """Traces the writer and reader connections of an open ``SqliteStore``; ``count`` is the BEGINs so far."""

    def __init__(self) -> None:
        self.count = 0

    @classmethod
    async def on(cls, store: Any) -> Begins:
        begins = cls()
        for db in (store._writer, store._reader):  # each on its own thread (``sqlite_thread.ConnectionThread``)
            await db.call(lambda conn: conn.set_trace_callback(begins._trace))
        return begins

    def _trace(self, sql: str) -> None:
        if sql.startswith("BEGIN"):
            self.count += 1
