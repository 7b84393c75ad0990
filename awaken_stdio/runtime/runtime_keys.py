"""State keys the runtime owns: the run lifecycle and the per-call tool states.

``__runtime.tool_call_states`` is thread-scoped and persistent on purpose: it is how a suspended call (its
arguments, ticket and resume mode) survives the end of a run and a restart of the process, so a later activation
carrying a decision can resume it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from awaken_stdio.contract.ids import now_ms
from awaken_stdio.contract.lifecycle import (
    RunStatus,
    ToolCallStatus,
    run_transition_allowed,
    tool_call_transition_allowed,
)
from awaken_stdio.contract.state import StateKey
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, ResumeMode, SuspendTicket, ToolCallResume

__all__ = [
    "RUN_LIFECYCLE",
    "TOOL_CALL_STATES",
    "LifecycleUpdate",
    "RunLifecycle",
    "ToolCallState",
    "ToolCallStatesUpdate",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunLifecycle:
    run_id: str = ""
    status: RunStatus = "created"
    status_reason: str | None = None
    updated_at: int = 0
    step_count: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "status_reason": self.status_reason,
            "updated_at": self.updated_at,
            "step_count": self.step_count,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> RunLifecycle:
        return RunLifecycle(
            run_id=d["run_id"],
            status=d["status"],
            status_reason=d.get("status_reason"),
            updated_at=int(d.get("updated_at", 0)),
            step_count=int(d.get("step_count", 0)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleUpdate:
    """``start`` | ``step_completed`` | ``set_waiting`` | ``set_running`` | ``done``."""

    op: str
    run_id: str = ""
    reason: str | None = None

    @staticmethod
    def start(run_id: str) -> LifecycleUpdate:
        return LifecycleUpdate(op="start", run_id=run_id)

    @staticmethod
    def step_completed() -> LifecycleUpdate:
        return _STEP_COMPLETED

    @staticmethod
    def set_waiting(reason: str) -> LifecycleUpdate:
        return LifecycleUpdate(op="set_waiting", reason=reason)

    @staticmethod
    def set_running() -> LifecycleUpdate:
        return _SET_RUNNING

    @staticmethod
    def done(reason: str | None) -> LifecycleUpdate:
        return LifecycleUpdate(op="done", reason=reason)


_STEP_COMPLETED = LifecycleUpdate(op="step_completed")
_SET_RUNNING = LifecycleUpdate(op="set_running")


_TARGETS: dict[str, RunStatus] = {"set_waiting": "waiting", "set_running": "running", "done": "done"}


def _apply_lifecycle(value: RunLifecycle, u: LifecycleUpdate) -> RunLifecycle:
    now = now_ms()
    if u.op == "start":
        return RunLifecycle(run_id=u.run_id, status="running", status_reason=None, updated_at=now, step_count=0)
    if u.op == "step_completed":  # built, not ``replace``d: this runs every step, at a fifth of replace's cost
        return RunLifecycle(
            run_id=value.run_id,
            status=value.status,
            status_reason=value.status_reason,
            updated_at=now,
            step_count=value.step_count + 1,
        )
    target = _TARGETS[u.op]
    if not run_transition_allowed(value.status, target):
        log.warning("ignoring illegal run lifecycle transition %s -> %s (run %s)", value.status, target, value.run_id)
        return value
    return replace(value, status=target, status_reason=u.reason, updated_at=now)


RUN_LIFECYCLE: StateKey[RunLifecycle, LifecycleUpdate] = StateKey(
    "__runtime.run_lifecycle",
    default=RunLifecycle,
    apply=_apply_lifecycle,
    scope="run",
    encode=RunLifecycle.to_json,
    decode=RunLifecycle.from_json,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallState:
    call_id: str
    tool_name: str
    arguments: Any
    status: ToolCallStatus = "new"
    updated_at: int = 0
    resume_mode: ResumeMode = "replay_tool_call"
    suspension_id: str | None = None
    suspension_reason: str | None = None
    ticket: SuspendTicket | None = None
    resume_input: ToolCallResume | None = None

    @property
    def outcome_unknown(self) -> bool:
        """Asked about because an earlier attempt's outcome is unknown (``recover_effects``): never run blind."""
        return self.ticket is not None and self.ticket.suspension.action == OUTCOME_UNKNOWN_ACTION

    def to_json(self) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "tool_name": self.tool_name,
            "arguments": self.arguments,
            "status": self.status,
            "updated_at": self.updated_at,
            "resume_mode": self.resume_mode,
            "suspension_id": self.suspension_id,
            "suspension_reason": self.suspension_reason,
            "ticket": self.ticket.to_json() if self.ticket else None,
            "resume_input": self.resume_input.to_json() if self.resume_input else None,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> ToolCallState:
        return ToolCallState(
            call_id=d["call_id"],
            tool_name=d["tool_name"],
            arguments=d.get("arguments"),
            status=d.get("status", "new"),
            updated_at=int(d.get("updated_at", 0)),
            resume_mode=d.get("resume_mode", "replay_tool_call"),
            suspension_id=d.get("suspension_id"),
            suspension_reason=d.get("suspension_reason"),
            ticket=SuspendTicket.from_json(d["ticket"]) if d.get("ticket") else None,
            resume_input=ToolCallResume.from_json(d["resume_input"]) if d.get("resume_input") else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStatesUpdate:
    """``put`` one call's state (illegal transitions are ignored) or ``clear`` the map."""

    state: ToolCallState | None = None

    @staticmethod
    def put(state: ToolCallState) -> ToolCallStatesUpdate:
        return ToolCallStatesUpdate(state=state)

    @staticmethod
    def clear() -> ToolCallStatesUpdate:
        return _CLEAR_STATES


_CLEAR_STATES = ToolCallStatesUpdate(state=None)


def _apply_tool_states(value: dict[str, ToolCallState], u: ToolCallStatesUpdate) -> dict[str, ToolCallState]:
    new = u.state
    if new is None:
        return {}
    old = value.get(new.call_id)
    if old is not None and not tool_call_transition_allowed(old.status, new.status):
        log.warning("ignoring illegal tool call transition %s -> %s (call %s)", old.status, new.status, new.call_id)
        return value
    out = dict(value)
    out[new.call_id] = new
    return out


TOOL_CALL_STATES: StateKey[dict[str, ToolCallState], ToolCallStatesUpdate] = StateKey(
    "__runtime.tool_call_states",
    default=dict,
    apply=_apply_tool_states,
    merge="commutative",
    scope="thread",
    encode=lambda v: {k: s.to_json() for k, s in v.items()},
    decode=lambda d: {k: ToolCallState.from_json(s) for k, s in (d or {}).items()},
)
