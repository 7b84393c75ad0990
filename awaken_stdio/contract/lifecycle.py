"""Run and tool-call status machines and termination reasons.

The legal transitions live here, next to the statuses, because the state engine, the stores and the protocol
adapters all ask the same question: may this record move from A to B?
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "RunOutcome",
    "RunStatus",
    "TerminationReason",
    "ToolCallStatus",
    "run_transition_allowed",
    "tool_call_transition_allowed",
]

RunStatus = Literal["created", "running", "waiting", "done"]
RunOutcome = Literal["running", "waiting", "completed", "failed", "cancelled"]
ToolCallStatus = Literal["new", "running", "suspended", "resuming", "succeeded", "failed", "cancelled"]

_RUN_NEXT: dict[str, frozenset[str]] = {
    "created": frozenset({"created", "running", "done"}),
    "running": frozenset({"running", "waiting", "done"}),
    "waiting": frozenset({"waiting", "running", "done"}),
    "done": frozenset({"done"}),
}
_TOOL_TERMINAL = frozenset({"succeeded", "failed", "cancelled"})
_TOOL_NEXT: dict[str, frozenset[str]] = {
    "new": frozenset({"new", "running", "suspended", "resuming", "succeeded", "failed", "cancelled"}),
    "running": frozenset({"running", "suspended", "succeeded", "failed", "cancelled"}),
    "suspended": frozenset({"suspended", "resuming", "cancelled"}),
    "resuming": frozenset({"resuming", "running", "suspended", "succeeded", "failed", "cancelled"}),
}


def run_transition_allowed(current: str, target: str) -> bool:
    return target in _RUN_NEXT.get(current, frozenset())


def tool_call_transition_allowed(current: str, target: str) -> bool:
    if current in _TOOL_TERMINAL:
        return target == current
    return target in _TOOL_NEXT.get(current, frozenset())


TerminationType = Literal["natural_end", "behavior_requested", "suspended", "cancelled", "blocked", "stopped", "error"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TerminationReason:
    """Why a run ended. JSON form ``{"type": ..., "value": ...}``.

    ``stopped`` carries ``{"code": ..., "detail": ...}`` (``max_rounds``, ``token_budget``, ``timeout``);
    ``blocked`` and ``error`` carry a message.
    """

    type: TerminationType
    value: Any = None

    @staticmethod
    def natural() -> TerminationReason:
        return _NATURAL

    @staticmethod
    def suspended() -> TerminationReason:
        return _SUSPENDED

    @staticmethod
    def cancelled() -> TerminationReason:
        return _CANCELLED

    @staticmethod
    def blocked(reason: str) -> TerminationReason:
        return TerminationReason(type="blocked", value=reason)

    @staticmethod
    def stopped(code: str, detail: str = "") -> TerminationReason:
        return TerminationReason(type="stopped", value={"code": code, "detail": detail})

    @staticmethod
    def error(message: str) -> TerminationReason:
        return TerminationReason(type="error", value=message)

    @property
    def run_status(self) -> RunStatus:
        return "waiting" if self.type == "suspended" else "done"

    @property
    def lifecycle_reason(self) -> str | None:
        """The ``status_reason`` of the run-lifecycle state key, spelled as the Rust runtime's ``to_run_status``:
        ``natural``, ``behavior_requested``, ``cancelled``, ``blocked:<message>``, ``stopped:<code>``, ``error``."""
        return self._reason(":", detailed_error=False)

    @property
    def done_reason(self) -> str | None:
        """The ``status_reason`` of a finished run, as the docs' in-process backend words it: ``natural``,
        ``cancelled``, ``blocked: <message>``, ``stopped: <code>``, or an error's own message."""
        return self._reason(": ", detailed_error=True)

    def _reason(self, sep: str, *, detailed_error: bool) -> str | None:
        match self.type:
            case "suspended":
                return None
            case "natural_end":
                return "natural"
            case "blocked":
                return f"blocked{sep}{self.value}"
            case "stopped":
                return f"stopped{sep}{(self.value or {}).get('code', '')}"
            case "error" if detailed_error:
                return str(self.value) if self.value else "error"
            case _:
                return self.type

    @property
    def outcome(self) -> RunOutcome:
        """What the run came to: only a natural (or plugin-requested) end is ``completed``; a stopped, blocked or
        erroneous end is ``failed`` (the docs map ``Stopped`` and ``Blocked`` to ``Failed``)."""
        match self.type:
            case "suspended":
                return "waiting"
            case "cancelled":
                return "cancelled"
            case "natural_end" | "behavior_requested":
                return "completed"
            case _:
                return "failed"

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type} if self.value is None else {"type": self.type, "value": self.value}

    @staticmethod
    def from_json(d: dict[str, Any]) -> TerminationReason:
        kind = d["type"]
        if kind == "plugin_requested":
            kind = "behavior_requested"
        return TerminationReason(type=kind, value=d.get("value"))


_NATURAL = TerminationReason(type="natural_end")
_SUSPENDED = TerminationReason(type="suspended")
_CANCELLED = TerminationReason(type="cancelled")
