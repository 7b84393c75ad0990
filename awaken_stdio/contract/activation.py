"""What starts a run and what a run returns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import UsageError
from awaken_stdio.contract.events import AgentEvent
from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import DispatchSettle
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import DisplayStatus, ThreadForRun, WaitingTicket
from awaken_stdio.contract.suspension import Decisions
from awaken_stdio.contract.tools import Tool, ToolDescriptor

__all__ = ["AgentRunResult", "EventSink", "RunActivation", "SystemPrompt"]

EventSink = Callable[[AgentEvent], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemPrompt:
    """A client's instructions for a session's runs (ACP ``systemPrompt``): ``append`` puts them after the agent's
    own system prompt, ``override`` uses them instead of it."""

    mode: Literal["append", "override"]
    text: str

    def apply(self, own: str) -> str:
        """The system prompt a run of an agent whose own is ``own`` sends."""
        if self.mode == "override":
            return self.text
        return f"{own}\n\n{self.text}" if own else self.text

    @staticmethod
    def of(stored: Mapping[str, Any] | None) -> SystemPrompt | None:
        """From the ACP form a session record keeps (``{"mode", "content": [text blocks]}``); ``None`` without."""
        if not stored:
            return None
        texts = [b.get("text", "") for b in stored.get("content") or () if isinstance(b, dict)]
        mode = "override" if stored.get("mode") == "override" else "append"
        return SystemPrompt(mode=mode, text="\n\n".join(t for t in texts if isinstance(t, str)))


@dataclass(slots=True, kw_only=True)
class RunActivation:
    """One request to run an agent on a thread, in ``env`` (where it runs: see ``contract/environment.py``).

    ``decisions`` resume suspended calls of the thread (by call id or suspension id); with
    ``wait_for_decisions`` a run that suspends stays alive in-process and takes further decisions through
    :meth:`AgentRuntime.send_decisions`, otherwise it returns ``suspended`` and a later activation resumes it.
    """

    messages: list[Message] = field(default_factory=list)
    thread_id: str | None = None
    agent_id: str | None = None
    decisions: Decisions = field(default_factory=list)
    run_id: str | None = None
    run_id_is_new: bool = False  # ``run_id`` was made just now (``new_id``): no stored run can have it
    continue_run_id: str | None = None
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None
    session_id: str | None = None
    origin: str = "user"
    env: RunEnvironment = field(default_factory=RunEnvironment)
    frontend_tools: list[ToolDescriptor] = field(default_factory=list)
    tools: list[Tool] = field(default_factory=list)  # offered for this run only (e.g. an ACP session's MCP servers)
    overrides: dict[str, Any] = field(default_factory=dict)
    wait_for_decisions: bool = False
    settle: DispatchSettle | None = None  # the dispatch executing it, settled with the checkpoint that ends it
    loaded: ThreadForRun | None = None  # the thread as the claim of that dispatch read it: not read again
    system_prompt: SystemPrompt | None = None  # the session client's instructions, composed with the agent's own

    def validate(self) -> None:
        for m in self.messages:
            if m.role not in ("user", "system", "assistant", "tool"):
                raise UsageError(f"invalid message role: {m.role}")
        if self.continue_run_id and not self.thread_id:
            raise UsageError("continuing a run needs its thread id")

    @property
    def has_visible_user_message(self) -> bool:
        return any(m.role == "user" and not m.internal for m in self.messages)


@dataclass(slots=True, kw_only=True)
class AgentRunResult:
    """How a run ended. ``status`` is ``completed`` only for a natural end; a stopped, blocked or erroneous run is
    ``failed`` with ``status_reason`` saying why (``stopped: max_rounds``, ``blocked: <message>``, a fatal tool's
    ``<tool>: <message>``)."""

    run_id: str
    thread_id: str
    agent_id: str
    response: str
    termination: TerminationReason
    steps: int
    usage: TokenUsage = field(default_factory=TokenUsage)
    status: DisplayStatus = "completed"
    pending: list[WaitingTicket] = field(default_factory=list)
    status_reason: str | None = None
