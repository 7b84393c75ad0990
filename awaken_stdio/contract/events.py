"""The event stream of a run.

Every event is a frozen dataclass with an ``event_type`` tag; ``to_json`` gives the wire form
(``{"event_type": "text_delta", "delta": "..."}``). Order invariants: the first event of a run is ``run_start``,
the last is ``run_finish`` (or ``error`` for an infrastructure failure), and ``step_start``/``step_end`` are strictly
paired and never nested.
"""

from __future__ import annotations

from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar, Literal

from awaken_stdio.contract.inference import TokenUsage
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.results import ToolResult
from awaken_stdio.contract.state import PersistedState

__all__ = [
    "ActivitySnapshot",
    "AgentEvent",
    "ErrorEvent",
    "InferenceComplete",
    "ReasoningDelta",
    "RunFinish",
    "RunResult",
    "RunStart",
    "StateSnapshot",
    "StepEnd",
    "StepStart",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallDone",
    "ToolCallReady",
    "ToolCallResumed",
    "ToolCallStart",
    "ToolCallStreamDelta",
    "event_to_json",
]

ToolOutcome = Literal["succeeded", "failed", "suspended"]


def _jsonable(value: Any) -> Any:
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return to_json()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


class _Event:
    __slots__ = ()
    event_type: ClassVar[str]
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every event is a dataclass (for ``fields``)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"event_type": self.event_type}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                out[f.name] = _jsonable(value)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart(_Event):
    event_type: ClassVar[str] = "run_start"
    thread_id: str
    run_id: str
    agent_id: str
    parent_run_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    response: str
    status: str
    status_reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"response": self.response, "status": self.status}
        if self.status_reason is not None:
            out["status_reason"] = self.status_reason
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinish(_Event):
    event_type: ClassVar[str] = "run_finish"
    thread_id: str
    run_id: str
    termination: TerminationReason
    result: RunResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(_Event):
    event_type: ClassVar[str] = "text_delta"
    delta: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta(_Event):
    event_type: ClassVar[str] = "reasoning_delta"
    delta: str
    message_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStart(_Event):
    event_type: ClassVar[str] = "tool_call_start"
    id: str
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta(_Event):
    event_type: ClassVar[str] = "tool_call_delta"
    id: str
    args_delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallReady(_Event):
    event_type: ClassVar[str] = "tool_call_ready"
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDone(_Event):
    event_type: ClassVar[str] = "tool_call_done"
    id: str
    message_id: str
    result: ToolResult
    outcome: ToolOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStreamDelta(_Event):
    event_type: ClassVar[str] = "tool_call_stream_delta"
    id: str
    delta: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResumed(_Event):
    """A suspended call settled by its decision. ``result`` is the payload the decision produced; ``tool_result``, when
    the tool ran, is its whole result, so a surface shows an approved call exactly as an allowed one."""

    event_type: ClassVar[str] = "tool_call_resumed"
    target_id: str
    result: Any
    outcome: ToolOutcome = "succeeded"
    tool_result: ToolResult | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivitySnapshot(_Event):
    event_type: ClassVar[str] = "activity_snapshot"
    message_id: str
    activity_type: str
    content: Any
    replace: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStart(_Event):
    event_type: ClassVar[str] = "step_start"
    message_id: str
    step: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEnd(_Event):
    event_type: ClassVar[str] = "step_end"
    step: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class InferenceComplete(_Event):
    event_type: ClassVar[str] = "inference_complete"
    model: str
    usage: TokenUsage | None = None
    duration_ms: int = 0
    stop_reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSnapshot(_Event):
    event_type: ClassVar[str] = "state_snapshot"
    snapshot: PersistedState

    def to_json(self) -> dict[str, Any]:
        return {"event_type": self.event_type, "snapshot": self.snapshot.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorEvent(_Event):
    event_type: ClassVar[str] = "error"
    message: str
    code: str | None = None


AgentEvent = (
    RunStart
    | RunFinish
    | TextDelta
    | ReasoningDelta
    | ToolCallStart
    | ToolCallDelta
    | ToolCallReady
    | ToolCallDone
    | ToolCallStreamDelta
    | ToolCallResumed
    | ActivitySnapshot
    | StepStart
    | StepEnd
    | InferenceComplete
    | StateSnapshot
    | ErrorEvent
)


def event_to_json(event: AgentEvent) -> dict[str, Any]:
    return event.to_json()
