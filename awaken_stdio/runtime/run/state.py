"""What one run is, what it uses, what it keeps at hand, and the small questions every step asks of it.

A :class:`RunState` is the run itself: its conversation (with how much of it the store already has), its record,
usage, step count and state (what a checkpoint writes), and its progress in memory. What it works with (the agent,
the activation, the store and its effect ledger, the event sink, the phase engine, the cancellation) is its
:class:`RunDeps`, one field; what it derives once and reuses (the tools in reach, the compactors) is its
:class:`RunCache`. The step modules beside this one are functions of a :class:`RunState`;
:class:`~awaken_stdio.runtime.run.loop.AgentLoop` is the run state that drives them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import anyio

from awaken_stdio.contract.activation import EventSink, RunActivation
from awaken_stdio.contract.events import AgentEvent, StateSnapshot
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import EffectRecord, Fence, MailboxStore
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.profile import ProfileAccess
from awaken_stdio.contract.state import Snapshot, StateCommand
from awaken_stdio.contract.stores import RunRecord, Store
from awaken_stdio.contract.tools import CancelToken, Tool, ToolCallContext, ToolDescriptor
from awaken_stdio.runtime.frontend import FrontEndTool
from awaken_stdio.runtime.phases import PhaseEngine
from awaken_stdio.runtime.plugins import Phase, PhaseContext
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, TOOL_CALL_STATES, ToolCallState
from awaken_stdio.runtime.state_store import StateStore

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

    from awaken_stdio.contract.identity import RunIdentity
    from awaken_stdio.contract.inference import TokenUsage
    from awaken_stdio.contract.suspension import Decisions
    from awaken_stdio.runtime.compaction import Compactor
    from awaken_stdio.runtime.resolve import ResolvedAgent
    from awaken_stdio.runtime.run.behind import WriteBehind

    DecisionStream = MemoryObjectReceiveStream[Decisions]

__all__ = ["RunCache", "RunDeps", "RunState", "StopRun"]


class StopRun(Exception):
    """Internal: a step decided the run ends with ``termination``."""

    def __init__(self, termination: TerminationReason) -> None:
        self.termination = termination


@dataclass(slots=True, kw_only=True)
class RunDeps:
    """What a run works with: given at its start, and none of it written by a checkpoint."""

    agent: ResolvedAgent  # the agent running it (a handoff changes it)
    resolve: Callable[[str], ResolvedAgent]  # an agent by id, for a handoff
    activation: RunActivation  # why the run runs, and where: its input, its environment, its dispatch
    store: Store | None
    # the effect ledger settles calls a dead process left behind: nothing survives one in memory
    ledger: MailboxStore | None
    sink: EventSink | None
    decisions: DecisionStream | None  # decisions given while the run waits (a live channel)
    cancel: CancelToken
    engine: PhaseEngine  # the phases, over the run's state
    profile: ProfileAccess | None
    compactor_for: Callable[[ResolvedAgent], Compactor] | None
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    # effect marks are checkpoints: one at a time when calls run in parallel; taken without a trip through the
    # event loop when free (the usual case: one call per step), as the checkpoint it guards makes one anyway
    marking: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))
    behind: WriteBehind | None = None  # step checkpoints behind the loop (``AgentLoop.run``, durable stores)


@dataclass(slots=True, kw_only=True)
class RunCache:
    """What a run works out once and reuses; each entry follows from the run and its deps."""

    identity: RunIdentity  # ``record.identity()``, again after a handoff
    # the activation's own tools (an ACP session's MCP servers) then the client's (frontend) tools: what ``tool``
    # falls back to after the agent's tools, which win a clash
    activation_tools: dict[str, Tool]
    extra_descriptors: list[ToolDescriptor]  # the descriptors of those tools, offered to the model beside the agent's
    tools_for: tuple[ResolvedAgent, list[dict[str, Any]], dict[str, Any]] | None = None  # ``inference._offered_tools``
    compactors: dict[str, Compactor] = field(default_factory=dict[str, "Compactor"])  # one per agent


@dataclass(slots=True, kw_only=True)
class RunState:
    """One activation of one agent on one thread, as the steps see it. Built by :class:`AgentRuntime`
    (:meth:`start`)."""

    # -- what a checkpoint writes
    thread_id: str
    run_id: str
    record: RunRecord
    messages: list[Message]
    written: int  # messages[:written] are in the store
    # how many messages the store holds for the thread (more than ``messages`` when a summary replaces some)
    stored_count: int
    usage: TokenUsage
    steps: int
    response: str = ""
    state: StateStore
    fence: Fence | None  # the claim this run writes and acts under (None: not dispatched)
    open_effects: list[EffectRecord]  # the ledger's open entries, read with the thread (``recover_effects``)
    # -- its progress in memory
    inferences: int = 0
    started: float = field(default_factory=time.monotonic)
    partial_text: list[str] = field(default_factory=list[str])  # the answer streamed so far, kept if cancelled
    partial_id: str | None = None
    input_appended: bool = False
    compaction_tried: bool = False
    reasked: bool = False  # a call a dead process left running was offered for approval again
    fatal: str | None = None  # the reason a tool's raised ToolError gave to end the run
    # -- what it uses and what it keeps at hand
    deps: RunDeps
    cache: RunCache

    @classmethod
    def start(
        cls,
        *,
        agent: ResolvedAgent,
        resolve: Callable[[str], ResolvedAgent],
        activation: RunActivation,
        thread_id: str,
        record: RunRecord,
        history: list[Message],
        thread_state: Any,
        store: Store | None,
        sink: EventSink | None,
        decisions: DecisionStream | None,
        cancel: CancelToken,
        stored_count: int | None = None,
        compactor: Callable[[ResolvedAgent], Compactor] | None = None,
        open_effects: list[EffectRecord] | None = None,
    ) -> Self:
        state = StateStore()
        engine = PhaseEngine(store=state)
        extra_tools = {t.name: t for t in activation.tools if t.name not in agent.tools}
        activation_tools: dict[str, Tool] = {d.name: FrontEndTool(d) for d in reversed(activation.frontend_tools)}
        activation_tools.update(extra_tools)
        deps = RunDeps(
            agent=agent,
            resolve=resolve,
            activation=activation,
            store=store,
            ledger=store.mailbox if store is not None and store.durable else None,
            sink=sink,
            decisions=decisions,
            cancel=cancel,
            engine=engine,
            profile=ProfileAccess(store, agent.registrar.profile_keys) if store is not None else None,
            compactor_for=compactor,
        )
        cache = RunCache(
            identity=record.identity(),
            activation_tools=activation_tools,
            extra_descriptors=[t.descriptor for t in extra_tools.values()] + list(activation.frontend_tools),
        )
        run = cls(
            thread_id=thread_id,
            run_id=record.run_id,
            record=record,
            messages=history,
            written=len(history),
            stored_count=len(history) if stored_count is None else stored_count,
            usage=record.usage,
            steps=record.steps,
            state=state,
            fence=Fence.of(activation.settle),
            open_effects=open_effects or [],
            deps=deps,
            cache=cache,
        )
        run._install(agent)
        if thread_state is not None:
            state.restore_thread_scoped(thread_state, "skip")
        return run

    def _install(self, agent: ResolvedAgent) -> None:
        r = agent.registrar
        self.state.register_key(RUN_LIFECYCLE, skip_if_present=True)
        self.state.register_key(TOOL_CALL_STATES, skip_if_present=True)
        by_plugin: dict[str, list[Any]] = {}
        for key in r.keys:
            if self.state.key(key.key) is key:
                continue
            by_plugin.setdefault(r.key_owner.get(key.key, ""), []).append(key)
        for plugin_id, keys in by_plugin.items():
            self.state.install_plugin(plugin_id or "__anonymous", keys)
        engine = self.deps.engine
        engine.hooks = agent.hooks
        engine.actions = dict(r.actions)
        engine.effects = dict(r.effects)

    async def emit(self, event: AgentEvent) -> None:
        if self.deps.sink is not None:
            await self.deps.sink(event)

    async def emit_state(self) -> None:
        if self.deps.sink is not None:
            await self.emit(StateSnapshot(snapshot=self.state.export_persisted()))

    def ctx(self, phase: Phase, **fields: Any) -> Callable[[], PhaseContext]:
        def make() -> PhaseContext:
            return PhaseContext(
                phase=phase,
                snapshot=self.state.snapshot(),
                thread_id=self.thread_id,
                run_id=self.run_id,
                agent=self.deps.agent.spec,
                messages=self.messages,
                step=self.steps,
                env=self.deps.activation.env,
                profile=self.deps.profile,
                cancel=self.deps.cancel,
                run_identity=self.cache.identity,
                **fields,
            )

        return make

    def tool_ctx(
        self, phase: Phase, call: ToolCall, tool: Tool | None = None, **fields: Any
    ) -> Callable[[], PhaseContext]:
        """A context factory for the per-call phases (gate, before/after execute, decisions)."""
        return self.ctx(
            phase,
            tool_name=call.name,
            tool_call_id=call.id,
            tool_args=call.arguments,
            tool_descriptor=tool.descriptor if tool is not None else None,
            **fields,
        )

    def call_context(self, call: ToolCall, snapshot: Snapshot, state: ToolCallState | None) -> ToolCallContext:
        """What a tool sees while it runs (or works out its preview)."""
        return ToolCallContext(
            call_id=call.id,
            tool_name=call.name,
            thread_id=self.thread_id,
            run_id=self.run_id,
            agent_id=self.deps.agent.id,
            snapshot=snapshot,
            env=self.deps.activation.env,
            resume_input=state.resume_input if state else None,
            suspension_id=state.suspension_id if state else None,
            suspension_reason=state.suspension_reason if state else None,
            profile=self.deps.profile,
            cancel=self.deps.cancel,
            emit=self.emit if self.deps.sink is not None else None,
            run_identity=self.cache.identity,
        )

    async def commit(self, cmd: StateCommand) -> None:
        await self.deps.engine.submit(cmd)

    def tool_states(self) -> dict[str, ToolCallState]:
        return self.state.snapshot().get(TOOL_CALL_STATES)

    def suspended_calls(self) -> list[ToolCallState]:
        return sorted((s for s in self.tool_states().values() if s.status == "suspended"), key=lambda s: s.call_id)

    def tool(self, name: str) -> Tool | None:
        return self.deps.agent.tools.get(name) or self.cache.activation_tools.get(name)
