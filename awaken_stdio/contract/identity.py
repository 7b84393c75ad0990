"""Who a run is and where it comes from: what hooks and tools read as ``ctx.run_identity``.

A delegate's run names its parent (run, thread and the tool call that started it), so shared state can be filed
under the parent's thread: ``StateScope.parent_thread(ctx.run_identity.parent_thread_id)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["RunIdentity"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunIdentity:
    """The stable ids of a run and its lineage. ``origin`` is ``user``, ``acp``, ``mcp``, ``cli``, ``delegate``..."""

    run_id: str
    thread_id: str
    agent_id: str
    origin: str = "user"
    parent_run_id: str | None = None
    parent_thread_id: str | None = None
    parent_tool_call_id: str | None = None
    session_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__ if getattr(self, k) is not None}
