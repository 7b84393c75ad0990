"""The agent loop: one run of one agent on one thread.

``RunStart -> [StepStart -> BeforeInference -> inference -> AfterInference -> tools -> StepEnd]* -> RunEnd``.
State is committed through the run's :class:`StateStore`; the conversation and the run record reach the durable
store only at checkpoints (every step end, before anyone is asked anything, at the end), never per event.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.contract.errors import (
    DecisionTargetNotFound,
    ProviderError,
    ToolError,
    ToolFailure,
    VersionConflict,
)
from awaken_stdio.contract.events import (
    AgentEvent,
    ErrorEvent,
    InferenceComplete,
    ReasoningDelta,
    RunFinish,
    RunResult,
    RunStart,
    StateSnapshot,
    StepEnd,
    StepStart,
    TextDelta,
    ToolCallDelta,
    ToolCallDone,
    ToolCallReady,
    ToolCallResumed,
    ToolCallStart,
)
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.inference import (
    InferenceRequest,
    ReasoningChunk,
    StreamAccumulator,
    StreamResult,
    TextChunk,
    ToolCallChunk,
)
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.mailbox import EffectRecord, MailboxStore
from awaken_stdio.contract.messages import Message, TextBlock, ToolCall, valid_text, valid_value
from awaken_stdio.contract.profile import ProfileAccess
from awaken_stdio.contract.state import MutationBatch, Snapshot, StateCommand
from awaken_stdio.contract.stores import Checkpoint, RunRecord, Store, WaitingState, WaitingTicket
from awaken_stdio.contract.suspension import (
    OUTCOME_UNKNOWN_ACTION,
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCallResume,
    waiting_reason_for,
)
from awaken_stdio.contract.tools import (
    CancelToken,
    Tool,
    ToolCallContext,
    ToolOutput,
    ToolResult,
    preview_call,
    tool_error_result,
)
from awaken_stdio.runtime.activation import AgentRunResult, EventSink, RunActivation
from awaken_stdio.runtime.compaction import Compactor, model_view
from awaken_stdio.runtime.executors import INTERRUPTED, CallResult, executor_for
from awaken_stdio.runtime.frontend import FrontEndTool
from awaken_stdio.runtime.phases import PhaseEngine
from awaken_stdio.runtime.plugins import Block, GateDecision, Phase, PhaseContext, SetResult, Suspend
from awaken_stdio.runtime.runtime_keys import (
    RUN_LIFECYCLE,
    TOOL_CALL_STATES,
    LifecycleUpdate,
    ToolCallState,
    ToolCallStatesUpdate,
)
from awaken_stdio.runtime.state_store import StateStore

if TYPE_CHECKING:
    from awaken_stdio.runtime.resolve import ResolvedAgent

__all__ = ["AgentLoop"]

log = logging.getLogger(__name__)

_GATE_PRIORITY = {Block: 3, Suspend: 2, SetResult: 1}
CHECKPOINT_RETRIES = 8  # checkpoints lost to other writers' appends before giving up
_RAW_ARGUMENTS = "__raw_arguments"  # what StreamAccumulator keeps of arguments that did not parse
SUPERSEDED = "[tool call superseded by a new user message]"
_CANCELLED_WITH_RUN = "[tool call cancelled with the run]"
_AWAITING_APPROVAL = "Tool '{}' suspended: awaiting approval"


class _StopRun(Exception):
    """Internal: a step decided the run ends with ``termination``."""

    def __init__(self, termination: TerminationReason) -> None:
        self.termination = termination


class AgentLoop:
    """Runs one activation to its end (or to a suspension). Built and driven by :class:`AgentRuntime`."""

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
        decisions: anyio.abc.ObjectReceiveStream[list[tuple[str, ToolCallResume]]] | None,
        cancel: CancelToken,
        stored_count: int | None = None,
        compactor: Callable[[ResolvedAgent], Compactor] | None = None,
    ) -> None:
        self.agent = agent
        self._resolve = resolve
        self.activation = activation
        self.thread_id = thread_id
        self.run_id = record.run_id
        self.record = record
        self.messages = history
        self.written = len(history)  # messages[:written] are in the store
        # how many messages the store holds for the thread (more than ``history`` when a summary replaces some)
        self.stored_count = len(history) if stored_count is None else stored_count
        self._compactor = compactor
        self._compactors: dict[str, Compactor] = {}
        self._compaction_tried = False
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
        self._input_appended = False
        # the activation's own tools (an ACP session's MCP servers); the agent's registered tools win a clash
        self.extra_tools = {t.name: t for t in activation.tools if t.name not in agent.tools}
        # what _tool falls back to after the agent's tools: extra tools, then the client's (frontend) tools
        self._activation_tools: dict[str, Tool] = {d.name: FrontEndTool(d) for d in reversed(activation.frontend_tools)}
        self._activation_tools.update(self.extra_tools)
        self._extra_descriptors = [t.descriptor for t in self.extra_tools.values()] + list(activation.frontend_tools)
        self._tools_for: tuple[ResolvedAgent, list[dict[str, Any]], dict[str, Any]] | None = None
        self._reasked = False  # a call a dead process left running was offered for approval again
        self._fatal: str | None = None  # the reason a tool's raised ToolError gave to end the run
        self.ledger: MailboxStore | None = store.mailbox if store is not None else None
        self.partial_id: str | None = None
        self.state = StateStore()
        self.engine = PhaseEngine(self.state)
        self.profile: ProfileAccess | None = None
        self.identity = record.identity()
        self._install(agent)
        if thread_state is not None:
            self.state.restore_thread_scoped(thread_state, "skip")

    # -- setup --------------------------------------------------------------------------------------------------

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

    async def commit(self, cmd: StateCommand) -> None:
        await self.engine.submit(cmd)

    def tool_states(self) -> dict[str, ToolCallState]:
        return self.state.snapshot().get(TOOL_CALL_STATES)

    # -- the run ------------------------------------------------------------------------------------------------

    async def run(self) -> AgentRunResult:
        termination: TerminationReason | None = None
        error: BaseException | None = None
        try:
            with self.cancel_scope:
                try:
                    termination = await self._run()
                except _StopRun as stop:
                    termination = stop.termination
                except Exception as exc:
                    error = exc
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (the caller's scope, a delegating parent's tool task): record the run
            # cancelled like ``AgentRuntime.cancel`` does, then let the cancellation go on.
            self.cancel.cancel()
            with anyio.CancelScope(shield=True):
                await self._finish_or_fail(TerminationReason.cancelled())
            raise
        cancelled_while_suspending = (
            self.cancel.cancelled and termination is not None and termination.type == "suspended"
        )
        if self.cancel_scope.cancelled_caught or cancelled_while_suspending or (termination is None and error is None):
            # a cancel that lands while the run reports its suspension (e.g. from the sink) meets no await
            # afterwards: the run must still end cancelled, not wait for a decision nobody will give
            termination = TerminationReason.cancelled()
        with anyio.CancelScope(shield=True):
            if error is not None:
                await self._fail(error)
                raise error
            assert termination is not None
            if termination.type != "suspended":
                failure = await self._finish_or_fail(termination)
                if failure is not None:
                    raise failure
        return self._result(termination)

    async def _run(self) -> TerminationReason:
        await self.emit(RunStart(self.thread_id, self.run_id, self.agent.id, self.activation.parent_run_id))
        resumed_targets = await self._prepare()
        if self.record.status == "waiting" or resumed_targets:
            await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_running()))
        if self._reasked and not resumed_targets and self._suspended_calls():
            self._append_input()
            outcome = await self._suspend_and_wait()
            if outcome is not None:
                return outcome
        elif resumed_targets:
            blocked = await self._replay(resumed_targets)
            self._append_input()  # after the replayed results: a tool result must follow its call
            if blocked is not None:
                return blocked
            if self._suspended_calls():
                outcome = await self._suspend_and_wait()
                if outcome is not None:
                    return outcome
        await self.engine.run_phase(Phase.RUN_START, self.ctx(Phase.RUN_START))
        while True:
            termination = await self._step()
            if termination is None:
                continue
            if termination.type != "suspended":
                return termination
            outcome = await self._suspend_and_wait()
            if outcome is not None:
                return outcome

    async def _prepare(self) -> list[str]:
        """Start the lifecycle, supersede stale suspensions, append the new messages, apply seeded decisions."""
        a = self.activation
        lifecycle = StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.start(self.run_id))
        batch = MutationBatch()
        for plugin in self.agent.plugins:
            plugin.on_activate(self.agent.spec, batch)
        lifecycle.patch.extend(batch)
        await self.commit(lifecycle)
        stale = await self._recover_effects()
        if a.has_visible_user_message and not a.decisions:
            await self._cancel_suspended(SUPERSEDED)
        decisions = [(t, d) for t, d in a.decisions if d.decision_id not in stale]
        if decisions:
            targets = await self._apply_decisions(decisions)
            if targets:
                return targets
        self._append_input()
        return []

    def _append_input(self) -> None:
        """Append the activation's messages (once)."""
        if not self._input_appended:
            self._input_appended = True
            for m in self.activation.messages:
                self.messages.append(m if m.run_id else replace(m, run_id=self.run_id))
                self.record.input_message_ids.append(m.id)

    async def _recover_effects(self) -> set[str]:
        """Settle the calls a dead process left behind, from the effect ledger.

        A call that finished but whose result never reached the conversation is reported with its recorded result
        (not run again); one that started and never finished is marked ``unknown_after_crash`` and offered for
        approval again, saying so. Returns the ids of the decisions those unknown attempts ran under: they cannot
        approve the call a second time.
        """
        if self.ledger is None:
            return set()
        answered = {m.tool_call_id for m in self.messages if m.role == "tool"}
        calls = {c.id: c for m in self.messages for c in m.tool_calls}
        states = self.tool_states()
        wanted = {c for c, s in states.items() if s.status in ("suspended", "resuming", "running")}
        wanted.update(c for c in calls if c not in answered)
        effects = [
            e for e in await self.ledger.open_effects(self.thread_id, sorted(wanted)) if e.call_id not in answered
        ]
        if not effects:
            return set()
        with anyio.CancelScope(shield=True):
            started = [e.call_id for e in effects if e.status == "started"]
            await self.ledger.mark_effects_unknown(self.thread_id, started, now_ms())
        for e in effects:
            state = states.get(e.call_id)
            result = ToolResult.from_json(e.result) if e.status == "finished" and e.result is not None else None
            if e.status == "finished" and (result is None or result.is_pending):
                continue
            if e.status == "unknown_after_crash" and state is not None and state.status == "suspended":
                continue  # already offered again
            call = calls.get(e.call_id) or ToolCall(e.call_id, e.tool_name, e.arguments)
            if e.call_id not in calls:  # its step was never committed: the call joins the conversation now
                self.messages.append(Message("assistant", (), (call,), run_id=self.run_id))
            if result is not None:
                put = ToolCallStatesUpdate.put(ToolCallState(call.id, call.name, call.arguments, "resuming"))
                await self.commit(StateCommand().update(TOOL_CALL_STATES, put))
                await self._commit_call(CallResult(call, result), resumed=True)
                continue
            message = (
                f"The earlier attempt of tool '{call.name}' was interrupted (the process stopped) and its outcome "
                "is unknown; approve to run it again"
            )
            ticket = SuspendTicket(
                Suspension(f"perm_{call.id}", OUTCOME_UNKNOWN_ACTION, message, call.arguments),
                PendingToolCall(f"perm_{call.id}", "permission_confirm", call.arguments),
                "replay_tool_call",
            )
            await self._suspend_call(call, ticket, message, {"unknown_after_crash": True})
            self._reasked = True
        return {e.decision_id for e in effects if e.status != "finished" and e.decision_id}

    def check_decisions(self, decisions: list[tuple[str, ToolCallResume]]) -> None:
        """Refuse an activation whose decisions name no call of the thread, before the run starts or changes."""
        states = self.tool_states()
        for target, _ in decisions:
            if _decision_target(states, target) is None:
                raise DecisionTargetNotFound(target)

    async def _apply_decisions(self, decisions: list[tuple[str, ToolCallResume]]) -> list[str]:
        """Move each targeted suspended call to resuming (resume) or cancelled (cancel); returns the call ids.

        An activation's decisions were checked by :meth:`check_decisions`; live decisions for a call this run does
        not know are logged and dropped, so a stale answer cannot kill a run.
        """
        states = self.tool_states()
        cmd = StateCommand()
        targets: list[str] = []
        for target, decision in decisions:
            state = _decision_target(states, target)
            if state is None:
                log.warning("run %s: dropping a decision for unknown call or suspension %s", self.run_id, target)
                continue
            if state.status != "suspended" or state.call_id in targets:
                continue  # a duplicate delivery of an applied decision: idempotent
            status = "resuming" if decision.action == "resume" else "cancelled"
            new = replace(state, status=status, resume_input=decision, updated_at=now_ms())
            cmd.update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(new))
            targets.append(state.call_id)
            make = self.tool_ctx(
                Phase.TOOL_GATE, ToolCall(state.call_id, state.tool_name, state.arguments), resume_input=decision
            )
            for plugin in self.agent.plugins:
                await plugin.on_decision(make(), decision)
        await self.commit(cmd)
        return sorted(targets)

    def _suspended_calls(self) -> list[ToolCallState]:
        return sorted((s for s in self.tool_states().values() if s.status == "suspended"), key=lambda s: s.call_id)

    # -- one step -----------------------------------------------------------------------------------------------

    async def _step(self) -> TerminationReason | None:
        if self.cancel.cancelled:
            return TerminationReason.cancelled()
        await self._maybe_handoff()
        assistant_id = new_id()
        await self.emit(StepStart(assistant_id, self.steps + 1))
        await self.commit(StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.clear()))
        await self.engine.run_phase(Phase.STEP_START, self.ctx(Phase.STEP_START))
        before = await self.engine.collect_commands(Phase.BEFORE_INFERENCE, self.ctx(Phase.BEFORE_INFERENCE))
        await self.commit(before)
        await self.engine.run_actions(Phase.BEFORE_INFERENCE, self.ctx(Phase.BEFORE_INFERENCE))
        await self._compact_if_needed()

        response = await self._infer(assistant_id)
        await self.engine.run_phase(Phase.AFTER_INFERENCE, self.ctx(Phase.AFTER_INFERENCE, response=response))

        message = Message(
            "assistant",
            (TextBlock(response.text),) if response.text else (),
            tuple(response.tool_calls),
            thinking=tuple(response.thinking),
            id=assistant_id,
            run_id=self.run_id,
        )
        if response.text or response.tool_calls or response.thinking:
            self.messages.append(message)
        if response.text:
            self.response = response.text

        stop = self._stop_policy(response)
        if stop is not None:
            await self._complete_step()
            return stop
        if not response.tool_calls:
            await self._complete_step()
            if response.stop_reason in ("max_tokens", "refusal"):
                return TerminationReason.stopped(response.stop_reason, f"the model stopped: {response.stop_reason}")
            return TerminationReason.natural()

        blocked = await self._run_tools(response.tool_calls)
        suspended = bool(self._suspended_calls())
        if suspended and blocked is None:
            await self._set_waiting()
        await self._complete_step()
        if blocked is not None:
            return blocked
        return TerminationReason.suspended() if suspended else None

    async def _complete_step(self) -> None:
        self.steps += 1
        await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.step_completed()))
        await self.engine.run_phase(Phase.STEP_END, self.ctx(Phase.STEP_END))
        await self.checkpoint()
        await self._emit_state()
        await self.emit(StepEnd(self.steps))

    async def _emit_state(self) -> None:
        if self.sink is not None:
            await self.emit(StateSnapshot(self.state.export_persisted()))

    def _stop_policy(self, response: StreamResult) -> TerminationReason | None:
        spec = self.agent.spec
        if response.tool_calls and spec.max_rounds and self.inferences >= spec.max_rounds:
            return TerminationReason.stopped("max_rounds", f"reached {spec.max_rounds} rounds")
        if spec.max_tokens is not None and self.usage.total_tokens >= spec.max_tokens:
            return TerminationReason.stopped(
                "token_budget", f"used {self.usage.total_tokens} of {spec.max_tokens} tokens"
            )
        if spec.timeout_s is not None and time.monotonic() - self.started >= spec.timeout_s:
            return TerminationReason.stopped("timeout", f"ran longer than {spec.timeout_s:g} s")
        return None

    # -- inference ----------------------------------------------------------------------------------------------

    async def _compact_if_needed(self) -> None:
        """Summarise the older turns first when the request nears the model's context window.

        Tried once a run: its kept suffix is the whole latest user turn, so a second plan could not cut later. A
        failed summary is logged and the inference goes ahead with the whole conversation.
        """
        if self._compactor is None or self._compaction_tried:
            return
        compactor = self._compactors.get(self.agent.id)  # one per agent for the run: it caches estimates
        if compactor is None:
            compactor = self._compactors[self.agent.id] = self._compactor(self.agent)
        view = model_view(self.messages)
        if not compactor.needed(view, self.agent.spec.system_prompt, self.agent.tool_json):
            return
        self._compaction_tried = True
        try:
            result = await compactor.compact(view)
        except Exception:
            log.warning("compaction of thread %s failed; continuing uncompacted", self.thread_id, exc_info=True)
            return
        if result.usage is not None:
            self.usage = self.usage + result.usage
        if result.summary is not None:
            self.messages.append(replace(result.summary, run_id=self.run_id))  # durable at the step's checkpoint
        log.info("thread %s: %s", self.thread_id, result.describe())

    def _offered_tools(self) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The tool JSON sent to the model and the descriptors offered, by name; built once per agent, not per step."""
        agent = self.agent
        if self._tools_for is None or self._tools_for[0] is not agent:
            extra = self._extra_descriptors
            tool_json = agent.tool_json
            if extra:
                tool_json = tool_json + [
                    {"name": d.name, "description": d.description, "input_schema": d.parameters} for d in extra
                ]
            offered = {n: t.descriptor for n, t in agent.tools.items()}
            offered.update((d.name, d) for d in extra)
            self._tools_for = (agent, tool_json, offered)
        return self._tools_for[1], self._tools_for[2]

    def build_request(self) -> InferenceRequest:
        agent = self.agent
        tools, offered = self._offered_tools()
        messages = _paired(model_view(self.messages))
        if messages is self.messages:  # the request's own list: a transform or model may edit it in place
            messages = list(messages)
        request = InferenceRequest(
            agent.model_name,
            messages,
            [dict(t) for t in tools],  # the cached descriptors' JSON stays the agent's
            agent.spec.system_prompt or None,
            overrides=dict(self.activation.overrides),
        )
        if agent.registrar.transforms:
            ctx = self.ctx(Phase.BEFORE_INFERENCE, offered_tools=dict(offered))()
            for _, transform in agent.registrar.transforms:
                request = transform(request, ctx)
        return request

    async def _infer(self, message_id: str) -> StreamResult:
        request = self.build_request()
        acc = StreamAccumulator()
        ids: dict[int, str] = {}
        started = time.monotonic()
        self.partial_text = []
        self.partial_id = message_id
        emit = self.sink is not None
        async for chunk in self.agent.executor.stream(request):
            if type(chunk) is TextChunk:
                if (text := valid_text(chunk.text)) is not chunk.text:
                    chunk = TextChunk(text)
                acc.add(chunk)
                self.partial_text.append(chunk.text)
                if emit:
                    await self.emit(TextDelta(chunk.text, message_id))
            elif type(chunk) is ToolCallChunk:
                if (delta := valid_text(chunk.args_delta)) is not chunk.args_delta:
                    chunk = replace(chunk, args_delta=delta)
                call_id = ids.get(chunk.index)
                if call_id is None:
                    call_id = ids[chunk.index] = chunk.id or new_id("call_")
                    chunk = ToolCallChunk(chunk.index, call_id, chunk.name, chunk.args_delta)
                    if emit:
                        await self.emit(ToolCallStart(call_id, chunk.name or ""))
                acc.add(chunk)
                if emit and chunk.args_delta:
                    await self.emit(ToolCallDelta(call_id, chunk.args_delta))
            elif type(chunk) is ReasoningChunk:
                if (text := valid_text(chunk.text)) is not chunk.text:
                    chunk = replace(chunk, text=text)
                acc.add(chunk)
                if emit and chunk.text:
                    await self.emit(ReasoningDelta(chunk.text, message_id))
            else:
                acc.add(chunk)
        self.partial_text = []
        result = acc.result()
        result.tool_calls = [_valid_call(c) for c in result.tool_calls]  # names and "\\ud800" escapes in arguments
        self.inferences += 1
        if result.usage is not None:
            self.usage = self.usage + result.usage
        if emit:
            for call in result.tool_calls:
                await self.emit(ToolCallReady(call.id, call.name, call.arguments))
            duration = int((time.monotonic() - started) * 1000)
            await self.emit(InferenceComplete(self.agent.model_name, result.usage, duration, result.stop_reason))
        return result

    # -- tools --------------------------------------------------------------------------------------------------

    def _tool(self, name: str) -> Tool | None:
        return self.agent.tools.get(name) or self._activation_tools.get(name)

    async def _gate(self, call: ToolCall, tool: Tool, resume_input: ToolCallResume | None) -> GateDecision | None:
        gates = self.agent.registrar.gates
        if not gates:
            return None
        make = self.tool_ctx(Phase.TOOL_GATE, call, tool, resume_input=resume_input)
        if len(gates) == 1:
            return await gates[0][1](make())
        decisions: list[GateDecision | None] = [None] * len(gates)

        async def one(i: int) -> None:
            decisions[i] = await gates[i][1](make())

        async with anyio.create_task_group() as tg:
            for i in range(len(gates)):
                tg.start_soon(one, i)
        best: GateDecision | None = None
        for d in decisions:
            if d is not None and (best is None or _GATE_PRIORITY[type(d)] > _GATE_PRIORITY[type(best)]):
                best = d
        return best

    async def _run_tools(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> TerminationReason | None:
        """Gate each call in order; run allowed ones in batches.

        Returns the termination a call decided: ``blocked`` by a gate, or ``error`` when a tool raised a fatal
        ``ToolError`` (the calls after it are interrupted, and the model is not called again).
        """
        executor = executor_for(self.agent.spec.tool_executor)
        batch: list[ToolCall] = []

        async def flush() -> bool:
            nonlocal batch
            if not batch:
                return True
            todo, batch = batch, []
            done = await executor.execute(todo, self._invoke, self._commit_call, self.state.snapshot())
            return done and self._fatal is None

        for i, call in enumerate(calls):
            tool = self._tool(call.name)
            if tool is None:
                batch.append(call)  # _invoke reports "tool 'X' not found"
                continue
            decision = await self._gate(call, tool, None)
            if decision is not None and batch:
                if not await flush():
                    await self._interrupt(calls[i:])
                    return self._fatal_end()
                decision = await self._gate(call, tool, None)  # re-evaluated on the state after the batch
            if decision is None:
                batch.append(call)
            elif isinstance(decision, Block):
                await self._commit_call(_rejected(call, decision))
                await self._interrupt(calls[i + 1 :])
                return TerminationReason.blocked(decision.reason)
            elif isinstance(decision, Suspend):
                await self._suspend_call(call, decision.ticket, _AWAITING_APPROVAL.format(call.name))
            else:
                await self._commit_call(await self._after_tool(call, tool, decision.result, StateCommand()))
        await flush()
        return self._fatal_end()

    def _fatal_end(self) -> TerminationReason | None:
        return TerminationReason.error(self._fatal) if self._fatal is not None else None

    async def _interrupt(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> None:
        for call in calls:
            await self._commit_call(CallResult(call, ToolResult.error(call.name, INTERRUPTED)))

    def _call_context(self, call: ToolCall, snapshot: Snapshot, state: ToolCallState | None) -> ToolCallContext:
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

    async def _invoke(
        self, call: ToolCall, snapshot: Snapshot | None, state: ToolCallState | None = None
    ) -> CallResult:
        tool = self._tool(call.name)
        if tool is None:
            return _not_found(call)
        resume = state.resume_input if state else None
        before = await self.engine.collect_commands(
            Phase.BEFORE_TOOL_EXECUTE, self.tool_ctx(Phase.BEFORE_TOOL_EXECUTE, call, tool, resume_input=resume)
        )
        await self.commit(before)
        ctx = self._call_context(call, snapshot or self.state.snapshot(), state)
        command = StateCommand()
        started = executing = False
        fatal: str | None = None
        try:
            args = call.arguments if isinstance(call.arguments, dict) else {}
            if _RAW_ARGUMENTS in args:  # the model's arguments were not JSON: let it fix them, never run on junk
                raise ToolFailure(f"not valid JSON: {args[_RAW_ARGUMENTS]}", "invalid_arguments")
            args = tool.validate_args(args)
            started = await self._effect_started(call, resume)
            executing = True
            out = await tool.execute(args, ctx)
            if isinstance(out, ToolOutput):
                result, command = out.result, out.command
            elif isinstance(out, ToolResult):
                result = out
            else:
                result = ToolResult.success(call.name, out)
        except anyio.get_cancelled_exc_class():
            if started:  # cancelled with the run, in a live process: not an unknown outcome to ask about later
                await self._effect_finished(call, None)
            raise
        except Exception as exc:
            log.debug("tool %s failed", call.name, exc_info=True)
            result = tool_error_result(call.name, exc)
            # fatal only from the tool's own work: wrong arguments stay the model's to fix
            if executing and isinstance(exc, ToolError) and not isinstance(exc, ToolFailure):
                fatal = valid_text(f"{call.name}: {exc}")
        if started:
            await self._effect_finished(call, result)
        outcome = await self._after_tool(call, tool, result, command, resume)
        outcome.fatal = fatal
        return outcome

    async def _effect_started(self, call: ToolCall, resume: ToolCallResume | None) -> bool:
        """The effect ledger's ``started`` mark, durable before the tool runs (one write, shielded)."""
        if self.ledger is None:
            return False
        decision = resume.decision_id if resume is not None else None
        record = EffectRecord(self.thread_id, call.id, self.run_id, call.name, call.arguments, decision_id=decision)
        with anyio.CancelScope(shield=True):
            await self.ledger.effect_started(record)
        return True

    async def _effect_finished(self, call: ToolCall, result: ToolResult | None) -> None:
        """The ``finished`` mark with the result to report after a crash (``None``: nothing to report)."""
        if self.ledger is not None:
            data = result.to_json() if result is not None else None
            with anyio.CancelScope(shield=True):
                await self.ledger.effect_finished(self.thread_id, call.id, data, now_ms())

    async def _after_tool(
        self,
        call: ToolCall,
        tool: Tool,
        result: ToolResult,
        command: StateCommand,
        resume: ToolCallResume | None = None,
    ) -> CallResult:
        after = await self.engine.collect_commands(
            Phase.AFTER_TOOL_EXECUTE,
            self.tool_ctx(Phase.AFTER_TOOL_EXECUTE, call, tool, tool_result=result, resume_input=resume),
        )
        return CallResult(call, result, command.extend(after))

    async def _commit_call(self, outcome: CallResult, *, resumed: bool = False) -> None:
        """Record one finished call: state, tool message, event."""
        call, result = outcome.call, _valid_result(outcome.result)
        if outcome.fatal is not None and self._fatal is None:
            self._fatal = outcome.fatal
        if result.is_pending:
            ticket = result.suspension or _default_ticket(call)
            await self.commit(outcome.command)
            message = result.message or f"Tool '{call.name}' suspended: awaiting decision"
            await self._suspend_call(call, ticket, message, result.metadata)
            return
        status = "failed" if result.is_error else "succeeded"
        previous = self.tool_states().get(call.id)
        state = ToolCallState(call.id, call.name, call.arguments, status, now_ms())
        if previous is not None:
            state = replace(previous, status=status, updated_at=state.updated_at)
        cmd = StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(state))
        await self.commit(cmd.extend(outcome.command))
        message = Message.tool(call.id, result.text_for_model())
        # the final status travels with the durable message, so a replay (ACP session/load) shows failures
        metadata = {"status": "failed"} if result.is_error else None
        self.messages.append(replace(message, run_id=self.run_id, metadata=metadata))
        if resumed:
            await self.emit(ToolCallResumed(call.id, _resumed_payload(result), status))
        else:
            await self.emit(ToolCallDone(call.id, message.id, result, status))

    async def _suspend_call(
        self, call: ToolCall, ticket: SuspendTicket, message: str, metadata: dict[str, Any] | None = None
    ) -> None:
        ticket = await self._with_preview(call, ticket)
        state = ToolCallState(
            call.id,
            call.name,
            call.arguments,
            "suspended",
            now_ms(),
            ticket.resume_mode,
            ticket.suspension.id,
            ticket.suspension.action,
            ticket,
        )
        await self.commit(StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(state)))
        result = replace(ToolResult.suspended(call.name, ticket, message), metadata=dict(metadata or {}))
        await self.emit(ToolCallDone(call.id, new_id(), result, "suspended"))

    async def _with_preview(self, call: ToolCall, ticket: SuspendTicket) -> SuspendTicket:
        """``ticket`` with what approving would do (``Tool.preview``), worked out now through the call's own context
        (the editor's file system when there is one)."""
        tool = self._tool(call.name)
        if tool is None or ticket.resume_mode != "replay_tool_call" or ticket.suspension.preview is not None:
            return ticket
        preview = await preview_call(tool, call.arguments, self._call_context(call, self.state.snapshot(), None))
        if preview is None:
            return ticket
        return replace(ticket, suspension=replace(ticket.suspension, preview=preview))

    # -- suspension and resume ----------------------------------------------------------------------------------

    def _waiting_state(self) -> WaitingState:
        tickets = []
        for s in self._suspended_calls():
            t = s.ticket or _default_ticket(ToolCall(s.call_id, s.tool_name, s.arguments))
            tickets.append(
                WaitingTicket(
                    t.suspension.id or s.call_id,
                    s.call_id,
                    s.tool_name,
                    s.arguments,
                    s.resume_mode,
                    t.suspension.action,
                    t.suspension.message,
                    s.updated_at,
                    t.suspension.preview,
                )
            )
        return WaitingState(waiting_reason_for("suspended"), tuple(tickets))

    async def _set_waiting(self) -> None:
        await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_waiting("suspended")))
        self.record.waiting = self._waiting_state()

    async def _suspend_and_wait(self) -> TerminationReason | None:
        """Report the suspension; then either end the run (no live channel) or wait for decisions.

        Returns ``None`` when every suspended call is resolved and the loop should infer again.
        """
        while True:
            if self.record.waiting is None or self.state.snapshot().get(RUN_LIFECYCLE).status != "waiting":
                await self._set_waiting()
                await self.checkpoint()
                await self._emit_state()
            await self.emit(
                RunFinish(
                    self.thread_id, self.run_id, TerminationReason.suspended(), RunResult(self.response, "waiting")
                )
            )
            if self.decisions is None or not self.activation.wait_for_decisions:
                return TerminationReason.suspended()
            targets = await self._receive_decisions(self.decisions)
            await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_running()))
            self.record.waiting = None
            await self.emit(RunStart(self.thread_id, self.run_id, self.agent.id, self.activation.parent_run_id))
            blocked = await self._replay(targets)
            if blocked is not None:
                raise _StopRun(blocked)
            if not self._suspended_calls():
                return None

    async def _receive_decisions(
        self, decisions: anyio.abc.ObjectReceiveStream[list[tuple[str, ToolCallResume]]]
    ) -> list[str]:
        """Wait until decisions resolve at least one suspended call; returns the resolved call ids."""
        while True:
            batch = await decisions.receive()
            while True:  # everything already queued is applied together
                try:
                    batch = batch + decisions.receive_nowait()
                except (anyio.WouldBlock, anyio.EndOfStream):
                    break
            targets = await self._apply_decisions(batch)
            if targets:
                return targets

    async def _replay(self, targets: list[str]) -> TerminationReason | None:
        """Report cancelled calls and re-run resuming ones through gate and tool; ``blocked`` (or a fatal tool
        error) ends the run."""
        states = self.tool_states()
        for call_id in targets:
            state = states[call_id]
            decision = state.resume_input
            if state.status != "cancelled" or decision is None:
                continue
            text = _rejection_text(state.tool_name, decision)
            self.messages.append(replace(Message.tool(call_id, text), run_id=self.run_id))
            await self.emit(ToolCallResumed(call_id, decision.result, "failed"))
        for call_id in targets:
            state = self.tool_states()[call_id]
            if state.status != "resuming":
                continue
            call = ToolCall(call_id, state.tool_name, state.arguments if isinstance(state.arguments, dict) else {})
            tool = self._tool(call.name)
            if tool is None:
                await self._commit_call(_not_found(call), resumed=True)
                continue
            decision = await self._gate(call, tool, state.resume_input)
            if isinstance(decision, Block):
                await self._commit_call(_rejected(call, decision), resumed=True)
                return TerminationReason.blocked(decision.reason)
            if isinstance(decision, Suspend):
                await self._suspend_call(call, decision.ticket, _AWAITING_APPROVAL.format(call.name))
                continue
            if isinstance(decision, SetResult):
                outcome = await self._after_tool(call, tool, decision.result, StateCommand(), state.resume_input)
            else:
                outcome = await self._invoke(call, None, state)
            await self._commit_call(outcome, resumed=True)
            if self._fatal is not None:
                return TerminationReason.error(self._fatal)
        return None

    # -- handoff ------------------------------------------------------------------------------------------------

    async def _maybe_handoff(self) -> None:
        from awaken_stdio.runtime.handoff import ACTIVE_AGENT_ID

        if self.state.key(ACTIVE_AGENT_ID.key) is None:
            return
        target = self.state.snapshot().get(ACTIVE_AGENT_ID)
        if not target or target == self.agent.id:
            return
        try:
            new_agent = self._resolve(target)
        except Exception as exc:
            raise _StopRun(TerminationReason.blocked(f"handoff resolve failed: {exc}")) from exc
        batch = MutationBatch()
        for plugin in self.agent.plugins:
            plugin.on_deactivate(batch)
        for plugin in new_agent.plugins:
            plugin.on_activate(new_agent.spec, batch)
        self.agent = new_agent
        self.record.agent_id = new_agent.id
        self.identity = self.record.identity()
        self.engine.hooks = new_agent.hooks
        await self.commit(StateCommand(batch))

    # -- checkpoints and the end --------------------------------------------------------------------------------

    def _sync_record(self) -> RunRecord:
        lifecycle = self.state.snapshot().get(RUN_LIFECYCLE)
        r = self.record
        r.status = lifecycle.status if lifecycle.run_id else r.status
        if r.status != "waiting":
            r.waiting = None
        r.status_reason = lifecycle.status_reason
        r.steps = self.steps
        r.usage = self.usage
        r.response = self.response or r.response
        r.updated_at = now_ms()
        r.state = self.state.export_run_scoped()
        return r

    async def checkpoint(self) -> None:
        """Write the new messages, the run record and the thread state in one atomic store call."""
        if self.store is None:
            return
        record = self._sync_record().copy()
        thread_state = self.state.export_thread_scoped()
        new = self.messages[self.written :]
        with anyio.CancelScope(shield=True):
            for _ in range(CHECKPOINT_RETRIES):
                try:
                    await self.store.checkpoint(
                        Checkpoint(self.thread_id, self.stored_count, new, record, thread_state)
                    )
                except VersionConflict:
                    # Another writer appended to the thread meanwhile: our messages go after theirs.
                    loaded = await self.store.load_thread(self.thread_id)
                    self.stored_count = loaded.thread.message_count if loaded else 0
                    continue
                self.written += len(new)
                self.stored_count += len(new)
                return
            raise VersionConflict(f"thread {self.thread_id}", self.stored_count, None)

    async def _finish(self, termination: TerminationReason) -> None:
        if termination.type == "cancelled" and self.partial_text:
            text = "".join(self.partial_text)
            self.messages.append(
                Message(
                    "assistant",
                    (TextBlock(text),),
                    id=self.partial_id or new_id(),
                    run_id=self.run_id,
                    interrupted=True,
                )
            )
            self.partial_text = []
        if termination.type == "cancelled":
            await self._cancel_suspended(_CANCELLED_WITH_RUN)
        await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.done_reason)))
        self.engine.drop_pending()
        try:
            await self.engine.run_phase(Phase.RUN_END, self.ctx(Phase.RUN_END))
        except Exception:
            log.exception("run_end hooks failed for run %s", self.run_id)
        self.record.termination = termination
        self.record.waiting = None
        if termination.type == "error":
            self.record.error = str(termination.value)
        await self.checkpoint()
        await self._emit_state()
        status = self.record.display_status
        await self.emit(
            RunFinish(
                self.thread_id, self.run_id, termination, RunResult(self.response, status, termination.done_reason)
            )
        )

    async def _cancel_suspended(self, marker: str) -> None:
        """Cancel every suspended call, answering each with ``marker`` so the model sees it settled."""
        cmd = StateCommand()
        for s in self._suspended_calls():
            cmd.update(TOOL_CALL_STATES, ToolCallStatesUpdate.put(replace(s, status="cancelled", updated_at=now_ms())))
            self.messages.append(Message.tool(s.call_id, marker, internal=True))
        await self.commit(cmd)

    async def _finish_or_fail(self, termination: TerminationReason) -> Exception | None:
        """:meth:`_finish`; if that fails (the store, a hook, the sink), the run is recorded failed instead and the
        failure returned for the caller to raise."""
        try:
            await self._finish(termination)
        except Exception as exc:
            await self._fail(exc)
            return exc
        return None

    async def _fail(self, error: BaseException) -> None:
        """An infrastructure failure: the run recorded as failed with the error as its reason, then an ``error``
        event (no RunFinish). Each part is best effort: the store or the sink may be what failed."""
        code = error.kind if isinstance(error, ProviderError) else type(error).__name__
        termination = TerminationReason.error(valid_text(str(error) or type(error).__name__))
        try:
            await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.done(termination.done_reason)))
            self.record.termination = termination
            self.record.error = termination.done_reason
            self.record.waiting = None
            await self.checkpoint()
        except Exception:
            log.exception("could not record the failure of run %s", self.run_id)
        try:
            await self.emit(ErrorEvent(termination.done_reason or "error", code))
            make = self.ctx(Phase.RUN_END)
            for plugin in self.agent.plugins:
                await plugin.on_run_failed(make(), error)
        except Exception:
            log.exception("could not report the failure of run %s", self.run_id)

    def _result(self, termination: TerminationReason) -> AgentRunResult:
        self.record.termination = self.record.termination or termination
        pending = list(self.record.waiting.tickets) if termination.type == "suspended" and self.record.waiting else []
        return AgentRunResult(
            self.run_id,
            self.thread_id,
            self.agent.id,
            self.response,
            termination,
            self.steps,
            self.usage,
            "waiting" if termination.type == "suspended" else self.record.display_status,
            pending,
            termination.done_reason,
        )


