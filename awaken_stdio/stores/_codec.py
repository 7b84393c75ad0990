"""What every backend shares: the JSON form of records, defensive copies, opaque cursors and in-memory paging.

SQL backends store records as JSON text next to the columns they index; the file backend stores the same JSON in
files; the memory backend keeps objects and copies them at the boundary. Keeping the encoders here is what makes
the four backends agree on every field.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any, TypeVar

from awaken_stdio.contract._speed import compact_json
from awaken_stdio.contract.errors import VersionConflict
from awaken_stdio.contract.state import PersistedState
from awaken_stdio.contract.stores import (
    Checkpoint,
    Page,
    PermissionGrant,
    RunRecord,
    SessionRecord,
    ThreadRecord,
)

__all__ = [
    "FAR",
    "FIRST_PAGE_KEY",
    "SortKey",
    "answered_calls",
    "check_count",
    "check_limit",
    "check_run_thread",
    "copy_grant",
    "copy_run",
    "copy_session",
    "copy_state",
    "copy_thread",
    "decode_cursor",
    "dumps",
    "encode_cursor",
    "grant_from_json",
    "loads",
    "page_from_rows",
    "page_newest_first",
    "record_to_json",
    "session_from_json",
    "thread_from_json",
]

T = TypeVar("T")
SortKey = tuple[int, str]
# Larger than any timestamp, sequence number or row count: "no bound" without a NULL branch in the SQL.
FAR = 1 << 62
FIRST_PAGE_KEY: SortKey = (FAR, "")

# compact, ASCII-only JSON: safe for every driver and file system, and NaN is refused, not written
dumps = compact_json()
loads = json.loads


# -- records without their own JSON form ---------------------------------------------------------------------


def record_to_json(record: ThreadRecord | SessionRecord | PermissionGrant) -> dict[str, Any]:
    """Every field by name, values shared (the caller encodes at once). Decoding stays per record type below:
    it supplies defaults for fields a hand-edited file may lack."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def thread_from_json(d: dict[str, Any]) -> ThreadRecord:
    return ThreadRecord(
        thread_id=d["thread_id"],
        title=d.get("title"),
        agent_id=d.get("agent_id"),
        parent_thread_id=d.get("parent_thread_id"),
        message_count=int(d.get("message_count", 0)),
        metadata=dict(d.get("metadata") or {}),
        created_at=int(d.get("created_at", 0)),
        updated_at=int(d.get("updated_at", 0)),
    )


def session_from_json(d: dict[str, Any]) -> SessionRecord:
    return SessionRecord(
        session_id=d["session_id"],
        thread_id=d["thread_id"],
        cwd=d["cwd"],
        agent_id=d.get("agent_id"),
        title=d.get("title"),
        mode=d.get("mode"),
        model=d.get("model"),
        additional_directories=list(d.get("additional_directories") or []),
        mcp_servers=list(d.get("mcp_servers") or []),
        origin=d.get("origin", "acp"),
        created_at=int(d.get("created_at", 0)),
        updated_at=int(d.get("updated_at", 0)),
        system_prompt=d.get("system_prompt"),
    )


def grant_from_json(d: dict[str, Any]) -> PermissionGrant:
    return PermissionGrant(
        grant_id=d["grant_id"],
        workspace=d["workspace"],
        tool=d["tool"],
        behavior=d["behavior"],
        pattern=d.get("pattern"),
        created_at=int(d.get("created_at", 0)),
        expires_at=None if d.get("expires_at") is None else int(d["expires_at"]),
    )


# -- defensive copies (memory backend): callers must not be able to edit what is stored ----------------------


def copy_state(s: PersistedState) -> PersistedState:
    """State values are immutable by contract (``StateKey.apply`` returns new values), so a shallow copy of the
    extension map is enough to keep a caller's later ``extensions[k] = ...`` out of the store."""
    return PersistedState(revision=s.revision, extensions=dict(s.extensions))


def copy_run(r: RunRecord) -> RunRecord:
    return replace(
        r, input_message_ids=list(r.input_message_ids), state=copy_state(r.state) if r.state is not None else None
    )


def copy_thread(t: ThreadRecord) -> ThreadRecord:
    return replace(t, metadata=dict(t.metadata))


def copy_session(s: SessionRecord) -> SessionRecord:
    return replace(
        s,
        additional_directories=list(s.additional_directories),
        mcp_servers=[dict(m) for m in s.mcp_servers],
        system_prompt=copy.deepcopy(s.system_prompt),
    )


def copy_grant(g: PermissionGrant) -> PermissionGrant:
    return replace(g)


# -- checkpoints -----------------------------------------------------------------------------------------------


def check_run_thread(cp: Checkpoint) -> None:
    """A checkpoint's run must belong to its thread (checked before any I/O)."""
    if cp.run.thread_id != cp.thread_id:
        raise ValueError(
            f"checkpoint for thread {cp.thread_id} carries run {cp.run.run_id} of thread {cp.run.thread_id}"
        )


def answered_calls(cp: Checkpoint) -> list[str]:
    """The calls whose results the checkpoint appends. Every backend settles their ``started`` effect-ledger
    entries (``finished``) with the checkpoint: once a result is in the conversation, a crash cannot leave its
    outcome unknown, so the loop needs no separate write for the mark."""
    return [m.tool_call_id for m in cp.messages if m.tool_call_id is not None]


def check_count(cp: Checkpoint, actual_count: int) -> None:
    """The version guard: the thread must hold exactly the messages the writer saw."""
    if actual_count != cp.expected_message_count:
        raise VersionConflict(f"messages of thread {cp.thread_id}", cp.expected_message_count, actual_count)


# -- paging ----------------------------------------------------------------------------------------------------


def encode_cursor(kind: str, key: SortKey) -> str:
    """Opaque to callers: URL-safe base64 of ``[kind, updated_at, id]``, the last item's sort key."""
    return base64.urlsafe_b64encode(dumps([kind, key[0], key[1]]).encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str | None) -> SortKey:
    """The key to continue after; ``FIRST_PAGE_KEY`` for no cursor. A cursor from another listing is refused."""
    if cursor is None:
        return FIRST_PAGE_KEY
    try:
        data = loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if isinstance(data, list) and len(data) == 3 and data[0] == kind:
            _, ts, ident = data
            if isinstance(ts, int) and isinstance(ident, str):
                return ts, ident
    except (ValueError, binascii.Error, UnicodeDecodeError):
        pass
    raise ValueError(f"invalid {kind} cursor: {cursor!r} (pass back a next_cursor this listing returned)")


def check_limit(limit: int) -> None:
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


def page_newest_first(
    items: Iterable[T], key: Callable[[T], SortKey], kind: str, limit: int, cursor: str | None
) -> Page[T]:
    """Newest first by ``key``; the in-memory twin of the SQL keyset queries."""
    check_limit(limit)
    after = decode_cursor(kind, cursor)
    ordered = sorted((i for i in items if key(i) < after), key=key, reverse=True)
    return page_from_rows(ordered[: limit + 1], key, kind, limit)


def page_from_rows(rows: list[T], key: Callable[[T], SortKey], kind: str, limit: int) -> Page[T]:
    """``rows`` holds up to ``limit + 1`` items: the extra one only says whether there is a next page."""
    if len(rows) <= limit:
        return Page(items=rows)
    items = rows[:limit]
    return Page(items=items, next_cursor=encode_cursor(kind, key(items[-1])))
