"""Runtime events and stored conversations as ACP ``session/update`` payloads.

One mapping serves the live stream (``TurnEncoder``, fed the events of a run) and the replay of ``session/load``
(``replay``, fed the thread's stored messages), so a reloaded conversation looks exactly as it did live: the same
``messageId``s, tool titles, kinds, locations and final statuses. Updates are plain dicts (the ``update`` field of
``session/update``), built without models because this is the hot path.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import Any

from awaken_stdio.contract.content import to_wire
from awaken_stdio.contract.events import (
    ActivitySnapshot,
    AgentEvent,
    InferenceComplete,
    ReasoningDelta,
    RunFinish,
    TextDelta,
    ToolCallDone,
    ToolCallReady,
    ToolCallResumed,
    ToolCallStart,
)
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import COMPACTION_ACTIVITY, ContentBlock, Message
from awaken_stdio.contract.preview import ToolPreview
from awaken_stdio.contract.tools import ToolDescriptor, ToolResult, infer_tool_kind
from awaken_stdio.contract.workspace import TERMINAL_ACTIVITY

__all__ = [
    "DescriptorLookup",
    "TurnEncoder",
    "compaction_updates",
    "preview_fields",
    "replay",
    "stop_reason",
    "tool_call",
    "tool_title",
]

DescriptorLookup = Callable[[str], ToolDescriptor | None]

_PLAN_TOOL = "update_plan"
_TITLE_ARGS = ("path", "command", "pattern", "url", "query")  # the argument that best names what a call does
_TITLE_LIMIT = 80
_INTERRUPTED = "Interrupted before it finished."  # a call its run stopped (cancelled, or the process died)
_STOP_CODES = {
    "max_rounds": "max_turn_requests",
    "timeout": "max_turn_requests",
    "max_tokens": "max_tokens",
    "token_budget": "max_tokens",
    "refusal": "refusal",
}


def stop_reason(termination: TerminationReason) -> str:
    """The ACP ``stopReason`` of a run that ended (errors never get here: they are -32603)."""
    if termination.type == "cancelled":
        return "cancelled"
    if termination.type == "stopped":
        return _STOP_CODES.get((termination.value or {}).get("code", ""), "end_turn")
    return "end_turn"


def tool_title(name: str, args: Any, descriptor: ToolDescriptor | None) -> str:
    """What a person reads in the tool call's header: ``Write file hello.py``, ``Run command: ls -la``."""
    title = (descriptor.title if descriptor and descriptor.title else None) or name
    if isinstance(args, dict):
        for key in _TITLE_ARGS:
            value = args.get(key)
            if isinstance(value, str) and value:
                value = " ".join(value.split())
                if len(value) > _TITLE_LIMIT:
                    value = value[: _TITLE_LIMIT - 1] + "…"
                return f"{title}: {value}" if key == "command" else f"{title} {value}"
    return title


def _kind(name: str, descriptor: ToolDescriptor | None) -> str:
    return descriptor.kind if descriptor is not None else infer_tool_kind(name)


def tool_call(call_id: str, name: str, args: Any, descriptor: ToolDescriptor | None, **extra: Any) -> dict[str, Any]:
    """A ``tool_call`` update (also the ``toolCall`` of a permission request, once ``sessionUpdate`` is dropped)."""
    update = {
        "sessionUpdate": "tool_call",
        "toolCallId": call_id,
        "title": tool_title(name, args, descriptor),
        "kind": _kind(name, descriptor),
        "status": "pending",
    }
    if name:
        update["name"] = name  # the tool's programmatic name (the title says what this call does)
    if args is not None:
        update["rawInput"] = args
    update.update(extra)
    return update


