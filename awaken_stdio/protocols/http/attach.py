"""Several clients on one live ACP session (ACP RFD "multi-client session attach"), across this process's
connections; stdio has one client and never comes here.

A client joins a session it did not open with ``session/attach`` ``{sessionId, role}`` (``controller``, the
default, or ``observer``): it is replayed the history (``session/load`` on its own connection) and from then on
receives every ``session/update`` the session's agent writes. A ``session/request_permission`` is asked of every
controller, the asking connection's client included, each under its own request id; the first answer is the one the
agent gets (its turn records it durably, as any answer), and every other copy is withdrawn (``$/cancel_request``)
while all members are told who decided (a ``tool_call_update`` whose ``_meta`` says ``permissionResolved``). A
question the agent withdraws itself (decided from the CLI) is withdrawn from every copy. An observer is asked
nothing, and its prompts, cancels and mode changes for the session are refused.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from awaken_stdio.protocols.http.pipe import Pipe

__all__ = ["RESOLVED_KEY", "Hub", "Member", "Role"]

log = logging.getLogger(__name__)

Role = Literal["controller", "observer"]
RESOLVED_KEY = "awaken-stdio/permissionResolved"


class Member(Protocol):
    """A client's connection as the hub sees it (``acp_connection.Member``)."""

    id: str
    client_info: dict[str, Any]  # its initialize's name and version: told to the others when it decides
    pipe: Pipe  # to its own agent

    def push(self, message: dict[str, Any], session_id: str) -> None: ...


@dataclass(eq=False, kw_only=True)
class _Question:
    """A permission request and the copies of it other controllers were asked."""

    origin: Member
    origin_id: Any
    session_id: str
    request: dict[str, Any]
    copies: dict[Member, str] = field(default_factory=dict[Any, str])


class Hub:
    """Who is on which session, and the permission questions open on them."""

    def __init__(self) -> None:
        self._members: dict[str, dict[Member, Role]] = {}
        self._questions: dict[tuple[str, str], _Question] = {}  # (connection id, request id) -> its question
        self._ids = itertools.count(1)

    def joined(self, connection: Member, session_id: str, role: Role) -> None:
        """``connection`` is on ``session_id`` now; a controller is asked the questions already open there."""
        self._members.setdefault(session_id, {})[connection] = role
        if role == "controller":
            for question in {q for q in self._questions.values() if q.session_id == session_id}:
                if connection is not question.origin and connection not in question.copies:
                    self._ask(question, connection)

    def left(self, connection: Member) -> None:
        for members in self._members.values():
            members.pop(connection, None)
        for key in [k for k in self._questions if k[0] == connection.id]:
            question = self._questions.pop(key)
            question.copies.pop(connection, None)

    def role(self, connection: Member, session_id: str) -> Role | None:
        return self._members.get(session_id, {}).get(connection)

    def members(self, session_id: str) -> list[tuple[Member, Role]]:
        return list(self._members.get(session_id, {}).items())

    def emitted(self, source: Member, message: dict[str, Any]) -> None:
        """What ``source``'s agent wrote (already on its way to ``source``'s client): shared with the others."""
        method = message.get("method")
        params = message.get("params")
        if not isinstance(params, dict):
            return
        session_id = params.get("sessionId")
        if method == "$/cancel_request":
            question = self._questions.get((source.id, str(params.get("requestId"))))
            if question is not None and question.origin is source:
                self._settle(question, winner=None, answer=None)
            return
        if not isinstance(session_id, str) or len(self._members.get(session_id, {})) < 2:
            if method == "session/request_permission" and isinstance(session_id, str):
                self._open(source, session_id, message)  # a controller who attaches later is asked too
            return
        if method == "session/update":
            for member, _ in self.members(session_id):
                if member is not source:
                    member.push(message, session_id)
        elif method == "session/request_permission" and "id" in message:
            question = self._open(source, session_id, message)
            for member, role in self.members(session_id):
                if role == "controller" and member is not source:
                    self._ask(question, member)

    def answered(self, sender: Member, message: dict[str, Any]) -> tuple[Member, dict[str, Any]]:
        """Where a client's answer goes: the first answer to a question here goes to the asking connection's agent,
        under its id. Anything else (a later answer included: its question is gone) goes to ``sender``'s own agent
        as it is, which ignores an answer to nothing it asked."""
        question = self._questions.get((sender.id, str(message.get("id"))))
        if question is None:
            return sender, message
        self._settle(question, winner=sender, answer=message)
        return question.origin, {**message, "id": question.origin_id}

    def _open(self, source: Member, session_id: str, message: dict[str, Any]) -> _Question:
        question = _Question(origin=source, origin_id=message["id"], session_id=session_id, request=message)
        self._questions[(source.id, str(message["id"]))] = question
        return question

    def _ask(self, question: _Question, member: Member) -> None:
        copy_id = f"attach-{next(self._ids)}"
        question.copies[member] = copy_id
        self._questions[(member.id, copy_id)] = question
        member.push({**question.request, "id": copy_id}, question.session_id)

    def _settle(self, question: _Question, *, winner: Member | None, answer: dict[str, Any] | None) -> None:
        """First answer in (or the agent withdrew it): every other copy is withdrawn, and everyone told who."""
        asked = [(question.origin, question.origin_id), *question.copies.items()]
        for member, request_id in asked:
            self._questions.pop((member.id, str(request_id)), None)
            if member is not winner and (member is not question.origin or winner is not None):
                member.push({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}},
                            question.session_id)  # fmt: skip
        if winner is None or answer is None:
            return
        result = answer.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        chosen = outcome.get("optionId") if isinstance(outcome, dict) else None
        call = question.request.get("params", {}).get("toolCall", {})
        resolved = {"optionId": chosen, "resolvedBy": winner.client_info}
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call.get("toolCallId"),
            "_meta": {RESOLVED_KEY: resolved},
        }
        note = {"jsonrpc": "2.0", "method": "session/update",
                "params": {"sessionId": question.session_id, "update": update}}  # fmt: skip
        log.info("permission for %s decided by %s", call.get("toolCallId"), winner.client_info.get("name"))
        for member, _ in self.members(question.session_id):
            member.push(note, question.session_id)
