"""Asking an MCP client's user to approve a tool call, and trusting the answer.

The question is one form field, ``decision``: a single-select enum of ``allow_once | allow_always | reject_once |
reject_always`` (DESIGN section 5), asked by ``elicitation/create`` in the handshake era and by an
``InputRequiredResult`` in the 2026 era. Declining or cancelling the form rejects the call; the run goes on.

In the 2026 era the client echoes ``requestState`` back with the answers, so it is attacker input: ``StateSeal`` signs
it with HMAC-SHA256, binds it to the tool name and a digest of the arguments, and gives it an expiry. The key lives in
the store (a profile entry), not in the process: a client may retry against a new server process after a restart or
a crash and the pending run is durable, so its state must stay verifiable. Anyone who can write the store can
already approve calls directly, so keeping the key there widens nothing.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import time
from typing import TYPE_CHECKING, Any

from awaken_stdio.contract.suspension import ToolCallResume

if TYPE_CHECKING:
    from awaken_stdio.contract.preview import ToolPreview
    from awaken_stdio.contract.stores import Store

__all__ = [
    "DECISIONS",
    "UNKNOWN_DECISIONS",
    "InvalidState",
    "StateSeal",
    "approval_message",
    "can_elicit",
    "decision_from_answer",
    "elicitation_params",
    "load_seal_key",
]

DECISIONS = ("allow_once", "allow_always", "reject_once", "reject_always")
UNKNOWN_DECISIONS = ("rerun", "done", "reject_once")  # a call whose earlier attempt's outcome is unknown
_KEY_OWNER = "awaken-stdio:mcp"
_KEY_NAME = "request_state_key"
_ARGS_PREVIEW = 400
_FUTURE_SKEW_S = 60.0


def can_elicit(client_capabilities: dict[str, Any] | None) -> bool:
    """Form elicitation declared: ``elicitation: {}`` (form only, 2025-06-18) or ``elicitation: {form: {}}``."""
    cap = (client_capabilities or {}).get("elicitation")
    return isinstance(cap, dict) and (not cap or "form" in cap)


def approval_message(tool: str, arguments: Any, who: str, preview: ToolPreview | None = None) -> str:
    """The question: what approving would do (the call's preview, shortened: a diff, a command and where) when the
    tool can tell, else its arguments."""
    summary = preview.summary() if preview is not None else ""
    if summary:
        return f"{who} wants to call {tool}:\n{summary}\nAllow it?"
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > _ARGS_PREVIEW:
        text = text[: _ARGS_PREVIEW - 1] + "…"
    return f"{who} wants to call {tool} with {text}. Allow it?"


def elicitation_params(message: str, *, unknown: bool = False) -> dict[str, Any]:
    """The question's form; for a call whose earlier attempt's outcome is unknown, the choices say so (running it
    again is a choice of its own, never what a plain "allow" means)."""
    describe = (
        "its earlier attempt may have had its effect: run it again, record it as done without running it, or skip it"
        if unknown
        else "allow or reject this call; 'always' remembers the answer for this workspace"
    )
    return {
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": {
                "decision": {
                    "type": "string",
                    "title": "Decision",
                    "description": describe,
                    "enum": list(UNKNOWN_DECISIONS if unknown else DECISIONS),
                }
            },
            "required": ["decision"],
        },
    }


def decision_from_answer(answer: Any) -> ToolCallResume:
    """An ``ElicitResult`` (as JSON) as a decision; anything but an accepted allow rejects the call."""
    action = answer.get("action") if isinstance(answer, dict) else None
    if action != "accept":
        return ToolCallResume.reject(f"{action or 'no answer'}: the user did not approve the call")
    content = answer.get("content")
    choice = content.get("decision") if isinstance(content, dict) else None
    if choice in ("rerun", "done"):
        return ToolCallResume.approve(unknown=choice)
    if choice == "allow_once":
        return ToolCallResume.approve()
    if choice == "allow_always":
        return ToolCallResume.approve(always=True)
    return ToolCallResume.reject("rejected by the user", always=choice == "reject_always")


class InvalidState(ValueError):
    """A ``requestState`` that this server did not mint for this call, or one that has expired."""


class StateSeal:
    """Signs and checks ``requestState`` values: ``<payload>.<tag>``, both base64url, the payload JSON claims."""

    def __init__(self, key: bytes, ttl_s: float = 3600.0) -> None:
        self._key = key
        self._ttl_s = ttl_s

    def seal(self, tool: str, arguments: dict[str, Any] | None, state: dict[str, Any]) -> str:
        now = time.time()
        claims = {"v": 1, "iat": now, "exp": now + self._ttl_s, "t": tool, "a": _digest(arguments), "s": state}
        payload = json.dumps(claims, separators=(",", ":"), sort_keys=True).encode()
        return f"{_b64(payload)}.{_b64(self._tag(payload))}"

    def unseal(self, token: str, tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """The state sealed for this very call (same tool, same arguments); raises ``InvalidState`` otherwise."""
        try:
            payload_text, tag_text = token.split(".")
            payload, tag = _unb64(payload_text), _unb64(tag_text)
        except (ValueError, binascii.Error):
            raise InvalidState("malformed") from None
        if not hmac.compare_digest(tag, self._tag(payload)):
            raise InvalidState("bad signature")
        claims = json.loads(payload)
        now = time.time()
        if claims.get("v") != 1 or not isinstance(claims.get("s"), dict):
            raise InvalidState("malformed")
        if not (claims.get("iat", now + _FUTURE_SKEW_S + 1) <= now + _FUTURE_SKEW_S and now < claims.get("exp", 0)):
            raise InvalidState("expired")
        if claims.get("t") != tool or claims.get("a") != _digest(arguments):
            raise InvalidState("minted for another call")
        return claims["s"]

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()


async def load_seal_key(store: Store) -> bytes:
    """The store's signing key, created on first use; racing processes converge on the last one written."""
    entry = await store.get_profile(_KEY_OWNER, _KEY_NAME)
    if entry is None or not isinstance(entry.value, str):
        await store.set_profile(_KEY_OWNER, _KEY_NAME, os.urandom(32).hex())
        entry = await store.get_profile(_KEY_OWNER, _KEY_NAME)
    assert entry is not None
    return bytes.fromhex(entry.value)


def _digest(arguments: dict[str, Any] | None) -> str:
    text = json.dumps(arguments or {}, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=str)
    return _b64(hashlib.sha256(text.encode()).digest()[:16])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
