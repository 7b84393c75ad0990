"""A v1 ``session/request_permission`` as v2's: a ``title`` and ``description`` of its own, and a ``subject``.

The v1 machinery asks with a ``toolCall`` whose title and content carry the prompt's copy (what approving would do,
and the note of a call asked again after a crash left its outcome unknown). In v2 that copy goes to the request's
``title`` and ``description``, so asking never patches the displayed tool call; the subject is a ``command`` for a
command (what would run, and where: the session's working directory) and the ``tool_call`` otherwise, whose patch
keeps only what the call is (its kind, input, diffs and locations). The options and the answer are v1's.
"""

from __future__ import annotations

from typing import Any

from awaken_stdio.protocols.acp.v2.updates import tool_call_content

__all__ = ["permission_request"]

_RERUN = "rerun"  # the option of a call whose earlier attempt's outcome is unknown (v1 ``permission_options``)


def permission_request(params: dict[str, Any], cwd: str) -> dict[str, Any]:
    """The v2 params of the v1 request ``params`` about a call of a session working in ``cwd``."""
    call: dict[str, Any] = params["toolCall"]
    options: list[dict[str, Any]] = params["options"]
    unknown = any(o["optionId"] == _RERUN for o in options)
    name = str(call.get("title") or call["toolCallId"]).split(" (run again?", 1)[0]
    content: list[dict[str, Any]] = call.get("content") or []
    notes = [c["content"]["text"] for c in content if c.get("type") == "content" and c["content"].get("type") == "text"]
    diffs = [tool_call_content(c) for c in content if c.get("type") == "diff"]
    request: dict[str, Any] = {
        "sessionId": params["sessionId"],
        "title": f"Run {name} again?" if unknown else f"Allow {name}?",
        "options": options,
    }
    if notes:
        request["description"] = "\n\n".join(notes)
    raw = call.get("rawInput")
    command = raw.get("command") if isinstance(raw, dict) and call.get("kind") == "execute" else None
    if isinstance(command, str):
        request["subject"] = {"type": "command", "command": command, "cwd": cwd, "toolCallId": call["toolCallId"]}
        return request
    patch = {k: call[k] for k in ("toolCallId", "kind", "rawInput", "locations") if k in call}
    if diffs:
        patch["content"] = diffs
    request["subject"] = {"type": "tool_call", "toolCall": patch}
    return request
