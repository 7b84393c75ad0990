"""What this process holds for an open ACP session, and the session's modes and config options.

The durable part is the store's ``SessionRecord`` (cwd, mode, model, title...); a ``Session`` adds what only
lives while the client is connected: the turn lock that queues prompts, the running turn (for cancel), the
environment its runs get (the editor's file system and terminal, the permission mode) and its MCP connections. It is
small on purpose (one per idle session; 1,000 may be open).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from awaken_stdio.contract.ids import iso_ms
from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.protocols.acp.encoder import DescriptorLookup, replay
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.contract.environment import RunEnvironment
    from awaken_stdio.contract.tools import Tool
    from awaken_stdio.contract.tracing import TraceContext

__all__ = [
    "MODES",
    "THOUGHTS_OPTION",
    "Ask",
    "Session",
    "Turn",
    "config_options",
    "modes_state",
    "replayed",
    "session_info",
]

MODES: dict[str, tuple[str, str]] = {
    "default": ("Default", "Ask before edits, commands and MCP tools (the agent's permission rules)"),
    "accept_edits": ("Accept edits", "File edits run without asking; commands still ask"),
    "plan": ("Plan", "Only read-only tools: look around and plan, change nothing"),
    "bypass": ("Bypass permissions", "Nothing asks (rules that deny still deny)"),
}
THOUGHTS_OPTION = "show_thoughts"


@dataclass(slots=True, eq=False, kw_only=True)
class Ask:
    """An open question to the person about a waiting run's calls. Withdrawn (its permission requests cancelled)
    when the run moves on without it: a decision from another surface, or the run ending elsewhere."""

    run_id: str
    call_ids: list[str]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    answered: bool = False
    note: str | None = None  # why it was withdrawn, told in each call's tool_call_update
    failed: bool = False  # the calls will not run (the run ended elsewhere)

    @property
    def withdrawn(self) -> bool:
        return self.scope.cancel_called and not self.answered

    def withdraw(self, note: str | None = None, *, failed: bool = False) -> None:
        if not self.answered and not self.scope.cancel_called:
            self.note, self.failed = note, failed
            self.scope.cancel()


@dataclass(slots=True, eq=False, kw_only=True)
class Turn:
    """A prompt being answered: ``cancelled`` once the client cancelled it; ``scope`` covers the part before the
    run starts (re-offered approvals), which ``AgentRuntime.cancel`` cannot reach; ``tasks`` holds the questions
    asked while its run waits (``ask``, the open one)."""

    cancelled: bool = False
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    run_id: str | None = None  # the run this prompt started (through the mailbox), for cancelling it anywhere
    tasks: anyio.abc.TaskGroup | None = None
    ask: Ask | None = None
    to_ask: tuple[str, list[Any]] | None = None  # a suspended run's calls, asked once the mailbox holds it waiting
    answered: bool = False  # its prompt was answered (cancelled) before it ended: nothing more goes to the client
    message_id: str | None = None  # the id its prompt's message is stored with, when the client was told one


@dataclass(slots=True, eq=False, kw_only=True)
class Session:
    record: SessionRecord
    agent_id: str  # the runtime agent its runs use (the configured agent, or its copy on another model)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    turn: Turn | None = None
    cancel_epoch: int = 0  # bumped by every cancel, so prompts queued before it give up too
    env: RunEnvironment | None = None  # what its runs get from the editor, built at the first prompt
    trace: TraceContext | None = None  # the client's trace context of its latest prompt, parenting that run
    show_thoughts: bool = True
    mcp_scope: anyio.CancelScope | None = None
    mcp_status: list[dict[str, Any]] = field(default_factory=list)
    mcp_tools: list[Tool] = field(default_factory=list)  # its MCP servers' tools, offered to its runs only
    problems_told: int = 0  # how many of the app's tool loading problems (``App.loading``) it was told

    @property
    def id(self) -> str:
        return self.record.session_id

    @property
    def mode(self) -> str:
        return self.record.mode or "default"


def modes_state(mode: str) -> dict[str, Any]:
    return {
        "currentModeId": mode,
        "availableModes": [{"id": k, "name": n, "description": d} for k, (n, d) in MODES.items()],
    }


def config_options(session: Session, models: list[str], *, boolean: bool) -> list[dict[str, Any]]:
    """The complete list, every time (ACP-CONFIG-002); the boolean one only for clients that render it (-003)."""
    options: list[dict[str, Any]] = [
        {
            "id": "mode",
            "name": "Mode",
            "category": "mode",
            "type": "select",
            "currentValue": session.mode,
            "options": [{"value": k, "name": n, "description": d} for k, (n, d) in MODES.items()],
        },
        {
            "id": "model",
            "name": "Model",
            "category": "model",
            "type": "select",
            "currentValue": session.record.model or models[0],
            "options": [{"value": m, "name": m} for m in models],
        },
    ]
    if boolean:
        options.append(
            {
                "id": THOUGHTS_OPTION,
                "name": "Show thinking",
                "description": "Stream the model's reasoning as thought chunks",
                "type": "boolean",
                "currentValue": session.show_thoughts,
            }
        )
    return options


def check_choice(value: Any, choices: list[str] | dict[str, Any], what: str) -> str:
    if not isinstance(value, str) or value not in choices:
        raise JsonRpcError(INVALID_PARAMS, f"unknown {what} {value!r}; expected one of {', '.join(choices)}")
    return value


def session_info(record: SessionRecord) -> dict[str, Any]:
    info: dict[str, Any] = {"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": iso_ms(record.updated_at)}
    if record.title:
        info["title"] = record.title
    if record.additional_directories:
        info["additionalDirectories"] = list(record.additional_directories)
    return info


_OPEN_RUNS = 100  # a thread has one active run at a time; more waiting ones than this are not worth a page


async def replayed(app: App, record: SessionRecord, lookup: DescriptorLookup) -> Iterator[dict[str, Any]]:
    """The updates that replay the session's conversation (``session/load``), each tool call with the status it had
    live: the thread's runs still open tell a call waiting for a decision from one its run left behind."""
    messages = await app.sessions.history(record)
    runs = await app.sessions.runs(record, statuses=["created", "running", "waiting"], limit=_OPEN_RUNS)
    return replay(messages, lookup, {r.run_id for r in runs.items})
