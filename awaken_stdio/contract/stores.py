"""Store records and protocols: what the runtime and the protocol adapters persist, and how.

One backend object implements every protocol here (threads and messages, runs, thread state, profiles, ACP
sessions, remembered permissions); ``stores/`` has one module per backend (memory, file, SQLite, PostgreSQL) and
one contract test suite runs against all of them. Every write that belongs together goes through
:meth:`ThreadStore.checkpoint`, which is atomic: messages, the run record and the thread state land together or
not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from awaken_stdio.contract.identity import RunIdentity
from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.lifecycle import RunOutcome, RunStatus, TerminationReason
from awaken_stdio.contract.mailbox import DispatchSettle, EffectRecord, Fence, MailboxStore, RunDispatch
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.preview import ToolPreview
from awaken_stdio.contract.profile import ProfileStore
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, ResumeMode, WaitingReason

__all__ = [
    "Checkpoint",
    "LoadedThread",
    "Page",
    "PermissionGrant",
    "PermissionStore",
    "RunRecord",
    "RunStore",
    "SessionRecord",
    "SessionStore",
    "Store",
    "ThreadForRun",
    "ThreadRecord",
    "ThreadStore",
    "WaitingState",
    "WaitingTicket",
]

T = TypeVar("T")
DisplayStatus = RunOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Generic[T]):
    items: list[T]
    next_cursor: str | None = None


@dataclass(slots=True, kw_only=True)
class ThreadRecord:
    thread_id: str
    title: str | None = None
    agent_id: str | None = None
    parent_thread_id: str | None = None
    message_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingTicket:
    """One call a waiting run needs a decision for."""

    ticket_id: str  # the suspension id (``perm_<call>``) or the call id
    tool_call_id: str
    tool_name: str
    arguments: Any
    resume_mode: ResumeMode
    reason: str  # the suspension's action, e.g. tool:PermissionConfirm
    message: str = ""
    updated_at: int = field(default_factory=now_ms)
    preview: ToolPreview | None = None  # what approving would do (the diff, the command), worked out before asking

    @property
    def outcome_unknown(self) -> bool:
        """Asked again after a crash interrupted an earlier attempt: approving may repeat its effect."""
        return self.reason == OUTCOME_UNKNOWN_ACTION

    def to_json(self) -> dict[str, Any]:
        return {
            "ticket_id": self.ticket_id,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "resume_mode": self.resume_mode,
            "reason": self.reason,
            "message": self.message,
            "updated_at": self.updated_at,
            **({"preview": self.preview.to_json()} if self.preview is not None else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> WaitingTicket:
        return WaitingTicket(
            ticket_id=d["ticket_id"],
            tool_call_id=d["tool_call_id"],
            tool_name=d["tool_name"],
            arguments=d.get("arguments"),
            resume_mode=d.get("resume_mode", "replay_tool_call"),
            reason=d.get("reason", ""),
            message=d.get("message", ""),
            updated_at=int(d.get("updated_at", 0)),
            preview=ToolPreview.from_json(d["preview"]) if d.get("preview") else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class WaitingState:
    reason: WaitingReason
    tickets: tuple[WaitingTicket, ...]
    message: str = ""
    since_dispatch_id: str | None = None

    @property
    def ticket_ids(self) -> list[str]:
        return [t.ticket_id for t in self.tickets]

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "ticket_ids": self.ticket_ids,
            "tickets": [t.to_json() for t in self.tickets],
            "message": self.message,
            "since_dispatch_id": self.since_dispatch_id,
        }

    @staticmethod
    def from_json(d: dict[str, Any] | None) -> WaitingState | None:
        if not d:
            return None
        return WaitingState(
            reason=d.get("reason", "tool_permission"),
            tickets=tuple(WaitingTicket.from_json(t) for t in d.get("tickets", ())),
            message=d.get("message", ""),
            since_dispatch_id=d.get("since_dispatch_id"),
        )


@dataclass(slots=True, kw_only=True)
class RunRecord:
    """One run of an agent on a thread. ``status`` is the run lifecycle; ``display_status`` the CLI's view.

    The identity fields (run, thread, parent run, parent thread, parent tool call, origin) say where the run comes
    from: a delegate's run names the run, thread and tool call of its parent.
    """

    run_id: str
    thread_id: str
    agent_id: str
    status: RunStatus = "created"
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None
    session_id: str | None = None
    origin: str = "user"  # user | acp | mcp | cli | delegate | internal
    cwd: str | None = None  # the working directory its tools ran in: a resume elsewhere runs them there again
    steps: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    input_message_ids: list[str] = field(default_factory=list)
    state: PersistedState | None = None  # run-scoped export
    waiting: WaitingState | None = None
    termination: TerminationReason | None = None
    status_reason: str | None = None
    response: str | None = None
    error: str | None = None
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)

    def identity(self) -> RunIdentity:
        """The run's ids and lineage, as hooks and tools read them (a frozen view: they cannot change the record)."""
        return RunIdentity(
            run_id=self.run_id,
            thread_id=self.thread_id,
            agent_id=self.agent_id,
            origin=self.origin,
            parent_run_id=self.parent_run_id,
            parent_thread_id=self.parent_thread_id,
            parent_tool_call_id=self.parent_tool_call_id,
            session_id=self.session_id,
        )

    @property
    def display_status(self) -> DisplayStatus:
        if self.status in ("created", "running"):
            return "running"
        if self.status == "waiting":
            return "waiting"
        if self.error:
            return "failed"
        return self.termination.outcome if self.termination else "completed"

    def copy(self) -> RunRecord:
        return replace(self, input_message_ids=list(self.input_message_ids))

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "agent_id": self.agent_id,
            "status": self.status,
            "parent_run_id": self.parent_run_id,
            "parent_thread_id": self.parent_thread_id,
            "parent_tool_call_id": self.parent_tool_call_id,
            "session_id": self.session_id,
            "origin": self.origin,
            "cwd": self.cwd,
            "steps": self.steps,
            "usage": self.usage.to_json(),
            "input_message_ids": self.input_message_ids,
            "state": self.state.to_json() if self.state else None,
            "waiting": self.waiting.to_json() if self.waiting else None,
            "termination": self.termination.to_json() if self.termination else None,
            "status_reason": self.status_reason,
            "response": self.response,
            "error": self.error,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> RunRecord:
        return RunRecord(
            run_id=d["run_id"],
            thread_id=d["thread_id"],
            agent_id=d["agent_id"],
            status=d.get("status", "created"),
            parent_run_id=d.get("parent_run_id"),
            parent_thread_id=d.get("parent_thread_id"),
            parent_tool_call_id=d.get("parent_tool_call_id"),
            session_id=d.get("session_id"),
            origin=d.get("origin", "user"),
            cwd=d.get("cwd"),
            steps=int(d.get("steps", 0)),
            usage=TokenUsage.from_json(d.get("usage")),
            input_message_ids=list(d.get("input_message_ids") or []),
            state=PersistedState.from_json(d["state"]) if d.get("state") else None,
            waiting=WaitingState.from_json(d.get("waiting")),
            termination=TerminationReason.from_json(d["termination"]) if d.get("termination") else None,
            status_reason=d.get("status_reason"),
            response=d.get("response"),
            error=d.get("error"),
            created_at=int(d.get("created_at", 0)),
            updated_at=int(d.get("updated_at", 0)),
        )


