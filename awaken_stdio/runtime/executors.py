"""Tool executors: how a batch of allowed calls runs.

``sequential`` (the default) runs one call at a time on fresh state, commits each before the next, and stops at
the first call that suspends itself or raises a fatal ``ToolError``. ``parallel`` runs every call at once on one
frozen snapshot and never stops early; the loop then commits the results in call order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from awaken_stdio.contract.messages import ToolCall
from awaken_stdio.contract.state import Snapshot, StateCommand
from awaken_stdio.contract.tools import ToolResult

__all__ = ["INTERRUPTED", "CallResult", "Invoke", "ParallelToolExecutor", "SequentialToolExecutor", "ToolExecutor"]

INTERRUPTED = "[Tool execution was interrupted]"


@dataclass(slots=True, kw_only=True)
class CallResult:
    call: ToolCall
    result: ToolResult
    command: StateCommand = field(default_factory=StateCommand)
    fatal: str | None = None  # the tool raised a ToolError: the run ends with this reason


# invoke(call, snapshot or None for "take a fresh one") -> result; commit(result) applies it to the run state
Invoke = Callable[[ToolCall, Snapshot | None], Awaitable[CallResult]]
Commit = Callable[[CallResult], Awaitable[None]]


class ToolExecutor:
    name: str = ""

    async def execute(self, calls: list[ToolCall], invoke: Invoke, commit: Commit, snapshot: Snapshot) -> bool:
        """Run ``calls``; returns False when a call suspended itself (or failed fatally) and the rest were
        interrupted."""
        raise NotImplementedError


class SequentialToolExecutor(ToolExecutor):
    name = "sequential"

    async def execute(self, calls: list[ToolCall], invoke: Invoke, commit: Commit, snapshot: Snapshot) -> bool:
        for i, call in enumerate(calls):
            outcome = await invoke(call, None)
            await commit(outcome)
            if outcome.result.is_pending or outcome.fatal is not None:
                for rest in calls[i + 1 :]:
                    await commit(CallResult(call=rest, result=ToolResult.error(rest.name, INTERRUPTED)))
                return False
        return True


class ParallelToolExecutor(ToolExecutor):
    name = "parallel"

    async def execute(self, calls: list[ToolCall], invoke: Invoke, commit: Commit, snapshot: Snapshot) -> bool:
        if len(calls) == 1:
            await commit(await invoke(calls[0], snapshot))
            return True
        results: list[CallResult | None] = [None] * len(calls)

        async def one(i: int, call: ToolCall) -> None:
            results[i] = await invoke(call, snapshot)

        async with anyio.create_task_group() as tg:
            for i, call in enumerate(calls):
                tg.start_soon(one, i, call)
        for r in results:
            assert r is not None
            await commit(r)
        return True


def executor_for(name: str) -> ToolExecutor:
    if name in ("parallel", "parallel_streaming", "parallel_batch_approval"):
        return _PARALLEL
    return _SEQUENTIAL


_SEQUENTIAL = SequentialToolExecutor()
_PARALLEL = ParallelToolExecutor()
__all__ += ["executor_for"]