def _text_content(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _diff_content(path: str, old_text: str | None, new_text: str) -> dict[str, Any]:
    return {"type": "diff", "path": path, "oldText": old_text, "newText": new_text}


def preview_fields(preview: ToolPreview) -> dict[str, Any]:
    """``content`` and ``locations`` of a permission request's tool call: the diffs approving would make, the
    command and where it runs, and what else to know (a call that would fail as things stand)."""
    content = [_diff_content(c.path, c.old_text, c.new_text) for c in preview.changes]
    if preview.command is not None:
        where = f"\nin `{preview.cwd}`" if preview.cwd else ""
        content.append(_text_content(f"```sh\n{preview.command}\n```{where}"))
    if preview.note:
        content.append(_text_content(preview.note))
    locations = [{"path": c.path} for c in preview.changes]
    if preview.command is not None and preview.cwd:
        locations.append({"path": preview.cwd})
    return {"content": content, "locations": locations} if locations else {"content": content}


def _result_fields(
    data: Any, metadata: dict[str, Any] | None, text: str, failed: bool, blocks: Sequence[ContentBlock] = ()
) -> dict[str, Any]:
    """``content``, ``locations`` and ``rawOutput`` of a finished call: a diff for edits, the terminal for commands,
    a rich result's blocks (images, audio, resources) as ACP content."""
    fields: dict[str, Any] = {"rawOutput": data}
    content: list[dict[str, Any]] = [{"type": "content", "content": to_wire(b)} for b in blocks]
    if isinstance(data, dict):
        diff = data.get("diff")
        if isinstance(diff, dict) and not failed:
            content.append(_diff_content(diff["path"], diff.get("old_text"), diff["new_text"]))
        terminal = data.get("terminal_id")
        if isinstance(terminal, str):
            content.append({"type": "terminal", "terminalId": terminal})
    if not content and text:
        content.append(_text_content(text))
    fields["content"] = content
    locations = (metadata or {}).get("locations")
    if isinstance(locations, list) and locations:
        fields["locations"] = locations
    return fields


def _plan(entries: Any) -> dict[str, Any] | None:
    if not isinstance(entries, list):
        return None
    return {
        "sessionUpdate": "plan",
        "entries": [
            {"content": e["content"], "priority": e.get("priority", "medium"), "status": e["status"]}
            for e in entries
            if isinstance(e, dict) and "content" in e and "status" in e
        ],
    }


def _payload_text(payload: Any) -> str:
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, ensure_ascii=False, default=str)


