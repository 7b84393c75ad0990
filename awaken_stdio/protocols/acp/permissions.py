"""``session/request_permission``: asking the person about a suspended tool call, and reading the answer.

The answer becomes a runtime decision (``ToolCallResume``); remembering "always" is the permission plugin's job
(its ``on_decision`` hook sees the policy in the decision), so nothing here stores anything. A ``cancelled``
outcome, or an answer we cannot read, is ``None``: the caller cancels the turn.
"""

from __future__ import annotations

import logging
import shlex
from typing import Any

from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.protocols.jsonrpc import JsonRpcPeer

__all__ = ["ask_permission", "permission_options"]

log = logging.getLogger(__name__)

_COMMAND_TOOL = "run_command"


def _program(args: Any) -> str | None:
    command = args.get("command") if isinstance(args, dict) else None
    if not isinstance(command, str):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return words[0] if words else None


def permission_options(tool_name: str, args: Any) -> list[dict[str, str]]:
    """The four choices; for commands the "always" ones name the program they remember (``git *``)."""
    scope = "this tool"
    if tool_name == _COMMAND_TOOL and (program := _program(args)):
        scope = f"`{program}` commands"
    return [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {"optionId": "allow_always", "name": f"Always allow {scope}", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        {"optionId": "reject_always", "name": f"Always reject {scope}", "kind": "reject_always"},
    ]


def _decision(answer: Any) -> ToolCallResume | None:
    outcome = answer.get("outcome") if isinstance(answer, dict) else None
    if not isinstance(outcome, dict) or outcome.get("outcome") != "selected":
        return None
    match outcome.get("optionId"):
        case "allow_once":
            return ToolCallResume.approve()
        case "allow_always":
            return ToolCallResume.approve(always=True)
        case "reject_once":
            return ToolCallResume.reject("rejected by the user")
        case "reject_always":
            return ToolCallResume.reject("rejected by the user", always=True)
    log.warning("unknown permission option %r: treating the answer as cancelled", outcome.get("optionId"))
    return None


async def ask_permission(
    peer: JsonRpcPeer, session_id: str, tool_call: dict[str, Any], tool_name: str, args: Any
) -> ToolCallResume | None:
    """Ask the client; the decision, or ``None`` when the person cancelled (the turn is then cancelled)."""
    call = {k: v for k, v in tool_call.items() if k != "sessionUpdate"}
    answer = await peer.request(
        "session/request_permission",
        {"sessionId": session_id, "toolCall": call, "options": permission_options(tool_name, args)},
        cancel_method="$/cancel_request",  # a question withdrawn (decided elsewhere) is withdrawn in the editor too
    )
    return _decision(answer)
