"""What ``tools/list`` publishes: every runtime tool, every ``expose_mcp`` agent as ``agent_<id>``, and ``resume_run``.

A ``Catalog`` is an immutable snapshot of that list, rebuilt when the runtime's tools change. It owns the public
names (hosts prefix ours, e.g. ``mcp__awaken__<name>``, and model APIs cap names at 64 characters, so ours keep to
``[A-Za-z0-9_.-]`` and at most 40 characters, with a short hash when a name had to be cut or clashed) and the reverse
map back to runtime names; the portable input schemas; annotations derived from each tool's kind and hints; and
pagination by opaque cursors that name the last tool of the previous page, so a listing that changes between pages
neither repeats nor skips a tool.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from awaken_stdio.app.tooling import PortabilityError, portable_schema
from awaken_stdio.contract.stores import DisplayStatus

if TYPE_CHECKING:
    from awaken_stdio.contract.agent import AgentSpec
    from awaken_stdio.contract.tools import Tool, ToolDescriptor

__all__ = [
    "MAX_NAME",
    "RESUME_RUN",
    "RUN_OUTPUT_SCHEMA",
    "Catalog",
    "Entry",
    "InvalidCursor",
    "decode_cursor",
    "encode_cursor",
]

log = logging.getLogger(__name__)

MAX_NAME = 40
RESUME_RUN = "resume_run"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_CURSOR_PREFIX = b"after:"

RUN_STATUSES = list(get_args(DisplayStatus))  # what a run result's status can be: the store's one list
RUN_OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string", "description": "The run; pass it to resume_run when status is waiting."},
        "thread_id": {"type": "string", "description": "The conversation; pass it as session_id to continue it."},
        "status": {"type": "string", "enum": RUN_STATUSES},
        "response": {"type": "string", "description": "The agent's answer (so far)."},
        "pending": {
            "type": "array",
            "description": "Tool calls waiting for approval (status waiting).",
            "items": {
                "type": "object",
                "properties": {
                    "tool_call_id": {"type": "string"},
                    "tool": {"type": "string"},
                    "arguments": {"type": "object"},
                    "reason": {"type": "string"},
                },
                "required": ["tool_call_id", "tool", "arguments", "reason"],
            },
        },
    },
    "required": ["run_id", "thread_id", "status", "response"],
}
_AGENT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "The task or question for the agent."},
        "session_id": {
            "type": "string",
            "description": "Continue a conversation: the thread_id of an earlier result, or an ACP session id.",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
_RESUME_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": {"type": "string", "description": "The run_id of a result whose status is waiting."},
        "decisions": {
            "type": "array",
            "minItems": 1,
            "description": "One decision per pending tool call (calls left out keep waiting).",
            "items": {
                "type": "object",
                "properties": {
                    "tool_call_id": {"type": "string"},
                    "approve": {"type": "boolean"},
                    "always": {
                        "type": "boolean",
                        "description": "Remember the answer for this tool in this workspace.",
                    },
                    "reason": {"type": "string", "description": "Why it was rejected (the agent sees it)."},
                    "if_unknown": {
                        "type": "string",
                        "enum": ["rerun", "done"],
                        "description": (
                            "Required to approve a call whose earlier attempt's outcome is unknown (it started and "
                            "its end was never recorded): rerun runs it again, done records it as done without "
                            "running it."
                        ),
                    },
                },
                "required": ["tool_call_id", "approve"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["run_id", "decisions"],
    "additionalProperties": False,
}


class InvalidCursor(ValueError):
    """A ``tools/list`` cursor this server did not hand out."""


EntryKind = Literal["tool", "agent", "resume"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One published tool: its public ``name``, what it runs (``target``: a tool name or an agent id) and how."""

    name: str
    kind: EntryKind
    target: str
    listing: dict[str, Any]
    guarded: bool = False  # a direct call may change something: the ``[mcp] permission`` policy applies
    output_schema: dict[str, Any] | None = None