class TurnEncoder:
    """Turns the events of one prompt turn into updates; remembers what it needs across events (call names)."""

    __slots__ = ("_calls", "_context_window", "_lookup", "_open", "compaction", "notices", "show_thoughts")

    def __init__(
        self,
        lookup: DescriptorLookup,
        context_window: int,
        *,
        show_thoughts: bool = True,
        compaction: bool = False,
        notices: bool = False,
    ) -> None:
        self._lookup = lookup
        self._context_window = context_window
        self._calls: dict[str, tuple[str, Any]] = {}  # call id -> (tool name, arguments)
        self._open: set[str] = set()  # calls started and not finished (running or waiting for a decision)
        self.show_thoughts = show_thoughts
        self.compaction = compaction  # the client shows compaction updates (``session.compaction``)
        self.notices = notices  # the client shows notices (``session.notices``)

    def call(self, call_id: str) -> tuple[str, Any] | None:
        return self._calls.get(call_id)

    def encode(self, event: AgentEvent) -> list[dict[str, Any]]:
        kind = type(event)
        if type(event) is TextDelta:
            return [_chunk("agent_message_chunk", event.delta, event.message_id)]
        if type(event) is ReasoningDelta:
            if not self.show_thoughts:
                return []
            return [_chunk("agent_thought_chunk", event.delta, event.message_id)]
        if kind is ToolCallStart:
            assert isinstance(event, ToolCallStart)
            self._calls[event.id] = (event.name, None)
            self._open.add(event.id)
            return [tool_call(event.id, event.name, None, self._lookup(event.name))]
        if kind is ToolCallReady:
            assert isinstance(event, ToolCallReady)
            known = event.id in self._calls
            self._calls[event.id] = (event.name, event.arguments)
            self._open.add(event.id)
            descriptor = self._lookup(event.name)
            # pending, not in_progress: the permission gate has not run yet (a guarded call is in_progress once
            # approved, turns.py); an allowed call goes from pending to its result, or to its live terminal
            if not known:
                return [tool_call(event.id, event.name, event.arguments, descriptor)]
            update = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": event.id,
                "title": tool_title(event.name, event.arguments, descriptor),
                "status": "pending",
                "rawInput": event.arguments,
            }
            if event.name:
                update["name"] = event.name
            return [update]
        if kind is ToolCallDone:
            assert isinstance(event, ToolCallDone)
            return self._done(event.id, event.result, event.outcome)
        if kind is ToolCallResumed:
            assert isinstance(event, ToolCallResumed)
            return self._resumed(event)
        if kind is ActivitySnapshot:
            assert isinstance(event, ActivitySnapshot)
            if event.activity_type == COMPACTION_ACTIVITY:
                return compaction_updates(event, compaction=self.compaction, notices=self.notices)
            if event.message_id not in self._calls:
                return []
            update: dict[str, Any] = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": event.message_id,
                "status": "in_progress",
            }
            if event.activity_type == TERMINAL_ACTIVITY:  # embedded while it runs: the editor shows its output
                update["content"] = [{"type": "terminal", "terminalId": event.content["terminal_id"]}]
            return [update]
        if kind is RunFinish:
            assert isinstance(event, RunFinish)
            return self._finish(event.termination)
        if kind is InferenceComplete:
            assert isinstance(event, InferenceComplete)
            if event.usage is None:
                return []
            used = event.usage.input_tokens + event.usage.output_tokens
            return [{"sessionUpdate": "usage_update", "used": used, "size": max(self._context_window, used)}]
        return []

    def _finish(self, termination: TerminationReason) -> list[dict[str, Any]]:
        """A cancelled run settles the calls it left open as failed, as its stored conversation replays them."""
        if termination.type != "cancelled":
            return []
        updates = [_interrupted(call_id) for call_id in sorted(self._open)]
        self._open.clear()
        return updates

    def _done(self, call_id: str, result: ToolResult, outcome: str) -> list[dict[str, Any]]:
        if outcome == "suspended":
            return [{"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "pending"}]
        self._open.discard(call_id)
        failed = outcome == "failed"
        update = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call_id,
            "status": "failed" if failed else "completed",
            **_result_fields(
                result.data, result.metadata, text=result.text_for_model(), failed=failed, blocks=result.content
            ),
        }
        updates = [update]
        if result.tool_name == _PLAN_TOOL and not failed and isinstance(result.data, dict):
            plan = _plan(result.data.get("entries"))
            if plan is not None:
                updates.append(plan)
        return updates

    def _resumed(self, event: ToolCallResumed) -> list[dict[str, Any]]:
        if event.tool_result is not None:  # the tool ran once approved: shown as when it was allowed
            return self._done(event.target_id, event.tool_result, event.outcome)
        self._open.discard(event.target_id)  # refused: the decision's own result is all there is
        payload, failed = event.result, event.outcome == "failed"
        if failed and isinstance(payload, dict) and payload.get("approved") is False:
            text = "Rejected" + (f": {payload['reason']}" if payload.get("reason") else "")
        elif failed and isinstance(payload, dict) and "error" in payload:
            text = str(payload["error"])
        else:
            text = _payload_text(payload)
        status = "failed" if failed else "completed"
        update = {"sessionUpdate": "tool_call_update", "toolCallId": event.target_id, "status": status}
        return [update | _result_fields(payload, None, text, failed)]


def compaction_updates(event: ActivitySnapshot, *, compaction: bool, notices: bool) -> list[dict[str, Any]]:
    """What a client is shown of a compaction event (``runtime.compaction.CompactionReport``): ``compaction_update``
    and ``compaction_summary_chunk`` when it advertised ``session.compaction``; else, when it takes notices, one
    notice once the compaction is over; else nothing (the conversation goes on, its history kept)."""
    content = event.content if isinstance(event.content, dict) else {}
    status = content.get("status")
    if not compaction:
        if not notices or status not in ("completed", "failed"):
            return []
        if status == "completed":
            return [_notice("info", "Conversation compacted", content.get("message"))]
        return [_notice("warning", "Compaction did not happen", content.get("error"))]
    if "chunk" in content:
        text = {"type": "text", "text": str(content["chunk"])}
        return [{"sessionUpdate": "compaction_summary_chunk", "compactionId": event.message_id, "content": text}]
    if not isinstance(status, str):
        return []
    update: dict[str, Any] = {"sessionUpdate": "compaction_update", "compactionId": event.message_id, "status": status}
    if status == "completed" and content.get("summary"):
        update["summary"] = [{"type": "text", "text": str(content["summary"])}]
    elif status in ("failed", "cancelled"):
        update["summary"] = None  # whatever was streamed of a summary not applied
        if status == "failed" and content.get("error"):
            update["error"] = str(content["error"])
    return [update]


def _notice(severity: str, title: str, description: Any) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if isinstance(description, str) and description:
        update["description"] = description
    return update


def _chunk(kind: str, text: str, message_id: str | None) -> dict[str, Any]:
    update: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return update


def replay(messages: list[Message], lookup: DescriptorLookup, open_runs: Collection[str]) -> Iterator[dict[str, Any]]:
    """The updates that show a stored conversation: chunks, thoughts, tool calls with their final status, as they
    were live.

    A tool message's status is ``failed`` for the runtime's own markers (interrupted, superseded, cancelled) and
    when its metadata says so (a failed or rejected call), else ``completed``. A call with no result whose run is
    over (not in ``open_runs``: it was cancelled, or its process died) failed; one whose run is still open stays
    ``pending``: it waits for a decision (or for one about its unknown outcome, after a crash).
    """
    calls: dict[str, tuple[str, Any]] = {}
    unanswered: dict[str, str | None] = {}  # call id -> its run
    for m in messages:
        if m.role == "user" and not m.internal:
            for block in m.content:
                yield {
                    "sessionUpdate": "user_message_chunk",
                    "messageId": m.id,
                    "content": to_wire(block),
                }
        elif m.role == "assistant" and not m.internal:
            for thought in m.thinking:
                if thought.text and not thought.redacted:
                    yield _chunk("agent_thought_chunk", thought.text, m.id)
            if m.text:
                yield _chunk("agent_message_chunk", m.text, m.id)
            for call in m.tool_calls:
                calls[call.id] = (call.name, call.arguments)
                unanswered[call.id] = m.run_id
                yield tool_call(call.id, call.name, call.arguments, lookup(call.name))
        elif m.role == "tool" and m.tool_call_id is not None:
            unanswered.pop(m.tool_call_id, None)
            failed = m.internal or (m.metadata or {}).get("status") == "failed"
            update: dict[str, Any] = {
                "sessionUpdate": "tool_call_update",
                "toolCallId": m.tool_call_id,
                "status": "failed" if failed else "completed",
                "content": [_text_content(m.text)] if m.text else [],
            }
            yield update
            name, args = calls.get(m.tool_call_id, ("", None))
            if name == _PLAN_TOOL and not failed and isinstance(args, dict):
                plan = _plan(args.get("entries"))
                if plan is not None:
                    yield plan
    yield from (_interrupted(call_id) for call_id, run in unanswered.items() if run not in open_runs)


def _interrupted(call_id: str) -> dict[str, Any]:
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed",
        "content": [_text_content(_INTERRUPTED)],
    }
