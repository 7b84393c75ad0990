"""Sessions as the surfaces see them: a record (working directory, agent, model, mode, MCP servers) and its thread.

The protocol servers and the CLI go through here rather than the store, so a session's pieces stay together:
deleting one takes its thread (messages, runs, state) along; its history and runs are its thread's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awaken_stdio.contract.lifecycle import RunStatus
    from awaken_stdio.contract.messages import Message
    from awaken_stdio.contract.stores import Page, RunRecord, SessionRecord, Store

__all__ = ["Sessions"]


@dataclass(frozen=True, slots=True)
class Sessions:
    store: Store

    async def load(self, session_id: str) -> SessionRecord | None:
        return await self.store.load_session(session_id)

    async def save(self, record: SessionRecord) -> None:
        await self.store.save_session(record)

    async def list(self, *, cwd: str | None = None, limit: int = 100, cursor: str | None = None) -> Page[SessionRecord]:
        """Most recently updated first; ``ValueError`` for a cursor the store did not give."""
        return await self.store.list_sessions(cwd=cwd, limit=limit, cursor=cursor)

    async def history(self, record: SessionRecord) -> list[Message]:
        """Every message of the session's thread, in order."""
        return await self.store.load_messages(record.thread_id)

    async def runs(
        self, record: SessionRecord, *, statuses: list[RunStatus] | None = None, limit: int = 20
    ) -> Page[RunRecord]:
        """The runs of the session's thread (of ``statuses``, when given), newest first."""
        return await self.store.list_runs(thread_id=record.thread_id, statuses=statuses, limit=limit)

    async def delete(self, session_id: str) -> SessionRecord | None:
        """Delete the session and its thread; the deleted record, or ``None`` for an unknown session."""
        record = await self.store.load_session(session_id)
        if record is not None:
            await self.store.delete_session(session_id)
            await self.store.delete_thread(record.thread_id)
        return record
