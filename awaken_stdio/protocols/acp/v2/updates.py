"""The v1 machinery's ``session/update`` payloads as v2 ones (``to_v2``), and v2's config options.

v2 keys every update by what it patches: message updates and chunks by ``messageId`` (required), tool calls by
``toolCallId`` (``tool_call`` is gone: ``tool_call_update`` is an upsert), the plan by ``planId`` (``plan_update``),
terminals by ``terminalId``. Diffs become structured ``changes`` with a unified ``patch``; modes are a config option
only (``current_mode_update`` is dropped); a command's input is a tagged union. A command the agent ran itself (v2
has no client terminal) is shown as a display-only terminal: a ``terminal_update`` snapshot of its output and exit
status, anchored in the call's content. Anything else, ``_``-prefixed custom updates included, passes through
unchanged (v2's enums are open).
"""

from __future__ import annotations

import base64
import difflib
from typing import Any

from awaken_stdio.contract.ids import new_id

__all__ = ["PLAN_ID", "config_options_v2", "to_v2", "tool_call_content"]

PLAN_ID = "plan"  # a session has one plan, which each ``plan_update`` replaces
_CHUNKS = ("user_message_chunk", "agent_message_chunk", "agent_thought_chunk")
_DROPPED = ("current_mode_update",)


def to_v2(update: dict[str, Any]) -> list[dict[str, Any]]:
    """The v2 form of one v1 update: none when v2 has no such update, two for a command's terminal and call."""
    kind = update.get("sessionUpdate")
    if kind in _DROPPED:
        return []
    if kind in _CHUNKS:
        if update.get("messageId") is None:  # v2 requires it; a lone notice is a message of its own
            return [{**update, "messageId": new_id("msg_")}]
        return [update]
    if kind in ("tool_call", "tool_call_update"):
        patch = {**update, "sessionUpdate": "tool_call_update"}
        if isinstance(update.get("content"), list):
            patch["content"] = [tool_call_content(c) for c in update["content"]]
        terminal = _terminal(update)
        if terminal is not None:
            patch["content"] = [{"type": "terminal", "terminalId": terminal["terminalId"]}]
            return [terminal, patch]
        return [patch]
    if kind == "plan":
        plan = {"type": "items", "planId": PLAN_ID, "entries": update["entries"]}
        return [{"sessionUpdate": "plan_update", "plan": plan}]
    if kind == "available_commands_update":
        return [{**update, "availableCommands": [_command(c) for c in update["availableCommands"]]}]
    if kind == "config_option_update":
        return [{**update, "configOptions": config_options_v2(update["configOptions"])}]
    return [update]


def _terminal(update: dict[str, Any]) -> dict[str, Any] | None:
    """The ``terminal_update`` of a finished command the agent ran (``run_command``'s result), else ``None``."""
    raw = update.get("rawOutput")
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), str) or "exit_code" not in raw:
        return None
    output = str(raw.get("output") or "").encode()
    return {
        "sessionUpdate": "terminal_update",
        "terminalId": f"term_{update['toolCallId']}",
        "command": raw["command"],
        "output": {"data": base64.b64encode(output).decode()},
        "exitStatus": {"exitCode": raw["exit_code"], "signal": raw.get("signal")},
    }


def tool_call_content(item: dict[str, Any]) -> dict[str, Any]:
    """A v1 tool-call content item in v2: a diff as a structured change plus its unified patch."""
    if item.get("type") != "diff" or "changes" in item:
        return item
    path, old, new = item["path"], item.get("oldText"), item["newText"]
    lines = difflib.unified_diff(
        (old or "").splitlines(keepends=True),
        new.splitlines(keepends=True),
        "/dev/null" if old is None else f"a{path}",
        f"b{path}",
    )
    change = {"operation": "add" if old is None else "modify", "path": path, "fileType": "text"}
    return {"type": "diff", "changes": [change], "patch": {"format": "git_patch", "text": "".join(lines)}}


def _command(command: dict[str, Any]) -> dict[str, Any]:
    hint = (command.get("input") or {}).get("hint")
    out = {k: v for k, v in command.items() if k != "input"}
    if isinstance(hint, str):
        out["input"] = {"type": "text", "hint": hint}
    return out


def config_options_v2(options: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """v1 config options in v2: ``configId`` names each one."""
    return [{("configId" if k == "id" else k): v for k, v in option.items()} for option in options]
