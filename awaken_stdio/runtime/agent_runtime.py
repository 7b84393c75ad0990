"""``AgentRuntime``: the public face of the execution core.

It owns the registries (agents, models, tools, plugins), the store, and the table of active runs (at most one per
thread). Protocol adapters and the CLI use only this API: ``run`` / ``run_to_completion`` to start or continue a
run, ``cancel`` to stop one, ``send_decisions`` to answer a live suspended run and ``resume`` to continue a waiting
run from its durable record (another process, a restart), ``compact`` to summarise a thread's older messages now.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from awaken_stdio.contract.activation import AgentRunResult, EventSink, RunActivation
from awaken_stdio.contract.agent import AgentSpec, ModelSpec
from awaken_stdio.contract.errors import (
    AgentNotFound,
    ConfigError,
    InvalidResume,
    ThreadAlreadyRunning,
    UnknownKey,
)
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.inference import LlmExecutor, TokenUsage
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import DispatchSettle, Fence
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.stores import Checkpoint, LoadedThread, RunRecord, Store, ThreadForRun
from awaken_stdio.contract.suspension import Decisions, ToolCallResume
from awaken_stdio.contract.tools import CancelToken, Tool
from awaken_stdio.runtime.compaction import (
    CompactionPolicy,
    CompactionReport,
    CompactionResult,
    Compactor,
    model_view,
)
from awaken_stdio.runtime.plugins import Plugin
from awaken_stdio.runtime.resolve import ResolvedAgent, check_plugins, explain_unknown_key, resolve_agent
from awaken_stdio.runtime.run.finish import cancel_stored, write_checkpoint
from awaken_stdio.runtime.run.loop import AgentLoop
from awaken_stdio.runtime.run.suspension import check_decisions

__all__ = ["AgentRuntime"]

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class _ActiveRun:
    thread_id: str
    run_id: str | None = None
    loop: AgentLoop | None = None
    send: MemoryObjectSendStream[Decisions] | None = None
    receive: MemoryObjectReceiveStream[Decisions] | None = None
    cancel: CancelToken | None = None
    cancel_requested: bool = False
    finished: anyio.Event = field(default_factory=anyio.Event)


class AgentRuntime:
    """Agents, models, tools and plugins, plus the runs in flight.

    ``models`` maps a model id to an executor, or to ``(executor, upstream_model_name)``. Without a ``store`` the
    runtime keeps everything in memory.

    The registrations are checked (:meth:`check`) before the first run after any of them changed, and by the
    constructor when it is given both agents and plugins: a plugin that no agent names, or a name no registered
    plugin has, is a ``ConfigError`` rather than a plugin that silently does nothing.
    """

    def __init__(
        self,
        *,
        agents: Iterable[AgentSpec] = (),
        models: Mapping[str, LlmExecutor | tuple[LlmExecutor, str]] | None = None,
        tools: Iterable[Tool] = (),
        plugins: Iterable[Plugin] = (),
        store: Store | None = None,
        default_agent: str | None = None,
    ) -> None:
        if store is None:
            from awaken_stdio.stores.memory import MemoryStore

            store = MemoryStore()
        self.store: Store = store
        self.agents: dict[str, AgentSpec] = {}
        self.models: dict[str, tuple[LlmExecutor, str]] = {}
        self.model_specs: dict[str, ModelSpec] = {}  # pricing and knowledge cutoff, when the config gave them
        self.tools: dict[str, Tool] = {}
        self.plugins: list[Plugin] = []
        self.default_agent = default_agent
        self._resolved: dict[str, ResolvedAgent] = {}
        self._resolved_from: dict[str, tuple[Any, ...]] = {}  # what each resolution read from its agent's spec
        self._checked = False
        self._compactors: dict[str, tuple[ResolvedAgent, Compactor]] = {}  # by agent, while it resolves the same
        self._active: dict[str, _ActiveRun] = {}
        for spec in agents:
            self.add_agent(spec)
        for model_id, model in (models or {}).items():
            if isinstance(model, tuple):
                self.add_model(model_id, model[0], model[1])
            else:
                self.add_model(model_id, model)
        for tool in tools:
            self.add_tool(tool)
        for plugin in plugins:
            self.add_plugin(plugin)
        if self.agents and self.plugins:
            check_plugins(self)

    # -- registries ---------------------------------------------------------------------------------------------

    def add_agent(self, spec: AgentSpec) -> AgentRuntime:
        self.agents[spec.id] = spec
        self._changed()
        return self

    def add_model(
        self, model_id: str, executor: LlmExecutor, model_name: str | None = None, *, spec: ModelSpec | None = None
    ) -> AgentRuntime:
        self.models[model_id] = (executor, model_name or model_id)
        if spec is not None:
            self.model_specs[model_id] = spec
        self._changed()
        return self

    def add_tool(self, tool: Tool, *, replace: bool = False) -> AgentRuntime:
        if tool.name in self.tools and not replace:
            from awaken_stdio.contract.errors import ToolAlreadyRegistered

            raise ToolAlreadyRegistered(tool.name)
        self.tools[tool.name] = tool
        self._changed()
        return self

    def remove_tool(self, name: str) -> None:
        if self.tools.pop(name, None) is not None:
            self._changed()

    def add_plugin(self, plugin: Plugin) -> AgentRuntime:
        """Register ``plugin``: active for the agents whose ``plugins`` name it, or for all if ``always_active``.

        Runs started from now on use it; a run in flight keeps the plugins it started with."""
        if any(p.name == plugin.name for p in self.plugins):
            raise ConfigError(f"a plugin named {plugin.name!r} is already registered (a plugin's name is its id)")
        self.plugins.append(plugin)
        self._changed()
        return self

    def remove_plugin(self, name: str) -> None:
        """Unregister the plugin ``name``; agents still naming it fail their next run, saying so."""
        if any(p.name == name for p in self.plugins):
            self.plugins = [p for p in self.plugins if p.name != name]
            self._changed()

    def _changed(self) -> None:
        self._resolved.clear()
        self._checked = False

    def check(self) -> None:
        """Raise the first problem of the registrations: a plugin no agent uses, a plugin name no registered plugin
        has, an agent that does not resolve (a model or delegate not defined, two of its plugins registering one
        key, ...). Runs by itself before the first run after a change; call it to fail at start-up instead."""
        self._changed()
        check_plugins(self)
        for agent_id in self.agents:
            self._resolve(agent_id)
        self._checked = True

    def resolve(self, agent_id: str) -> ResolvedAgent:
        """Everything a run of ``agent_id`` uses. Re-resolved when its spec changed since (its plugins, tools,
        model...: an ``AgentSpec`` is mutable), so such a change applies to the next run."""
        resolved = self._resolved.get(agent_id)
        if resolved is None or self._resolved_from[agent_id] != _resolved_from(self.agents.get(agent_id)):
            if resolved is not None or not self._checked:
                self.check()  # a changed spec may leave a plugin unused, or name one not registered
            resolved = self._resolved.get(agent_id) or self._resolve(agent_id)
        return resolved

    def _resolve(self, agent_id: str) -> ResolvedAgent:
        resolved = self._resolved[agent_id] = resolve_agent(self, agent_id, self.run)
        self._resolved_from[agent_id] = _resolved_from(resolved.spec)
        return resolved

    def default_agent_id(self) -> str:
        if self.default_agent:
            return self.default_agent
        if "default" in self.agents:
            return "default"
        if len(self.agents) == 1:
            return next(iter(self.agents))
        raise AgentNotFound("default (several agents are defined and none is the default)")

    # -- runs ---------------------------------------------------------------------------------------------------

    def is_running(self, thread_id: str) -> bool:
        return thread_id in self._active

    def active_run_id(self, thread_id: str) -> str | None:
        active = self._active.get(thread_id)
        return active.run_id if active else None

    async def run(self, activation: RunActivation | str, sink: EventSink | None = None) -> AgentRunResult:
        """Run (or continue) an agent on a thread; events go to ``sink`` as they happen.

        Raises ``ThreadAlreadyRunning`` when the thread has an active run; an inference or storage failure
        raises after an ``error`` event (there is no ``run_finish`` then).
        """
        if isinstance(activation, str):
            activation = RunActivation(messages=[Message.user(activation)])
        activation.validate()
        thread_id = activation.thread_id or new_id()
        if thread_id in self._active:
            raise ThreadAlreadyRunning(thread_id)
        active = self._active[thread_id] = _ActiveRun(thread_id=thread_id)  # claimed before the first await
        try:
            loop = await self._prepare(activation, thread_id, sink, active)
            if active.cancel_requested:
                loop.deps.cancel.cancel()
                loop.deps.cancel_scope.cancel()
            try:
                return await loop.run()
            except UnknownKey as exc:  # the state engine knows the key's name only: say whose key it is
                raise UnknownKey(exc.key, explain_unknown_key(self, loop.deps.agent.id, exc.key)) from exc
        finally:
            if active.send is not None and active.receive is not None:
                active.send.close()
                active.receive.close()
            del self._active[thread_id]
            active.finished.set()

    async def run_to_completion(self, activation: RunActivation | str) -> AgentRunResult:
        return await self.run(activation, None)

    async def _prepare(
        self, activation: RunActivation, thread_id: str, sink: EventSink | None, active: _ActiveRun
    ) -> AgentLoop:
        # a thread id made just now names nothing stored yet; a dispatcher's claim read it already
        if activation.loaded is not None:
            loaded, effects = activation.loaded
        elif activation.thread_id:
            loaded, effects = await self.store.load_thread_for_run(thread_id)
        else:
            loaded, effects = None, []
        history = model_view(list(loaded.messages)) if loaded else []  # the store keeps what a summary replaced
        latest = loaded.latest_run if loaded else None
        persisted = _persisted_agent(loaded)
        if persisted not in self.agents:
            persisted = None
        agent_id = activation.agent_id or persisted or self.default_agent_id()
        agent = self.resolve(agent_id)
        record = await self._run_record(activation, thread_id, agent_id, latest)
        active.run_id = record.run_id
        if activation.wait_for_decisions:
            active.send, active.receive = anyio.create_memory_object_stream[Decisions](64)
        active.cancel = CancelToken()
        loop = AgentLoop.start(
            agent=agent,
            resolve=self.resolve,
            activation=activation,
            thread_id=thread_id,
            record=record,
            history=history,
            thread_state=loaded.state if loaded else None,
            store=self.store,
            sink=sink,
            decisions=active.receive,
            cancel=active.cancel,
            stored_count=len(loaded.messages) if loaded else 0,
            compactor=self.compactor,
            open_effects=effects,
        )
        if activation.decisions:
            check_decisions(loop, activation.decisions)
        active.loop = loop
        return loop

    async def _run_record(
        self, activation: RunActivation, thread_id: str, agent_id: str, latest: RunRecord | None
    ) -> RunRecord:
        """Pick the run: an explicit continuation, the thread's waiting run when deciding, else a new one."""
        if activation.continue_run_id:
            # usually the thread's latest run (``resume``, a live waiting run): already loaded with the thread
            same = latest is not None and latest.run_id == activation.continue_run_id
            record = latest if same else await self.store.load_run(activation.continue_run_id)
            if record is None or record.thread_id != thread_id:
                raise InvalidResume(f"run {activation.continue_run_id} does not exist on thread {thread_id}")
            if record.status == "done":
                raise InvalidResume(f"run {record.run_id} has already finished ({record.display_status})")
            if activation.decisions and record.status != "waiting":  # decided meanwhile, e.g. by another process
                raise InvalidResume(f"run {record.run_id} is not waiting ({record.display_status})")
            return record
        if latest is not None and latest.status == "waiting":
            if activation.decisions:
                return latest
            if activation.has_visible_user_message:  # its waiting calls are superseded by the new message
                latest.status = "done"
                latest.termination = TerminationReason.cancelled()
                latest.status_reason = "superseded"
                latest.waiting = None
                latest.updated_at = now_ms()
                await self.store.save_run(latest)
        if activation.run_id and not activation.run_id_is_new:
            existing = await self.store.load_run(activation.run_id)
            if existing is not None and existing.status != "created":
                raise InvalidResume(f"run id {activation.run_id} is already used")
        return RunRecord(
            run_id=activation.run_id or new_id(),
            thread_id=thread_id,
            agent_id=agent_id,
            parent_run_id=activation.parent_run_id,
            parent_thread_id=activation.parent_thread_id,
            parent_tool_call_id=activation.parent_tool_call_id,
            session_id=activation.session_id,
            origin=activation.origin,
            cwd=activation.env.cwd,
        )

    async def resume(
        self,
        run_id: str,
        decisions: Decisions,
        sink: EventSink | None = None,
        *,
        record: RunRecord | None = None,
        context: RunActivation | None = None,
        settle: DispatchSettle | None = None,
        loaded: ThreadForRun | None = None,
    ) -> AgentRunResult:
        """Continue a waiting run from the store with ``decisions`` (any process, after any restart). ``record``:
        the run as the caller read it already (its thread, agent and context; whether it still waits is checked
        on the run loaded with its thread). ``context``: where it resumes (the ``env``, ``tools`` and
        ``system_prompt`` of an activation; default: the run's recorded directory). ``settle`` and ``loaded`` as
        :class:`RunActivation`'s."""
        if record is None or record.run_id != run_id:
            record = await self.store.load_run(run_id)
        if record is None:
            raise InvalidResume(f"run {run_id} not found")
        if record.status != "waiting":
            raise InvalidResume(f"run {run_id} is not waiting ({record.display_status})")
        context = context or RunActivation()
        env = context.env if context.env.cwd else replace(context.env, cwd=record.cwd)
        return await self.run(
            RunActivation(
                thread_id=record.thread_id,
                agent_id=record.agent_id,
                decisions=decisions,
                continue_run_id=run_id,
                session_id=record.session_id,
                origin=record.origin,
                env=env,
                tools=context.tools,
                system_prompt=context.system_prompt,
                settle=settle,
                loaded=loaded,
            ),
            sink,
        )

    # -- compaction -----------------------------------------------------------------------------------------------

    def compactor(self, agent: ResolvedAgent) -> Compactor:
        """The agent's compaction policy with the model that writes its summaries (``summary_model`` or its own).

        One per agent while its registrations stay the same: the compactor's running token totals outlive a run,
        so deciding whether to compact costs the same at any conversation length."""
        held = self._compactors.get(agent.id)
        if held is not None and held[0] is agent:
            return held[1]
        policy = CompactionPolicy.from_section(agent.spec.sections.get("compaction"))
        executor, model_name = agent.executor, agent.model_name
        if policy.summary_model is not None:
            model = self.models.get(policy.summary_model)
            if model is None:
                raise ConfigError(f"agent {agent.id!r}: summary_model {policy.summary_model!r} is not defined")
            executor, model_name = model
        window = agent.executor.capabilities(agent.model_name).context_window
        compactor = Compactor(policy, executor, model_name, window)
        self._compactors[agent.id] = (agent, compactor)
        return compactor

    def cost(self, model_id: str, usage: TokenUsage) -> float | None:
        """What ``usage`` of the model ``model_id`` cost in US dollars; ``None`` when its pricing is unknown."""
        spec = self.model_specs.get(model_id)
        return spec.pricing.cost(usage) if spec is not None and spec.pricing is not None else None

    async def compact(
        self, thread_id: str, agent_id: str | None = None, sink: EventSink | None = None
    ) -> CompactionResult:
        """Summarise the thread's older messages now, whatever their size (ACP ``/compact``); what it does is told
        to ``sink`` (``CompactionReport``).

        The thread is claimed meanwhile, as by a run. The summary is appended to the durable log (nothing is
        deleted); messages another process appends during the summary call stay after its boundary, so they remain
        in the model's view.
        """
        if thread_id in self._active:
            raise ThreadAlreadyRunning(thread_id)
        active = self._active[thread_id] = _ActiveRun(thread_id=thread_id)
        try:
            loaded = await self.store.load_thread(thread_id)
            if loaded is None or not loaded.messages:
                return CompactionResult(summary=None, reason="the conversation is empty")
            agent = self.resolve(agent_id or _persisted_agent(loaded) or self.default_agent_id())
            report = CompactionReport(sink) if sink is not None else None
            result = await self.compactor(agent).compact(model_view(loaded.messages), report)
            if result.summary is not None:
                await self._append(thread_id, result.summary)
            return result
        finally:
            del self._active[thread_id]
            active.finished.set()

    async def _append(self, thread_id: str, message: Message) -> None:
        """Append one message outside a run: a checkpoint re-saving the latest run record as it is."""

        def after(loaded: LoadedThread | None) -> Checkpoint:  # after whatever another writer appended meanwhile
            assert loaded is not None and loaded.latest_run is not None  # a thread with messages has had a run
            return Checkpoint(
                thread_id=thread_id,
                expected_message_count=loaded.thread.message_count,
                messages=[message],
                run=loaded.latest_run,
            )

        await write_checkpoint(self.store, thread_id, after)

    async def cancel(self, id: str) -> bool:
        """Cancel the active run of a thread (by thread id or run id). False when nothing is running."""
        active = self._active.get(id)
        if active is None:
            matches = [a for a in self._active.values() if a.run_id == id]
            if len(matches) != 1:
                return False
            active = matches[0]
        active.cancel_requested = True
        if active.loop is not None:
            active.loop.deps.cancel.cancel()
            active.loop.deps.cancel_scope.cancel()
        return True

    async def cancel_waiting(self, run_id: str, fence: Fence | None = None) -> AgentRunResult | None:
        """End a run that waits in the store (or died running) and that no process runs, as cancelled, its
        suspended calls answered as a live run's are. None when the run does not exist or is over already.
        ``fence``: the claim the canceller holds (its write commits only while it is current)."""
        return await cancel_stored(self.store, run_id, fence)

    async def cancel_and_wait(self, thread_id: str, timeout_s: float = 5.0) -> bool:
        active = self._active.get(thread_id)
        if active is None or not await self.cancel(thread_id):
            return False
        with anyio.move_on_after(timeout_s):
            await active.finished.wait()
        return active.finished.is_set()

    async def send_decisions(self, thread_id: str, decisions: Decisions) -> bool:
        """Deliver decisions to the live run of ``thread_id``; False when it has no live decision channel."""
        active = self._active.get(thread_id)
        if active is None or active.send is None:
            return False
        try:
            active.send.send_nowait(list(decisions))
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def send_decision(self, thread_id: str, target_id: str, decision: ToolCallResume) -> bool:
        return await self.send_decisions(thread_id, [(target_id, decision)])

    async def aclose(self) -> None:
        for thread_id in list(self._active):
            await self.cancel_and_wait(thread_id)
        await self.store.aclose()


def _resolved_from(spec: AgentSpec | None) -> tuple[Any, ...]:
    """What a resolution reads from the spec, to see whether the spec changed since (its lists are mutable)."""
    if spec is None:
        return ()
    lists = (spec.tools, spec.excluded_tools, spec.delegates, spec.plugins, spec.active_hook_filter)
    return (id(spec), spec.model, *(tuple(items) for items in lists))


def _persisted_agent(loaded: LoadedThread | None) -> str | None:
    """The agent a thread last ran with: a handoff's choice, else the latest run's."""
    if loaded is None:
        return None
    if loaded.state is not None:
        agent = loaded.state.extensions.get("agent_handoff.active_agent_id")
        if isinstance(agent, str) and agent:
            return agent
    return loaded.latest_run.agent_id if loaded.latest_run else None
