"""The tools that arrive after the app opened: ``[tools] modules`` (imported off the event loop) and ``[mcp_servers]``
(connecting). Nothing a server answers waits for them, so a module whose import never returns or a server that never
answers cannot hold a client hostage; what uses tools (a run, a listing) waits for them, once, for at most
:data:`SETTLE_S` from the opening, and goes on with what is ready.

Each one that fails, or is still loading at that bound, becomes a problem: one line naming the module or server,
logged, and kept (:attr:`ToolLoading.problems`) for the clients to tell their person.
"""

from __future__ import annotations

import logging

import anyio

__all__ = ["SETTLE_S", "ToolLoading"]

log = logging.getLogger(__name__)

SETTLE_S = 10.0  # how long after the opening a run or a listing waits for the tools still loading


class ToolLoading:
    """What is still loading (by name: ``tool module 'x'``, ``MCP server 'y'``) and what went wrong, in order."""

    def __init__(self, settle_s: float = SETTLE_S) -> None:
        self.problems: list[str] = []  # only ever appended to: a client remembers how many it has told
        self._pending: set[str] = set()
        self._idle = anyio.Event()
        self._idle.set()
        self._settle_s = settle_s
        self._late_reported = False
        self._deadline = anyio.current_time() + settle_s

    @property
    def pending(self) -> list[str]:
        return sorted(self._pending)

    def start(self, name: str) -> None:
        if not self._pending:
            self._idle = anyio.Event()
        self._pending.add(name)

    def done(self, name: str, problem: str | None = None) -> None:
        """``name`` is ready, or failed with ``problem`` (logged and kept)."""
        if problem is not None:
            self.report(problem)
        self._pending.discard(name)
        if not self._pending:
            self._idle.set()

    def report(self, problem: str) -> None:
        log.warning("%s", problem)
        self.problems.append(problem)

    async def settle(self) -> None:
        """Wait for what is still loading, until the bound after the opening; past it, return at once."""
        with anyio.move_on_after(self._deadline - anyio.current_time()):
            await self._idle.wait()
            return
        self._report_late()

    async def watch(self) -> None:
        """Report what is still loading at the bound, whether anyone waits or not."""
        await anyio.sleep(self._deadline - anyio.current_time())
        self._report_late()

    def _report_late(self) -> None:
        """Once: what is still loading at the bound keeps loading, and its tools are added when it is ready."""
        if not self._late_reported:
            self._late_reported = True
            for name in self.pending:
                self.report(f"{name} is not ready after {self._settle_s:g} s: its tools come when it is")