@dataclass(slots=True, kw_only=True)
class Catalog:
    entries: list[Entry]  # sorted by name
    by_name: dict[str, Entry] = field(init=False)
    _validators: dict[str, Any] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.by_name = {e.name: e for e in self.entries}

    @classmethod
    def build(cls, tools: Mapping[str, Tool], agents: Mapping[str, AgentSpec]) -> Catalog:
        """Our own names are claimed first, so a runtime tool called ``resume_run`` gets a suffixed name."""
        taken: set[str] = set()
        entries = [_resume_entry(_claim(RESUME_RUN, taken))]
        for agent_id in sorted(agents):
            spec = agents[agent_id]
            if spec.expose_mcp:
                entries.append(_agent_entry(_claim(f"agent_{agent_id}", taken), spec))
        for tool_name in sorted(tools):
            entry = _tool_entry(_claim(tool_name, taken), tools[tool_name].descriptor)
            if entry is not None:
                entries.append(entry)
        entries.sort(key=lambda e: e.name)
        return cls(entries=entries)

    @property
    def listings(self) -> list[dict[str, Any]]:
        return [e.listing for e in self.entries]

    def page(self, cursor: str | None, size: int) -> tuple[list[dict[str, Any]], str | None]:
        """One page of listings after ``cursor`` (``None`` or ``""``: the first), and the next page's cursor."""
        start = 0
        if cursor:
            after = decode_cursor(cursor)
            start = next((i for i, e in enumerate(self.entries) if e.name > after), len(self.entries))
        chunk = self.entries[start : start + size]
        more = start + size < len(self.entries)
        return [e.listing for e in chunk], (encode_cursor(chunk[-1].name) if more and chunk else None)

    def check_arguments(self, entry: Entry, arguments: dict[str, Any]) -> str | None:
        """Why ``arguments`` do not fit the published schema (naming the field), or None when they do."""
        validator = self._validators.get(entry.name)
        if validator is None:
            from jsonschema import Draft202012Validator  # ~60 ms: loaded with the app, never before the first answer

            validator = self._validators[entry.name] = Draft202012Validator(entry.listing["inputSchema"])
        from jsonschema.exceptions import best_match

        error = best_match(validator.iter_errors(arguments))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"Invalid arguments: {where + ': ' if where else ''}{error.message}"


def _claim(raw: str, taken: set[str]) -> str:
    name = _UNSAFE.sub("_", raw) or "tool"
    if len(name) > MAX_NAME or name in taken:
        digest = hashlib.sha256(raw.encode()).hexdigest()
        base = name[: MAX_NAME - 7]
        name = f"{base}_{digest[:6]}"
        i = 6
        while name in taken:  # a hash clash as well: take more of the digest
            i += 1
            name = f"{base[: MAX_NAME - i - 1]}_{digest[:i]}"
    taken.add(name)
    return name


def encode_cursor(name: str) -> str:
    return base64.urlsafe_b64encode(_CURSOR_PREFIX + name.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise InvalidCursor(cursor) from None
    if not raw.startswith(_CURSOR_PREFIX):
        raise InvalidCursor(cursor)
    try:
        return raw[len(_CURSOR_PREFIX) :].decode()
    except UnicodeDecodeError:
        raise InvalidCursor(cursor) from None


def _title(name: str) -> str:
    text = name.replace("__", ": ").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def _tool_entry(name: str, d: ToolDescriptor) -> Entry | None:
    try:
        schema = portable_schema(d.parameters)
    except PortabilityError as exc:
        log.warning("not publishing tool %s: %s", d.name, exc)
        return None
    title = d.title or _title(d.name)
    from_server = "mcp_server" in d.metadata  # a configured MCP server's tool reaches whatever that server does
    annotations: dict[str, Any] = {
        "title": title,
        "readOnlyHint": d.read_only,
        "openWorldHint": from_server or d.kind == "fetch",
    }
    if d.read_only:
        annotations["idempotentHint"] = True
    else:
        annotations["destructiveHint"] = d.destructive or d.kind in ("delete", "move")
    listing: dict[str, Any] = {"name": name, "title": title, "inputSchema": schema, "annotations": annotations}
    if d.description:
        listing["description"] = d.description
    output = None
    if d.output_schema is not None and d.output_schema.get("type") == "object":
        output = listing["outputSchema"] = d.output_schema
    return Entry(name=name, kind="tool", target=d.name, listing=listing, guarded=not d.read_only, output_schema=output)


def _agent_entry(name: str, spec: AgentSpec) -> Entry:
    title = f"Agent {spec.id}"
    summary = spec.description.strip() or f"Ask the {spec.id} agent to do a task; it plans and uses its tools."
    description = (
        f"{summary}\n\nRuns the agent until it answers (seconds to minutes; progress is reported). The result "
        "carries run_id and thread_id: pass thread_id as session_id to continue the conversation. If status is "
        "waiting, tool calls need approval: call resume_run with the run_id and a decision per pending call. "
        "Runs are kept durably, so a waiting run can be resumed later, even after a restart."
    )
    listing = {
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": _AGENT_INPUT,
        "outputSchema": RUN_OUTPUT_SCHEMA,
        "annotations": {"title": title, "readOnlyHint": False, "idempotentHint": False, "openWorldHint": True},
    }
    return Entry(name=name, kind="agent", target=spec.id, listing=listing, output_schema=RUN_OUTPUT_SCHEMA)


def _resume_entry(name: str) -> Entry:
    title = "Resume a waiting run"
    listing = {
        "name": name,
        "title": title,
        "description": (
            "Approve or reject the pending tool calls of an agent run whose status is waiting, then let it "
            "continue; returns like the agent tool. Works for runs started earlier, in this process or another."
        ),
        "inputSchema": _RESUME_INPUT,
        "outputSchema": RUN_OUTPUT_SCHEMA,
        "annotations": {"title": title, "readOnlyHint": False, "idempotentHint": False, "openWorldHint": True},
    }
    return Entry(name=name, kind="resume", target="", listing=listing, output_schema=RUN_OUTPUT_SCHEMA)
