"""Tool vocabulary: descriptors, results, the ``Tool`` base class and the context a call runs in.

Whatever a tool does wrong (returns an error result, raises ``ToolFailure`` or any unexpected exception, gets invalid
arguments) ends as a *failed tool result the model sees*; the run goes on. Only a raised ``ToolError`` is fatal: the
runtime ends the run ``failed`` with the tool's name and message. Only the runtime decides whether a call runs,
waits or is blocked.
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import anyio

from awaken_stdio.contract.channel import PYTHON_LEVELS, Elicited, LogLevel, Sampled
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import ToolError, ToolFailure
from awaken_stdio.contract.events import ActivitySnapshot, AgentEvent, ToolCallStreamDelta
from awaken_stdio.contract.results import ToolResult, ToolStatus
from awaken_stdio.contract.state import Snapshot, StateCommand, StateKey, V

if TYPE_CHECKING:
    from awaken_stdio.contract.identity import RunIdentity
    from awaken_stdio.contract.preview import ToolPreview
    from awaken_stdio.contract.profile import ProfileAccess
    from awaken_stdio.contract.suspension import ToolCallResume

__all__ = [
    "CancelToken",
    "Tool",
    "ToolCallContext",
    "ToolDescriptor",
    "ToolKind",
    "ToolOutput",
    "ToolResult",
    "ToolStatus",
    "infer_tool_kind",
]

log = logging.getLogger(__name__)

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"]
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDescriptor:
    """What the model and the protocol clients see of a tool.

    ``parameters`` is a portable JSON Schema (root ``type: object``, no ``$ref``). ``kind`` and the hints drive
    ACP tool-call kinds, MCP annotations and the default permission (read-only tools are allowed).
    """

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: dict(EMPTY_SCHEMA))
    kind: ToolKind = "other"
    read_only: bool = False
    destructive: bool = False
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.parameters,
            "kind": self.kind,
            "read_only": self.read_only,
            "destructive": self.destructive,
        }


_KIND_HINTS: tuple[tuple[frozenset[str], ToolKind], ...] = (
    (frozenset({"delete", "remove", "rm", "unlink", "rmdir"}), "delete"),
    (frozenset({"move", "rename", "mv"}), "move"),
    (frozenset({"edit", "write", "patch", "replace", "create", "update", "append", "insert"}), "edit"),
    (frozenset({"search", "grep", "find", "glob", "query", "lookup"}), "search"),
    (frozenset({"read", "cat", "view", "open", "get", "list", "ls", "show", "stat"}), "read"),
    (frozenset({"bash", "shell", "exec", "execute", "run", "command", "terminal", "sh"}), "execute"),
    (frozenset({"fetch", "http", "url", "download", "web", "browse", "curl"}), "fetch"),
    (frozenset({"think", "plan", "reason", "reflect"}), "think"),
)
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def infer_tool_kind(name: str) -> ToolKind:
    """A best guess of a tool's kind from the words of its name (``read_file``, ``runCommand``, ``github__search``).

    For tools that do not declare a kind, e.g. an MCP server's. Whole words only: ``send_emails`` is not ``ls``.
    """
    words = [w.lower() for w in _WORD.findall(name)]
    for hints, kind in _KIND_HINTS:
        if any(w in hints for w in words):
            return kind
    return "other"


@dataclass(slots=True, kw_only=True)
class ToolOutput:
    """A result plus a state command: how a tool changes state, schedules actions or emits effects."""

    result: ToolResult
    command: StateCommand = field(default_factory=StateCommand)


class CancelToken:
    """Cooperative cancellation for code that cannot be cancelled by anyio (sync tools in worker threads)."""

    __slots__ = ("_event", "cancelled")

    def __init__(self) -> None:
        self.cancelled = False
        self._event: anyio.Event | None = None

    def cancel(self) -> None:
        self.cancelled = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        if self.cancelled:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


@dataclass(slots=True, kw_only=True)
class ToolCallContext:
    """Everything a tool call may use: identity, the state snapshot, profile access, progress, cancellation.

    ``run_identity`` names the run and its lineage (parent run, thread and tool call of a delegate). ``env`` is
    where the run runs (its directory and roots, an ACP client's ``fs/*`` and ``terminal/*``, the client to talk
    back to), so tools never reach into protocols themselves.
    """

    call_id: str
    tool_name: str
    thread_id: str
    run_id: str
    agent_id: str
    snapshot: Snapshot
    env: RunEnvironment = field(default_factory=RunEnvironment)
    resume_input: ToolCallResume | None = None
    suspension_id: str | None = None
    suspension_reason: str | None = None
    profile: ProfileAccess | None = None
    cancel: CancelToken = field(default_factory=CancelToken)
    emit: Callable[[AgentEvent], Awaitable[None]] | None = None
    run_identity: RunIdentity | None = None

    def state(self, key: StateKey[V, Any]) -> V:
        return self.snapshot.get(key)

    @property
    def cancelled(self) -> bool:
        return self.cancel.cancelled

    async def report_progress(
        self, status: Literal["pending", "running", "done", "failed", "cancelled"], message: str = "", **extra: Any
    ) -> None:
        """Tell the host how the call is going (ACP tool_call_update, MCP progress)."""
        if self.emit is not None:
            content = {"schema": "tool-call-progress.v1", "status": status, "message": message, **extra}
            await self.emit(
                ActivitySnapshot(
                    message_id=self.call_id, activity_type="tool-call-progress", content=content, replace=True
                )
            )

    async def log(self, level: LogLevel, message: str) -> None:
        """A log line for the client that called the tool (MCP ``notifications/message`` at or above the level it
        set), else for the log."""
        channel = self.env.channel
        if channel is None or not await channel.log(level, message):
            logging.getLogger("awaken_stdio.tools").log(PYTHON_LEVELS[level], "%s: %s", self.tool_name, message)

    async def progress(self, done: float, total: float | None = None, message: str = "") -> None:
        """How far the call got (``done`` of ``total``): MCP progress, or the ACP tool call's progress."""
        channel = self.env.channel
        if channel is None or not await channel.progress(done, total, message or None):
            await self.report_progress("running", message, progress=done, total=total)

    async def elicit(self, message: str, schema: dict[str, Any]) -> Elicited:
        """Ask the user for input fitting ``schema`` (a flat object of strings, numbers, booleans and enums).

        Raises ``ToolFailure`` (the call fails; a run goes on) where no one can be asked: the client cannot show the
        question, or no client is attached (a run resumed away from the client that started it).
        """
        channel = self.env.channel
        if channel is None:
            raise ToolFailure(
                f"{self.tool_name} asked the user a question (elicitation), but no client that could ask is attached "
                "to this call"
            )
        result: Elicited = await channel.elicit(self.call_id, message, schema)
        return result

    async def sample(
        self,
        messages: str | list[dict[str, Any]],
        *,
        system_prompt: str | None = None,
        max_tokens: int = 1000,
        **params: Any,
    ) -> Sampled:
        """Ask the calling client's model (MCP ``sampling/createMessage``); ``messages``: a user text, or MCP
        sampling messages (``{"role": ..., "content": {...}}``). ``params``: more of its params, e.g.
        ``temperature``, ``modelPreferences``. Raises ``ToolFailure`` where no client model can be reached."""
        channel = self.env.channel
        if channel is None:
            raise ToolFailure(
                f"{self.tool_name} asked the client's model (sampling), but no client with a model is attached to "
                "this call"
            )
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        wire = {"messages": messages, "maxTokens": max_tokens, **params}
        if system_prompt is not None:
            wire["systemPrompt"] = system_prompt
        result: Sampled = await channel.sample(wire)
        return result

    async def report_activity(self, activity_type: str, content: Any, *, replace: bool = True) -> None:
        if self.emit is not None:
            await self.emit(
                ActivitySnapshot(message_id=self.call_id, activity_type=activity_type, content=content, replace=replace)
            )

    async def stream_output(self, delta: str) -> None:
        if self.emit is not None:
            await self.emit(ToolCallStreamDelta(id=self.call_id, delta=delta))