@dataclass(slots=True, kw_only=True)
class Checkpoint:
    """One atomic write: new messages (guarded by the thread's committed count), the run record, thread state."""

    thread_id: str
    expected_message_count: int
    messages: list[Message]
    run: RunRecord
    thread_state: PersistedState | None = None
    settle: DispatchSettle | None = None  # the run's dispatch, settled in the same write (ends and waits only)
    fence: Fence | None = None  # the claim the run holds: the write commits only while it is current (``Fenced``)
    # effect-ledger ``started`` marks of the calls about to run, in the same write as the step that made them: a
    # call never runs before the conversation holding it is stored, so its unknown outcome is visible to all
    marks: list[EffectRecord] = field(default_factory=list[EffectRecord])


@dataclass(slots=True, kw_only=True)
class LoadedThread:
    thread: ThreadRecord
    messages: list[Message]
    state: PersistedState | None
    latest_run: RunRecord | None


# what a run on a thread starts from: the thread (None: not stored yet) and its open effect-ledger entries
ThreadForRun = tuple[LoadedThread | None, list[EffectRecord]]


@dataclass(slots=True, kw_only=True)
class SessionRecord:
    """An ACP session (or an MCP agent-tool conversation): the durable link between a client and a thread."""

    session_id: str
    thread_id: str
    cwd: str
    agent_id: str | None = None
    title: str | None = None
    mode: str | None = None
    model: str | None = None
    additional_directories: list[str] = field(default_factory=list)
    mcp_servers: list[dict[str, Any]] = field(default_factory=list)
    origin: str = "acp"
    created_at: int = field(default_factory=now_ms)
    updated_at: int = field(default_factory=now_ms)
    # the client's instructions for its runs, as ACP gave them: {"mode": "append" | "override", "content": [blocks]}
    system_prompt: dict[str, Any] | None = None


PermissionBehavior = Literal["allow", "deny"]


