"""``session/request_permission``: asking the person about a suspended tool call, and reading the answer.

The request shows what approving would do (the call's preview: ACP ``diff`` content for edits, the command and where
it runs), and says so when the call is asked again because a crash left its earlier attempt's outcome unknown. The
answer becomes a runtime decision (``ToolCallResume``); remembering "always" is the permission plugin's job
(its ``on_decision`` hook sees the policy in the decision), so nothing here stores anything. A ``cancelled``
outcome is ``None``: the caller cancels the turn. An error answer (an editor without the dialog answers -32601) or
one that is not a valid choice raises :class:`Unanswered`: nobody decided, so the run must stay waiting.

A call whose earlier attempt's outcome is unknown (a crash interrupted it) is not a plain allow/reject question:
the person says whether it runs again or is recorded as already done, or skips it.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from awaken_stdio.contract.preview import ToolPreview
from awaken_stdio.contract.stores import WaitingTicket
from awaken_stdio.contract.suspension import ToolCallResume, bind
from awaken_stdio.contract.tools import ToolDescriptor
from awaken_stdio.protocols.acp.encoder import preview_fields, tool_call
from awaken_stdio.protocols.jsonrpc import JsonRpcError, JsonRpcPeer

__all__ = ["Question", "Unanswered", "ask_permission", "permission_options"]

_COMMAND_TOOL = "run_command"
_UNKNOWN_TITLE = " (run again? the earlier attempt's outcome is unknown)"
_UNKNOWN_TEXT = "The earlier attempt was interrupted; its outcome is unknown."
_REJECTED = "rejected by the user"


class Unanswered(Exception):
    """The editor could not put the question to its person: it answered with an error, or with no valid choice."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One suspended call to ask about: ``unknown`` is the note of a call asked again after a crash interrupted it."""

    call_id: str
    tool_name: str
    arguments: Any
    unknown: str | None = None
    preview: ToolPreview | None = None

    @staticmethod
    def of(ticket: WaitingTicket, preview: ToolPreview | None = None, *, unknown: bool = False) -> Question:
        """A stored pending call; ``preview`` (worked out again now) replaces the one stored when it was suspended.
        ``unknown``: the effect ledger says its outcome is unknown although its ticket does not say so yet (the
        process that ran it died, or was cut off, before any process asked again)."""
        note = ticket.message if ticket.outcome_unknown else _UNKNOWN_TEXT if unknown else None
        return Question(
            call_id=ticket.tool_call_id,
            tool_name=ticket.tool_name,
            arguments=ticket.arguments,
            unknown=note,
            preview=preview or ticket.preview,
        )

    def tool_call(self, descriptor: ToolDescriptor | None) -> dict[str, Any]:
        """The ``toolCall`` of the request: what approving would do, and whether it may be a second time."""
        call = tool_call(self.call_id, self.tool_name, self.arguments, descriptor)
        del call["sessionUpdate"]
        fields = preview_fields(self.preview) if self.preview is not None else {"content": []}
        if self.unknown is not None:
            call["title"] += _UNKNOWN_TITLE
            text = {"type": "content", "content": {"type": "text", "text": self.unknown or _UNKNOWN_TEXT}}
            fields["content"].insert(0, text)
        if fields["content"] or "locations" in fields:
            call.update(fields)
        return call


def _program(args: Any) -> str | None:
    command = args.get("command") if isinstance(args, dict) else None
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return words[0] if words else None


def permission_options(tool_name: str, args: Any, *, unknown: bool = False) -> list[dict[str, str]]:
    """The four choices; for commands the "always" ones name the program they remember (``git *``).

    An ``unknown`` call (its earlier attempt's outcome is unknown) gets three: run it again, record it as done, skip
    it. No "always" there: remembering an answer to "did it already run?" would answer it for calls nobody saw.
    """
    if unknown:
        return [
            {"optionId": "rerun", "name": "Run it again", "kind": "allow_once"},
            {"optionId": "done", "name": "It already ran: record as done", "kind": "allow_once"},
            {"optionId": "reject_once", "name": "Skip it", "kind": "reject_once"},
        ]
    scope = "this tool"
    if tool_name == _COMMAND_TOOL and (program := _program(args)):
        scope = f"`{program}` commands"
    return [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow_always", "name": f"Always allow {scope}", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": f"Always reject {scope}", "kind": "reject_always"},
    ]


def _decision(answer: Any, options: list[dict[str, str]]) -> ToolCallResume | None:
    """The decision an answer chose among ``options``; ``None`` when the person cancelled."""
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if isinstance(outcome, dict) and outcome.get("outcome") == "cancelled":
        return None
    chosen = outcome.get("optionId") if isinstance(outcome, dict) and outcome.get("outcome") == "selected" else None
    if chosen not in {o["optionId"] for o in options}:
        raise Unanswered(f"its answer {str(answer)[:200]!r} chose none of the options offered")
    match chosen:
        case "allow_once":
            return ToolCallResume.approve()
        case "allow_always":
            return ToolCallResume.approve(always=True)
        case "rerun" | "done":
            return ToolCallResume.approve(unknown=chosen)
        case "reject_always":
            return ToolCallResume.reject(_REJECTED, always=True)
        case _:
            return ToolCallResume.reject(_REJECTED)


async def ask_permission(
    peer: JsonRpcPeer,
    session_id: str,
    question: Question,
    descriptor: ToolDescriptor | None,
    meta: dict[str, str] | None = None,
) -> ToolCallResume | None:
    """Ask the client; the decision, or ``None`` when the person cancelled (the turn is then cancelled). ``meta``:
    the trace fields of the run that asks, sent as the request's ``_meta``.

    Raises :class:`Unanswered` when the editor answered with an error or with no valid choice."""
    options = permission_options(question.tool_name, question.arguments, unknown=question.unknown is not None)
    params: dict[str, Any] = {"sessionId": session_id, "toolCall": question.tool_call(descriptor), "options": options}
    if meta:
        params["_meta"] = meta
    try:
        answer = await peer.request(
            "session/request_permission",
            params,
            cancel_method="$/cancel_request",  # a question withdrawn (decided elsewhere) is withdrawn in the editor too
        )
    except JsonRpcError as exc:
        raise Unanswered(f"it answered error {exc.code}: {exc.message}") from exc
    decision = _decision(answer, options)
    return bind(decision, question.preview) if decision is not None else None  # approved on what was shown