class Tool(ABC):
    """A tool the model can call. Subclass it, or decorate a function with ``@tool``."""

    descriptor: ToolDescriptor

    def validate_args(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check (and normalise) arguments; raise ``ToolError(kind="invalid_arguments")`` when they are wrong."""
        return args

    @abstractmethod
    async def execute(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolResult | ToolOutput | Any:
        """Run the call. A plain return value becomes a success result; a raised error becomes a failed one."""

    async def preview(self, args: dict[str, Any], ctx: ToolCallContext) -> ToolPreview | None:
        """What the call would do, for a person deciding whether to approve it (the runtime asks before suspending
        a call for approval). Read, never change: the call may be rejected. ``None``: nothing worth showing; a
        raised ``ToolError`` says the call would fail as things stand."""
        return None

    @property
    def name(self) -> str:
        return self.descriptor.name


def tool_error_result(tool_name: str, exc: BaseException) -> ToolResult:
    """The failed result a raised exception turns into (for a fatal ``ToolError``, the call's recorded result)."""
    if isinstance(exc, ToolError):
        result = ToolResult.error(tool_name, str(exc), data=exc.data)
        if exc.kind == "timeout":
            result.metadata["timed_out"] = True
        return result
    if isinstance(exc, TimeoutError):
        result = ToolResult.error(tool_name, f"Timeout: {exc or 'the tool timed out'}")
        result.metadata["timed_out"] = True
        return result
    return ToolResult.error(tool_name, f"Execution failed: {exc or type(exc).__name__}")


PREVIEW_TIMEOUT_S = 10.0
"""A preview may read through the editor: a stuck editor must not hold up the question."""


async def preview_call(tool: Tool, args: Any, ctx: ToolCallContext) -> ToolPreview | None:
    """``tool.preview`` as shown before asking. A call that would fail as things stand says so (the preview's
    ``note``); a preview that breaks or hangs is left out rather than holding up the question."""
    from awaken_stdio.contract.preview import ToolPreview

    try:
        with anyio.fail_after(PREVIEW_TIMEOUT_S):
            return await tool.preview(tool.validate_args(args), ctx)
    except ToolError as exc:
        return ToolPreview(note=f"As things stand, this call would fail: {exc}")
    except Exception:
        log.warning("no preview of %s call %s", tool.name, ctx.call_id, exc_info=True)
        return None


__all__ += ["EMPTY_SCHEMA", "PREVIEW_TIMEOUT_S", "preview_call", "tool_error_result"]