def _valid_call(call: ToolCall) -> ToolCall:
    name, arguments = valid_text(call.name), valid_value(call.arguments)
    return call if name is call.name and arguments is call.arguments else ToolCall(call.id, name, arguments)


def _valid_result(result: ToolResult) -> ToolResult:
    """The result with valid text only (what the conversation stores and clients are sent)."""
    message = valid_text(result.message) if result.message is not None else None
    data = valid_value(result.data)
    if message is result.message and data is result.data:
        return result
    return replace(result, message=message, data=data)


def _not_found(call: ToolCall) -> CallResult:
    return CallResult(call, ToolResult.error(call.name, f"tool '{call.name}' not found"))


def _rejected(call: ToolCall, block: Block) -> CallResult:
    """A call a gate blocked: an error result marked ``rejected``."""
    result = ToolResult.error(call.name, block.reason)
    result.metadata["rejected"] = True
    return CallResult(call, result)


def _default_ticket(call: ToolCall) -> SuspendTicket:
    return SuspendTicket(
        Suspension(call.id, f"tool:{call.name}", f"Tool '{call.name}' is waiting for a decision", call.arguments),
        PendingToolCall(call.id, call.name, call.arguments),
        "pass_decision_to_tool",
    )


def _decision_target(states: dict[str, ToolCallState], target: str) -> ToolCallState | None:
    """The call a decision targets, by call id or suspension id, if it is (or was just) waiting for one."""
    state = states.get(target) or next((s for s in states.values() if s.suspension_id == target), None)
    if state is None or state.status not in ("suspended", "resuming", "cancelled"):
        return None
    return state


