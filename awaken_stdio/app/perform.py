"""What a claimed dispatch row does: cancel a waiting run, resume it with a decision, or start (or continue) a run.

Where it runs is the promise "an approved call behaves exactly as an allowed one would": in the holder's context when
this process holds the run for a client, else in one rebuilt from the run's records by the app's ``ContextFactory``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, replace

from awaken_stdio.app.verdicts import not_waiting
from awaken_stdio.contract.activation import AgentRunResult, EventSink, RunActivation
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import InvalidResume
from awaken_stdio.contract.mailbox import DispatchSettle, Fence, RunDispatch
from awaken_stdio.contract.stores import RunRecord, ThreadForRun
from awaken_stdio.runtime.agent_runtime import AgentRuntime

__all__ = ["ContextFactory", "Performer"]

# Where a run of a session (or none) recorded with a working directory resumes: an activation's ``env``, ``tools``
# and ``system_prompt``, opened for the run's duration (it may start the session's MCP servers). ``wanted``: the
# tools the run is about to call (a decision's pending calls), so a missing one can say why.
ContextFactory = Callable[[str | None, str | None, tuple[str, ...]], AbstractAsyncContextManager[RunActivation]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Performer:
    runtime: AgentRuntime
    context: ContextFactory | None = None  # where nobody holds the run's context: rebuilt from its records

    async def waiting(self, run_id: str) -> RunRecord:
        """The run, waiting for decisions; else ``InvalidResume`` (unknown run) or why not (``verdicts``)."""
        record = await self.runtime.store.load_run(run_id)
        if record is None:
            raise InvalidResume(f"run {run_id} not found")
        if record.status != "waiting":
            raise await not_waiting(self.runtime.store.mailbox, record)
        return record

    async def perform(
        self,
        d: RunDispatch,
        sink: EventSink | None,
        activation: RunActivation | None,
        seen: RunRecord | None,
        settle: DispatchSettle,
        loaded: ThreadForRun | None = None,
    ) -> AgentRunResult | None:
        """Carry out ``d``. A decision or a continuation runs in the holder's context when this process holds the
        run for a client (``activation``), else in the context rebuilt from the run's records (``context``): an
        approved call behaves exactly as it would have, had a rule allowed it. The run settles ``d`` with the
        checkpoint that ends it or makes it wait (``settle``)."""
        req = d.request
        if req.kind == "cancel":
            cancelled = await self.runtime.cancel_waiting(d.run_id, Fence.of(settle))
            latest = await self.runtime.store.load_run(d.run_id) if cancelled is None else None
            if latest is not None:  # a decision or another cancel ended it first: this one did nothing
                raise await not_waiting(self.runtime.store.mailbox, latest, d.dispatch_id)
            return cancelled
        if req.kind == "decide":
            decisions = list(req.decisions)
            if activation is not None:
                return await self.runtime.resume(
                    d.run_id, decisions, sink, record=seen, context=activation, settle=settle, loaded=loaded
                )
            record = seen if seen is not None and seen.run_id == d.run_id else await self.waiting(d.run_id)
            wanted = tuple(t.tool_name for t in record.waiting.tickets) if record.waiting else ()
            async with self._context(record.session_id, record.cwd, wanted) as context:
                return await self.runtime.resume(
                    d.run_id, decisions, sink, record=record, context=context, settle=settle, loaded=loaded
                )
        if activation is not None:
            return await self.runtime.run(
                replace(activation, wait_for_decisions=False, settle=settle, loaded=loaded), sink
            )
        record = await self.runtime.store.load_run(d.run_id)
        if record is not None and record.status in ("waiting", "done"):
            return None  # started before a restart: it now waits for a decision, or it finished
        async with self._context(req.session_id, req.cwd) as context:
            activation = RunActivation(
                messages=[] if record is not None else list(req.messages),
                thread_id=d.thread_id,
                agent_id=req.agent_id,
                decisions=[] if record is not None else list(req.decisions),
                run_id=None if record is not None else d.run_id,
                continue_run_id=d.run_id if record is not None else None,  # it died mid-run: continue it
                session_id=req.session_id,
                origin=req.origin,
                env=context.env if context.env.cwd else replace(context.env, cwd=req.cwd),
                tools=context.tools,
                system_prompt=context.system_prompt,
                settle=settle,
            )
            return await self.runtime.run(activation, sink)

    def _context(
        self, session_id: str | None, cwd: str | None, wanted: tuple[str, ...] = ()
    ) -> AbstractAsyncContextManager[RunActivation]:
        if self.context is None:
            return nullcontext(RunActivation(env=RunEnvironment(cwd=cwd or None)))
        return self.context(session_id, cwd, wanted)
