"""Human-in-the-loop vocabulary: why a call waits, and the decision that ends the wait."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.preview import SHOWN, ToolPreview

__all__ = [
    "OUTCOME_UNKNOWN_ACTION",
    "PERMISSION_ACTION",
    "Decisions",
    "PendingToolCall",
    "ResumeAction",
    "ResumeMode",
    "SuspendTicket",
    "Suspension",
    "ToolCallResume",
    "UnknownChoice",
    "WaitingReason",
    "bind",
    "bound_digest",
    "waiting_reason_for",
]

PERMISSION_ACTION = "tool:PermissionConfirm"
# Asked again because an earlier attempt was interrupted by a crash: whether it had its effect is unknown.
OUTCOME_UNKNOWN_ACTION = "tool:OutcomeUnknown"

ResumeMode = Literal["replay_tool_call", "use_decision_as_tool_result", "pass_decision_to_tool"]
ResumeAction = Literal["resume", "cancel"]
# What a person chose for a call whose earlier attempt's outcome is unknown (its start was recorded, its end was
# not): run it again, or record it as done without running it. A ``resume`` without a choice never runs such a call.
UnknownChoice = Literal["rerun", "done"]
WaitingReason = Literal[
    "tool_permission", "user_input", "background_tasks", "rate_limit", "manual_pause", "external_event"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Suspension:
    """What a person is asked: ``action`` says what kind of question (``tool:PermissionConfirm``, ``tool:<name>``)."""

    id: str
    action: str
    message: str = ""
    parameters: Any = None
    response_schema: dict[str, Any] | None = None
    preview: ToolPreview | None = None  # what the call would do if approved, worked out before asking


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingToolCall:
    id: str
    name: str
    arguments: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class SuspendTicket:
    suspension: Suspension
    pending: PendingToolCall
    resume_mode: ResumeMode = "replay_tool_call"

    def to_json(self) -> dict[str, Any]:
        s = self.suspension
        return {
            "suspension": {
                "id": s.id,
                "action": s.action,
                "message": s.message,
                "parameters": s.parameters,
                **({"response_schema": s.response_schema} if s.response_schema is not None else {}),
                **({"preview": s.preview.to_json()} if s.preview is not None else {}),
            },
            "pending": {"id": self.pending.id, "name": self.pending.name, "arguments": self.pending.arguments},
            "resume_mode": self.resume_mode,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> SuspendTicket:
        s, p = d["suspension"], d["pending"]
        return SuspendTicket(
            suspension=Suspension(
                id=s["id"],
                action=s["action"],
                message=s.get("message", ""),
                parameters=s.get("parameters"),
                response_schema=s.get("response_schema"),
                preview=ToolPreview.from_json(s["preview"]) if s.get("preview") else None,
            ),
            pending=PendingToolCall(id=p["id"], name=p["name"], arguments=p.get("arguments")),
            resume_mode=d.get("resume_mode", "replay_tool_call"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallResume:
    """A decision for one suspended call.

    ``result`` carries the answer: for permissions ``{"approved": bool, "policy": "allow_once"|...}``; for
    frontend tools the value the tool returns. ``decision_id`` makes delivery idempotent. ``unknown``: the
    person's choice for a call whose earlier attempt's outcome is unknown (see :data:`UnknownChoice`); a resume
    without it is refused for such a call, whichever surface sent it.
    """

    action: ResumeAction
    result: Any = None
    reason: str | None = None
    decision_id: str = field(default_factory=new_id)
    updated_at: int = field(default_factory=now_ms)
    unknown: UnknownChoice | None = None

    @staticmethod
    def approve(result: Any = None, *, always: bool = False, unknown: UnknownChoice | None = None) -> ToolCallResume:
        return ToolCallResume(
            action="resume",
            result=result
            if result is not None
            else {"approved": True, "policy": "allow_always" if always else "allow_once"},
            unknown=unknown,
        )

    @staticmethod
    def reject(reason: str | None = None, *, always: bool = False) -> ToolCallResume:
        return ToolCallResume(
            action="cancel",
            result={
                "approved": False,
                "policy": "reject_always" if always else "reject_once",
                **({"reason": reason} if reason else {}),
            },
            reason=reason,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "action": self.action,
            "result": self.result,
            "reason": self.reason,
            "decision_id": self.decision_id,
            "updated_at": self.updated_at,
            **({"unknown": self.unknown} if self.unknown is not None else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ToolCallResume:
        return ToolCallResume(
            action=d["action"],
            result=d.get("result"),
            reason=d.get("reason"),
            decision_id=d.get("decision_id") or new_id(),
            updated_at=int(d.get("updated_at") or now_ms()),
            unknown=d["unknown"] if d.get("unknown") in ("rerun", "done") else None,
        )


Decisions = list[tuple[str, ToolCallResume]]  # decisions for a run: (ticket id or tool call id, decision) pairs

_WAITING: dict[str, WaitingReason] = {
    "awaiting_tasks": "background_tasks",
    "input_required": "user_input",
    "user_input_required": "user_input",
    "auth_required": "tool_permission",
    "suspended": "tool_permission",
    "rate_limit": "rate_limit",
    "manual_pause": "manual_pause",
}


def waiting_reason_for(pause_reason: str | None) -> WaitingReason:
    return _WAITING.get(pause_reason or "", "external_event")


def bind(decision: ToolCallResume, preview: ToolPreview | None) -> ToolCallResume:
    """``decision`` bound to ``preview``, the one the person saw, when it approves and is not bound yet."""
    answer = decision.result
    if preview is None or decision.action != "resume" or not isinstance(answer, dict) or SHOWN in answer:
        return decision
    return replace(decision, result={**answer, SHOWN: preview.digest()})


def bound_digest(decision: ToolCallResume | None) -> str | None:
    """The digest of the preview an approval was given on (``None``: not bound to one)."""
    answer = decision.result if decision is not None and decision.action == "resume" else None
    shown = answer.get(SHOWN) if isinstance(answer, dict) else None
    return shown if isinstance(shown, str) else None