def _resumed_payload(result: ToolResult) -> Any:
    if result.is_error:
        return {"error": result.message or json.dumps(result.data, default=str)}
    if result.metadata:
        return {"data": result.data, "metadata": result.metadata}
    return result.data


def _rejection_text(tool_name: str, decision: ToolCallResume) -> str:
    result = decision.result
    if isinstance(result, dict) and result.get("approved") is False:
        reason = decision.reason or result.get("reason")
        return f"The user rejected the call to '{tool_name}'" + (f": {reason}" if reason else ".")
    if result is None:
        return f"The call to '{tool_name}' was cancelled" + (f": {decision.reason}" if decision.reason else ".")
    return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


def _paired(messages: list[Message]) -> list[Message]:
    """The history as the model may see it: every tool call answered, nothing dangling.

    A call left without a result (the process died mid-step, a stop policy ended the run before its tools ran)
    gets a synthetic "interrupted" result right after its assistant message, so providers accept the history.
    """
    answered = {m.tool_call_id for m in messages if m.role == "tool"}
    if all(c.id in answered for m in messages if m.tool_calls for c in m.tool_calls):
        return messages
    out: list[Message] = []
    for m in messages:
        out.append(m)
        out.extend(Message.tool(c.id, INTERRUPTED, internal=True) for c in m.tool_calls if c.id not in answered)
    return out