@dataclass(slots=True, kw_only=True)
class PermissionGrant:
    """A remembered "always" answer: ``tool`` (a name or pattern) in ``workspace``, optionally for ``pattern``."""

    grant_id: str
    workspace: str
    tool: str
    behavior: PermissionBehavior
    pattern: str | None = None  # primary-argument pattern, e.g. "git *" for run_command
    created_at: int = field(default_factory=now_ms)
    expires_at: int | None = None

    def active(self, now: int) -> bool:
        return self.expires_at is None or self.expires_at > now


@runtime_checkable
class ThreadStore(Protocol):
    async def load_thread(self, thread_id: str) -> LoadedThread | None:
        """Thread, all messages in order, thread-scoped state and latest run; ``None`` for an unknown thread."""
        ...

    async def load_messages(self, thread_id: str, *, offset: int = 0, limit: int | None = None) -> list[Message]: ...

    async def checkpoint(self, cp: Checkpoint) -> None:
        """Atomically append ``cp.messages`` (iff the thread holds ``expected_message_count``), upsert the run,
        replace the thread state when given. Raises ``VersionConflict`` when the count does not match."""
        ...

    async def save_thread(self, thread: ThreadRecord) -> None:
        """Upsert the record's fields; ``message_count`` is ignored (only checkpoints change it)."""
        ...

    async def load_thread_state(self, thread_id: str) -> PersistedState | None: ...

    async def save_thread_state(self, thread_id: str, state: PersistedState) -> None: ...

    async def list_threads(self, *, limit: int = 100, cursor: str | None = None) -> Page[ThreadRecord]:
        """Most recently updated first. Cursors are opaque; one this listing did not return raises ``ValueError``."""
        ...

    async def delete_thread(self, thread_id: str) -> None:
        """Delete the thread with its messages, runs and state (idempotent)."""
        ...


@runtime_checkable
class RunStore(Protocol):
    async def load_run(self, run_id: str) -> RunRecord | None: ...

    async def save_run(self, run: RunRecord) -> None:
        """Upsert the run (creating its thread, empty, if missing)."""
        ...

    async def latest_run(self, thread_id: str) -> RunRecord | None: ...

    async def list_runs(
        self,
        *,
        thread_id: str | None = None,
        statuses: list[RunStatus] | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[RunRecord]:
        """Newest first (by ``updated_at``, then id)."""
        ...


@runtime_checkable
class SessionStore(Protocol):
    async def save_session(self, session: SessionRecord) -> None: ...

    async def load_session(self, session_id: str) -> SessionRecord | None: ...

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int = 100, cursor: str | None = None
    ) -> Page[SessionRecord]:
        """Most recently updated first."""
        ...

    async def delete_session(self, session_id: str) -> None: ...


@runtime_checkable
class PermissionStore(Protocol):
    async def add_grant(self, grant: PermissionGrant) -> None:
        """Store the grant (a grant with the same id is replaced)."""
        ...

    async def list_grants(self, workspace: str, *, now: int | None = None) -> list[PermissionGrant]:
        """Grants of ``workspace`` that have not expired at ``now``, oldest first."""
        ...

    async def delete_grant(self, grant_id: str) -> None: ...


@runtime_checkable
class Store(ThreadStore, RunStore, ProfileStore, SessionStore, PermissionStore, Protocol):
    """A whole backend. Open it with ``stores.open_store(url)`` and close it with ``aclose()``."""

    url: str

    # whether what it holds outlives this process: a run on a durable store keeps an effect ledger and writes its
    # step ends behind its loop; in memory no crash survives, so neither buys anything
    durable: bool

    @property
    def mailbox(self) -> MailboxStore:
        """The store's mailbox and effect ledger (``contract/mailbox.py``), in the same database."""
        ...

    async def load_thread_for_run(self, thread_id: str) -> ThreadForRun:
        """What a run on the thread starts from: ``load_thread`` and the ledger's ``open_effects``, read together
        where the store can (one database round trip instead of two). The effects may exist without the thread: a
        first step's call is marked before that step is checkpointed. The effects are read first: one settled
        meanwhile has its result among the messages read after."""
        effects = await self.mailbox.open_effects(thread_id)
        return await self.load_thread(thread_id), effects

    async def claim_for_run(
        self, dispatch: RunDispatch, consumer: str, lease_ms: int, now: int, *, queue_if_busy: bool = True
    ) -> tuple[RunDispatch | None, ThreadForRun | None]:
        """``mailbox.enqueue_and_claim``, and when the row is claimed for ``consumer``, ``load_thread_for_run`` of
        its thread, read in the claim's own transaction where the store can: the run that follows starts from it
        without reading again (the claim keeps every other run off the thread)."""
        row = await self.mailbox.enqueue_and_claim(dispatch, consumer, lease_ms, now, queue_if_busy=queue_if_busy)
        if row is None or not row.claimed_for(consumer):
            return row, None
        return row, await self.load_thread_for_run(row.thread_id)

    async def aclose(self) -> None: ...
