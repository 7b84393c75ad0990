"""Counting an in-process SQLite store's transactions (its ``BEGIN`` statements), for the per-operation figures."""

from __future__ import annotations

import sqlite3
from typing import Any


class Begins:
    """Traces the writer and reader connections of an open ``SqliteStore`` (sqlite3's ``set_trace_callback``);
    ``count`` is the BEGINs so far (``writes_only``: the ``BEGIN IMMEDIATE`` of write transactions only)."""

    def __init__(self, store: Any, writes_only: bool) -> None:
        self.count = 0
        self._store = store
        self._prefix = "BEGIN IMMEDIATE" if writes_only else "BEGIN"

    @classmethod
    async def on(cls, store: Any, *, writes_only: bool = False) -> Begins:
        begins = cls(store, writes_only)
        await begins._trace_with(begins._trace)
        return begins

    async def stop(self) -> None:
        """Stop tracing: it costs CPU that the figures measured next must not include."""
        await self._trace_with(None)

    async def _trace_with(self, trace: Any) -> None:
        def set_trace(conn: sqlite3.Connection) -> None:
            conn.set_trace_callback(trace)

        for db in (self._store._writer, self._store._reader):  # each on its own thread (``sqlite_thread``)
            await db.call(set_trace)

    def _trace(self, sql: str) -> None:
        if sql.startswith(self._prefix):
            self.count += 1
