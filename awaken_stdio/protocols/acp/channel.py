"""``ctx.elicit`` of a tool in an ACP session's run: the editor asks its person (``contract/channel.py``).

An editor that renders forms (``clientCapabilities.elicitation.form``) gets ACP ``elicitation/create`` in form mode,
scoped to the session and the tool call. Any other editor can still answer a single choice: a question whose schema
is one boolean or one enum field becomes a ``session/request_permission`` about the running call, one option per
value (a dismissed dialog is a cancelled question, not a cancelled turn). Anything else raises a ``ToolFailure`` naming
what the editor lacks. Log lines and progress have no better place in ACP than the runtime's own (the log; the tool
call's updates), and an editor offers tools no model to sample.
"""

from __future__ import annotations

from typing import Any

from awaken_stdio.contract.channel import Elicited, LogLevel, Sampled
from awaken_stdio.contract.errors import ToolFailure
from awaken_stdio.protocols.jsonrpc import JsonRpcError, JsonRpcPeer

__all__ = ["AcpChannel", "choices"]

_DECLINE = "decline"


def choices(schema: dict[str, Any]) -> tuple[str, list[tuple[str, Any]]] | None:
    """A schema a permission dialog can ask: one boolean or enum property. Its name and ``(label, value)`` choices."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or len(properties) != 1:
        return None
    ((name, field),) = properties.items()
    if not isinstance(field, dict):
        return None
    if field.get("type") == "boolean":
        return name, [("Yes", True), ("No", False)]
    values = field.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
        titles = field.get("enumNames")
        labels = titles if isinstance(titles, list) and len(titles) == len(values) else values
        return name, [(str(label), value) for label, value in zip(labels, values, strict=True)]
    return None


class AcpChannel:
    """The editor of one session, as seen by the tools of its runs."""

    def __init__(self, peer: JsonRpcPeer, session_id: str, *, forms: bool) -> None:
        self.peer = peer
        self.session_id = session_id
        self.forms = forms

    async def log(self, level: LogLevel, message: str) -> bool:
        return False

    async def progress(self, done: float, total: float | None, message: str | None) -> bool:
        return False

    async def elicit(self, call_id: str, message: str, schema: dict[str, Any]) -> Elicited:
        if self.forms:
            params = {"sessionId": self.session_id, "toolCallId": call_id, "mode": "form", "message": message,
                      "requestedSchema": schema}  # fmt: skip
            answer = await self._request("elicitation/create", params)
            action = answer.get("action")
            if action not in ("accept", "decline", "cancel"):
                raise ToolFailure(f"the editor answered the question with an unknown action {action!r}")
            content = answer.get("content")
            return Elicited(action=action, content=content if isinstance(content, dict) else None)
        choice = choices(schema)
        if choice is None:
            raise ToolFailure(
                "the tool asked a question this editor cannot show: it renders no forms (no elicitation capability) "
                "and the question is not a single choice"
            )
        name, options = choice
        wire = [{"optionId": f"choice{i}", "name": label, "kind": "allow_once"} for i, (label, _) in enumerate(options)]
        wire.append({"optionId": _DECLINE, "name": "Decline", "kind": "reject_once"})
        text = {"type": "content", "content": {"type": "text", "text": message}}
        call = {"toolCallId": call_id, "content": [text]}
        answer = await self._request(
            "session/request_permission", {"sessionId": self.session_id, "toolCall": call, "options": wire}
        )
        outcome = answer.get("outcome")
        if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
            return Elicited(action="cancel")
        picked = outcome.get("optionId")
        if picked == _DECLINE:
            return Elicited(action="decline")
        for i, (_, value) in enumerate(options):
            if picked == f"choice{i}":
                return Elicited(action="accept", content={name: value})
        raise ToolFailure(f"the editor answered the question with an unknown option {picked!r}")

    async def sample(self, params: dict[str, Any]) -> Sampled:
        raise ToolFailure("the tool asked the client's model (sampling), but an ACP editor offers tools no model")

    async def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            answer = await self.peer.request(method, params, cancel_method="$/cancel_request")
        except JsonRpcError as exc:
            raise ToolFailure(f"the editor did not answer {method}: {exc.message}") from None
        return answer if isinstance(answer, dict) else {}
