"""What ``session/resume`` replays: the conversation from a cursor (``replayFrom``), as the live turn showed it.

``{"type": "start"}`` replays everything. ``{"type": "_message", "messageId": ID}`` (this agent's extension, in
the ``_`` namespace v2 reserves for it; the session-resume RFD leaves "future cursors that identify a message" open)
replays from that message on, inclusive, as the RFD says cursors are; an id the session does not hold is -32602.
Any other cursor type (a future ACP one) replays everything: more history than asked is safe, less is not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.protocols.acp.encoder import replay
from awaken_stdio.protocols.acp.turns import descriptors
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError

if TYPE_CHECKING:
    from awaken_stdio.app.app import App

__all__ = ["MESSAGE_CURSOR", "replayed_from"]

MESSAGE_CURSOR = "_message"
_OPEN_RUNS = 100


def _start(messages: list[Any], cursor: dict[str, Any]) -> int:
    if cursor.get("type") != MESSAGE_CURSOR:
        return 0
    wanted = cursor.get("messageId")
    for i, message in enumerate(messages):
        if message.id == wanted:
            return i
    raise JsonRpcError(INVALID_PARAMS, f"Invalid params: replayFrom names no message of this session: {wanted!r}")


async def replayed_from(app: App, record: SessionRecord, cursor: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The v1 updates that replay ``record``'s conversation from ``cursor`` (each still to be made v2)."""
    messages = await app.sessions.history(record)
    start = _start(messages, cursor)
    runs = await app.sessions.runs(record, statuses=["created", "running", "waiting"], limit=_OPEN_RUNS)
    return replay(messages[start:], descriptors(app), {r.run_id for r in runs.items})
