"""What one run holds, and the small questions every step asks of it.

The conversation (with how much of it the store already has), the run record, usage and step count, the run's
:class:`StateStore` and :class:`PhaseEngine`, the event sink, the effect ledger and the tools in reach. The step
modules beside this one are functions of a :class:`RunState`; :class:`~awaken_stdio.runtime.run.loop.AgentLoop`
is the run state that drives them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.contract.activation import EventSink, RunActivation
from awaken_stdio.contract.events import AgentEvent, StateSnapshot
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import EffectRecord, Fence, MailboxStore
from awaken_stdio.contract.messages import Message, ToolCall
from awaken_stdio.contract.profile import ProfileAccess
from awaken_stdio.contract.state import Snapshot, StateCommand
from awaken_stdio.contract.stores import RunRecord, Store
from awaken_stdio.contract.tools import CancelToken, Tool, ToolCallContext
from awaken_stdio.runtime.frontend import FrontEndTool
from awaken_stdio.runtime.phases import PhaseEngine
from awaken_stdio.runtime.plugins import Phase, PhaseContext
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, TOOL_CALL_STATES, ToolCallState
from awaken_stdio.runtime.state_store import StateStore

if TYPE_CHECKING:
    from anyio.streams.memory import MemoryObjectReceiveStream

    from awaken_stdio.contract.suspension import Decisions
    from awaken_stdio.runtime.compaction import Compactor
    from awaken_stdio.runtime.resolve import ResolvedAgent
    from awaken_stdio.runtime.run.behind import WriteBehind

    DecisionStream = MemoryObjectReceiveStream[Decisions]

__all__ = ["RunState", "StopRun"]


class StopRun(Exception):
    """Internal: a step decided the run ends with ``termination``."""

    def __init__(self, termination: TerminationReason) -> None:
        self.termination = termination


class RunState:
    """One activation of one agent on one thread, as the steps see it. Built by :class:`AgentRuntime`."""

    def __init__(
        self,
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
    ) -> None:
        self.agent = agent
        self.resolve = resolve
        self.activation = activation
        self.thread_id = thread_id
        self.run_id = record.run_id
        self.record = record
        self.messages = history
        self.written = len(history)  # messages[:written] are in the store
        # how many messages the store holds for the thread (more than ``history`` when a summary replaces some)
        self.stored_count = len(history) if stored_count is None else stored_count
        self.compactor_for = compactor
        self.compactors: dict[str, Compactor] = {}
        self.compaction_tried = False
        self.store = store
        self.sink = sink
        self.decisions = decisions
        self.cancel = cancel
        self.cancel_scope = anyio.CancelScope()
        self.usage = record.usage
        self.steps = record.steps
        self.response = ""
        self.inferences = 0
        self.started = time.monotonic()
        self.partial_text: list[str] = []
        self.partial_id: str | None = None
        self.input_appended = False
        # the activation's own tools (an ACP session's MCP servers); the agent's registered tools win a clash
        self.extra_tools = {t.name: t for t in activation.tools if t.name not in agent.tools}
        # what ``tool`` falls back to after the agent's tools: extra tools, then the client's (frontend) tools
        self.activation_tools: dict[str, Tool] = {d.name: FrontEndTool(d) for d in reversed(activation.frontend_tools)}
        self.activation_tools.update(self.extra_tools)
        self.extra_descriptors = [t.descriptor for t in self.extra_tools.values()] + list(activation.frontend_tools)
        self.tools_for: tuple[ResolvedAgent, list[dict[str, Any]], dict[str, Any]] | None = None
        self.reasked = False  # a call a dead process left running was offered for approval again
        self.fatal: str | None = None  # the reason a tool's raised ToolError gave to end the run
        # the effect ledger settles calls a dead process left behind: nothing survives one in memory
        self.ledger: MailboxStore | None = store.mailbox if store is not None and store.durable else None
        self.fence = Fence.of(activation.settle)  # the claim this run writes and acts under (None: not dispatched)
        # effect marks are checkpoints: one at a time when calls run in parallel; taken without a trip through the
        # event loop when free (the usual case: one call per step), as the checkpoint it guards makes one anyway
        self.marking = anyio.Lock(fast_acquire=True)
        self.open_effects = open_effects or []  # the ledger's open entries, read with the thread (``recover_effects``)
        self.behind: WriteBehind | None = None  # step checkpoints behind the loop (``AgentLoop.run``, durable stores)
        self.state = StateStore()
        self.engine = PhaseEngine(self.state)
        self.profile: ProfileAccess | None = None
        self.identity = record.identity()
        self._install(agent)
        if thread_state is not None:
            self.state.restore_thread_scoped(thread_state, "skip")

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
        self.engine.hooks = agent.hooks
        self.engine.actions = dict(r.actions)
        self.engine.effects = dict(r.effects)
        if self.store is not None:
            self.profile = ProfileAccess(self.store, r.profile_keys)

    async def emit(self, event: AgentEvent) -> None:
        if self.sink is not None:
            await self.sink(event)

    async def emit_state(self) -> None:
        if self.sink is not None:
            await self.emit(StateSnapshot(self.state.export_persisted()))

    def ctx(self, phase: Phase, **fields: Any) -> Callable[[], PhaseContext]:
        def make() -> PhaseContext:
            return PhaseContext(
                phase,
                self.state.snapshot(),
                self.thread_id,
                self.run_id,
                self.agent.spec,
                self.messages,
                step=self.steps,
                cwd=self.activation.cwd,
                profile=self.profile,
                cancel=self.cancel,
                services=self.activation.services,
                run_identity=self.identity,
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
            call.id,
            call.name,
            self.thread_id,
            self.run_id,
            self.agent.id,
            snapshot,
            cwd=self.activation.cwd,
            resume_input=state.resume_input if state else None,
            suspension_id=state.suspension_id if state else None,
            suspension_reason=state.suspension_reason if state else None,
            profile=self.profile,
            cancel=self.cancel,
            services=self.activation.services,
            emit=self.emit if self.sink is not None else None,
            run_identity=self.identity,
        )

    async def commit(self, cmd: StateCommand) -> None:
        await self.engine.submit(cmd)

    def tool_states(self) -> dict[str, ToolCallState]:
        return self.state.snapshot().get(TOOL_CALL_STATES)

    def suspended_calls(self) -> list[ToolCallState]:
        return sorted((s for s in self.tool_states().values() if s.status == "suspended"), key=lambda s: s.call_id)

    def tool(self, name: str) -> Tool | None:
        return self.agent.tools.get(name) or self.activation_tools.get(name)
