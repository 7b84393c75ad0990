"""Sessions as the surfaces see them: a record (working directory, agent, model, mode, MCP servers) and its thread.

The protocol servers and the CLI go through here rather than the store, so a session's pieces stay together:
deleting one takes its thread (messages, runs, state) along; its history and runs are its thread's; forking one copies
its thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from awaken_stdio.contract.lifecycle import RunStatus
    from awaken_stdio.contract.messages import Message
    from awaken_stdio.contract.stores import Page, RunRecord, SessionRecord, Store

__all__ = ["Sessions"]


@dataclass(frozen=True, slots=True, kw_only=True)
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

    async def fork(self, source: SessionRecord, record: SessionRecord, *, up_to: str | None = None) -> None:
        """Save ``record`` as a fork of ``source``: a new thread holding a copy of the source's messages (up to and
        including the message ``up_to``, else all, with the thread's state), independent of it afterwards.

        One checkpoint writes the copy, with a finished run record saying where it came from (the store appends
        messages only with a run). ``LookupError`` when ``up_to`` is not a message of the source; nothing is saved.
        """
        from awaken_stdio.contract.ids import new_id
        from awaken_stdio.contract.lifecycle import TerminationReason
        from awaken_stdio.contract.stores import Checkpoint, RunRecord, ThreadRecord

        loaded = await self.store.load_thread(source.thread_id)
        messages = list(loaded.messages) if loaded is not None else []
        state = loaded.state if loaded is not None else None
        if up_to is not None:
            end = next((i for i, m in enumerate(messages) if m.id == up_to), None)
            if end is None:
                raise LookupError(f"message {up_to} is not in session {source.session_id}")
            if end + 1 < len(messages):
                messages, state = messages[: end + 1], None  # the state belongs to the whole conversation
        agent_id = (loaded.thread.agent_id if loaded is not None else None) or record.agent_id or ""
        origin = {"session_id": source.session_id, "thread_id": source.thread_id}
        if up_to is not None:
            origin["message_id"] = up_to
        thread = ThreadRecord(
            thread_id=record.thread_id,
            title=record.title,
            agent_id=agent_id or None,
            parent_thread_id=source.thread_id,
            metadata={"forked_from": origin},
        )
        await self.store.save_thread(thread)
        if messages:
            run = RunRecord(
                run_id=new_id(),
                thread_id=record.thread_id,
                agent_id=agent_id or record.agent_id or "",
                status="done",
                session_id=record.session_id,
                origin=record.origin,
                cwd=record.cwd,
                termination=TerminationReason.natural(),
                status_reason=f"forked from session {source.session_id}",
            )
            await self.store.checkpoint(
                Checkpoint(
                    thread_id=record.thread_id, expected_message_count=0, messages=messages, run=run, thread_state=state
                )
            )
        await self.store.save_session(record)

    async def delete(self, session_id: str) -> SessionRecord | None:
        """Delete the session and its thread; the deleted record, or ``None`` for an unknown session."""
        record = await self.store.load_session(session_id)
        if record is not None:
            await self.store.delete_session(session_id)
            await self.store.delete_thread(record.thread_id)
        return record
