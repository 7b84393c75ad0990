"""``memory://``: everything in dicts of this process, for tests, demos and the in-memory benchmark.

Every operation runs without an ``await`` in the middle, so on one event loop each is atomic, a checkpoint
included. Records are copied on the way in and out (messages are frozen and shared), so a caller editing an object
it saved or loaded never edits the store. Nothing survives ``aclose()`` or the process.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import RunStatus
from awaken_stdio.contract.mailbox import MailboxStore
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.profile import ProfileEntry
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import (
    Checkpoint,
    LoadedThread,
    Page,
    PermissionGrant,
    RunRecord,
    SessionRecord,
    Store,
    ThreadRecord,
)
from awaken_stdio.stores._base import BaseStore

if TYPE_CHECKING:
    from awaken_stdio.stores.mailbox_memory import MemoryMailbox
from awaken_stdio.stores._codec import (
    answered_calls,
    check_count,
    check_run_thread,
    copy_grant,
    copy_run,
    copy_session,
    copy_state,
    copy_thread,
    dumps,
    loads,
    page_newest_first,
)

__all__ = ["MemoryStore"]


def _run_key(r: RunRecord) -> tuple[int, str]:
    return r.updated_at, r.run_id


class MemoryStore(BaseStore, Store):
    durable = False  # nothing here outlives the process

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._threads: dict[str, ThreadRecord] = {}
        self._messages: dict[str, list[Message]] = {}
        self._states: dict[str, PersistedState] = {}
        self._runs: dict[str, RunRecord] = {}
        self._thread_runs: dict[str, set[str]] = {}
        self._profiles: dict[str, dict[str, tuple[str, int]]] = {}  # owner -> key -> (JSON text, updated_at)
        self._sessions: dict[str, SessionRecord] = {}
        self._grants: dict[str, PermissionGrant] = {}

    @cached_property
    def mailbox(self) -> MailboxStore:  # pyright: ignore[reportIncompatibleMethodOverride]  # read-only, as declared
        return self._mailbox

    @cached_property
    def _mailbox(self) -> MemoryMailbox:
        from awaken_stdio.stores.mailbox_memory import MemoryMailbox

        return MemoryMailbox(self._check_open)

    # -- threads ---------------------------------------------------------------------------------------------

    def _ensure_thread(
        self, thread_id: str, agent_id: str | None = None, parent_thread_id: str | None = None
    ) -> ThreadRecord:
        thread = self._threads.get(thread_id)
        if thread is None:
            thread = self._threads[thread_id] = ThreadRecord(
                thread_id=thread_id, agent_id=agent_id, parent_thread_id=parent_thread_id
            )
            self._messages[thread_id] = []
        return thread

    async def load_thread(self, thread_id: str) -> LoadedThread | None:
        self._check_open()
        thread = self._threads.get(thread_id)
        if thread is None:
            return None
        state = self._states.get(thread_id)
        return LoadedThread(
            thread=copy_thread(thread),
            messages=list(self._messages[thread_id]),
            state=copy_state(state) if state is not None else None,
            latest_run=self._latest_run(thread_id),
        )

    async def load_messages(self, thread_id: str, *, offset: int = 0, limit: int | None = None) -> list[Message]:
        self._check_open()
        messages = self._messages.get(thread_id, [])
        return messages[offset:] if limit is None else messages[offset : offset + limit]

    async def checkpoint(self, cp: Checkpoint) -> None:
        from awaken_stdio.stores.mailbox_core import check_fence, settle_with

        self._check_open()
        thread = self._threads.get(cp.thread_id)
        check_run_thread(cp)
        if refused := await check_fence(self._mailbox.tables, cp.fence, now_ms()):
            raise refused.error
        check_count(cp, thread.message_count if thread is not None else 0)
        thread = self._ensure_thread(cp.thread_id, cp.run.agent_id, cp.run.parent_thread_id)
        self._messages[cp.thread_id].extend(cp.messages)
        thread.message_count += len(cp.messages)
        thread.updated_at = now_ms()
        if cp.thread_state is not None:
            self._states[cp.thread_id] = copy_state(cp.thread_state)
        self._put_run(cp.run)
        for mark in cp.marks:
            await self._mailbox.tables.effect_put(mark)
        if answered := answered_calls(cp):
            self._mailbox.tables.settle(cp.thread_id, answered, now_ms())
        if cp.settle is not None:
            await settle_with(self._mailbox.tables, cp.settle, cp.run, now_ms())

    async def save_thread(self, thread: ThreadRecord) -> None:
        self._check_open()
        old = self._threads.get(thread.thread_id)
        saved = copy_thread(thread)
        saved.message_count = old.message_count if old is not None else 0  # owned by checkpoints
        self._threads[thread.thread_id] = saved
        self._messages.setdefault(thread.thread_id, [])

    async def load_thread_state(self, thread_id: str) -> PersistedState | None:
        self._check_open()
        state = self._states.get(thread_id)
        return copy_state(state) if state is not None else None

    async def save_thread_state(self, thread_id: str, state: PersistedState) -> None:
        self._check_open()
        self._ensure_thread(thread_id)
        self._states[thread_id] = copy_state(state)

    async def list_threads(self, *, limit: int = 100, cursor: str | None = None) -> Page[ThreadRecord]:
        self._check_open()
        page = page_newest_first(
            self._threads.values(), lambda t: (t.updated_at, t.thread_id), kind="threads", limit=limit, cursor=cursor
        )
        return Page(items=[copy_thread(t) for t in page.items], next_cursor=page.next_cursor)

    async def delete_thread(self, thread_id: str) -> None:
        self._check_open()
        self._threads.pop(thread_id, None)
        self._messages.pop(thread_id, None)
        self._states.pop(thread_id, None)
        for run_id in self._thread_runs.pop(thread_id, ()):
            del self._runs[run_id]

    # -- runs ------------------------------------------------------------------------------------------------

    def _put_run(self, run: RunRecord) -> None:
        old = self._runs.get(run.run_id)
        if old is not None and old.thread_id != run.thread_id:
            self._thread_runs[old.thread_id].discard(run.run_id)
        self._runs[run.run_id] = copy_run(run)
        self._thread_runs.setdefault(run.thread_id, set()).add(run.run_id)

    def _latest_run(self, thread_id: str) -> RunRecord | None:
        runs = [self._runs[r] for r in self._thread_runs.get(thread_id, ())]
        return copy_run(max(runs, key=_run_key)) if runs else None

    async def load_run(self, run_id: str) -> RunRecord | None:
        self._check_open()
        run = self._runs.get(run_id)
        return copy_run(run) if run is not None else None

    async def save_run(self, run: RunRecord) -> None:
        self._check_open()
        self._ensure_thread(run.thread_id, run.agent_id, run.parent_thread_id)
        self._put_run(run)

    async def latest_run(self, thread_id: str) -> RunRecord | None:
        self._check_open()
        return self._latest_run(thread_id)

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        statuses: list[RunStatus] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        self._check_open()
        runs = (
            self._runs.values() if thread_id is None else [self._runs[r] for r in self._thread_runs.get(thread_id, ())]
        )
        if statuses is not None:
            runs = [r for r in runs if r.status in statuses]
        page = page_newest_first(runs, _run_key, kind="runs", limit=limit, cursor=cursor)
        return Page(items=[copy_run(r) for r in page.items], next_cursor=page.next_cursor)

    # -- profiles --------------------------------------------------------------------------------------------

    async def get_profile(self, owner: str, key: str) -> ProfileEntry | None:
        self._check_open()
        found = self._profiles.get(owner, {}).get(key)
        return ProfileEntry(key=key, value=loads(found[0]), updated_at=found[1]) if found is not None else None

    async def set_profile(self, owner: str, key: str, value: Any) -> None:
        self._check_open()
        self._profiles.setdefault(owner, {})[key] = (dumps(value), now_ms())  # JSON text: a copy, and validated

    async def delete_profile(self, owner: str, key: str) -> None:
        self._check_open()
        self._profiles.get(owner, {}).pop(key, None)

    async def list_profile(self, owner: str) -> list[ProfileEntry]:
        self._check_open()
        entries = self._profiles.get(owner, {})
        return [ProfileEntry(key=k, value=loads(v), updated_at=at) for k, (v, at) in sorted(entries.items())]

    async def clear_profile_owner(self, owner: str) -> None:
        self._check_open()
        self._profiles.pop(owner, None)

    # -- sessions --------------------------------------------------------------------------------------------

    async def save_session(self, session: SessionRecord) -> None:
        self._check_open()
        self._sessions[session.session_id] = copy_session(session)

    async def load_session(self, session_id: str) -> SessionRecord | None:
        self._check_open()
        session = self._sessions.get(session_id)
        return copy_session(session) if session is not None else None

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[SessionRecord]:
        self._check_open()
        sessions = [s for s in self._sessions.values() if cwd is None or s.cwd == cwd]
        page = page_newest_first(
            sessions, lambda s: (s.updated_at, s.session_id), kind="sessions", limit=limit, cursor=cursor
        )
        return Page(items=[copy_session(s) for s in page.items], next_cursor=page.next_cursor)

    async def delete_session(self, session_id: str) -> None:
        self._check_open()
        self._sessions.pop(session_id, None)

    # -- permission grants -----------------------------------------------------------------------------------

    async def add_grant(self, grant: PermissionGrant) -> None:
        self._check_open()
        self._grants[grant.grant_id] = copy_grant(grant)

    async def list_grants(self, workspace: str, *, now: int | None = None) -> list[PermissionGrant]:
        self._check_open()
        at = now_ms() if now is None else now
        grants = [g for g in self._grants.values() if g.workspace == workspace and g.active(at)]
        return [copy_grant(g) for g in sorted(grants, key=lambda g: (g.created_at, g.grant_id))]

    async def delete_grant(self, grant_id: str) -> None:
        self._check_open()
        self._grants.pop(grant_id, None)
