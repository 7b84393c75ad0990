"""The agent loop: one run of one agent on one thread.

``RunStart -> [StepStart -> BeforeInference -> inference -> AfterInference -> tools -> StepEnd]* -> RunEnd``.
State is committed through the run's :class:`StateStore`; the conversation and the run record reach the durable
store only at checkpoints (every step end, before anyone is asked anything, at the end), never per event.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from awaken_stdio.contract.errors import (
    DecisionTargetNotFound,
    ToolError,
    ToolFailure,
)
from awaken_stdio.contract.events import (
    InferenceComplete,
    ReasoningDelta,
    RunFinish,
    RunResult,
    RunStart,
    StepEnd,
    StepStart,
    TextDelta,
    ToolCallDelta,
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
from awaken_stdio.contract.mailbox import EffectRecord
from awaken_stdio.contract.messages import Message, TextBlock, ToolCall, valid_text, valid_value
from awaken_stdio.contract.state import MutationBatch, Snapshot, StateCommand
from awaken_stdio.contract.suspension import (
    OUTCOME_UNKNOWN_ACTION,
    PendingToolCall,
    SuspendTicket,
    Suspension,
    ToolCallResume,
)
from awaken_stdio.contract.tools import (
    Tool,
    ToolOutput,
    ToolResult,
    tool_error_result,
)
from awaken_stdio.runtime.activation import AgentRunResult
from awaken_stdio.runtime.compaction import model_view
from awaken_stdio.runtime.executors import INTERRUPTED, CallResult, executor_for
from awaken_stdio.runtime.plugins import Block, GateDecision, Phase, SetResult, Suspend
from awaken_stdio.runtime.run.calls import (
    AWAITING_APPROVAL,
    cancel_suspended,
    commit_call,
    set_waiting,
    suspend_call,
)
from awaken_stdio.runtime.run.finish import CHECKPOINT_RETRIES, checkpoint, fail, finish_or_fail, result
from awaken_stdio.runtime.run.state import RunState, StopRun
from awaken_stdio.runtime.runtime_keys import (
    RUN_LIFECYCLE,
    TOOL_CALL_STATES,
    LifecycleUpdate,
    ToolCallState,
    ToolCallStatesUpdate,
)

__all__ = ["CHECKPOINT_RETRIES", "INTERRUPTED", "SUPERSEDED", "AgentLoop"]

log = logging.getLogger(__name__)

_GATE_PRIORITY = {Block: 3, Suspend: 2, SetResult: 1}
_RAW_ARGUMENTS = "__raw_arguments"  # what StreamAccumulator keeps of arguments that did not parse
SUPERSEDED = "[tool call superseded by a new user message]"


class AgentLoop(RunState):
    """Runs one activation to its end (or to a suspension). Built and driven by :class:`AgentRuntime`."""

    # -- setup --------------------------------------------------------------------------------------------------

    # -- the run ------------------------------------------------------------------------------------------------

    async def run(self) -> AgentRunResult:
        termination: TerminationReason | None = None
        error: BaseException | None = None
        try:
            with self.cancel_scope:
                try:
                    termination = await self._run()
                except StopRun as stop:
                    termination = stop.termination
                except Exception as exc:
                    error = exc
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (the caller's scope, a delegating parent's tool task): record the run
            # cancelled like ``AgentRuntime.cancel`` does, then let the cancellation go on.
            self.cancel.cancel()
            with anyio.CancelScope(shield=True):
                await finish_or_fail(self, TerminationReason.cancelled())
            raise
        cancelled_while_suspending = (
            self.cancel.cancelled and termination is not None and termination.type == "suspended"
        )
        if self.cancel_scope.cancelled_caught or cancelled_while_suspending or (termination is None and error is None):
            # a cancel that lands while the run reports its suspension (e.g. from the sink) meets no await
            # afterwards: the run must still end cancelled, not wait for a decision nobody will give
            termination = TerminationReason.cancelled()
        if error is not None:
            with anyio.CancelScope(shield=True):
                await fail(self, error)
            raise error
        assert termination is not None
        if termination.type != "suspended":
            failure: Exception | None = None
            with anyio.CancelScope(shield=True):
                failure = await finish_or_fail(self, termination)
            if failure is not None:
                raise failure
        return result(self, termination)

    async def _run(self) -> TerminationReason:
        await self.emit(RunStart(self.thread_id, self.run_id, self.agent.id, self.activation.parent_run_id))
        resumed_targets = await self._prepare()
        if self.record.status == "waiting" or resumed_targets:
            await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_running()))
        if self.reasked and not resumed_targets and self.suspended_calls():
            self._append_input()
            outcome = await self._suspend_and_wait()
            if outcome is not None:
                return outcome
        elif resumed_targets:
            blocked = await self._replay(resumed_targets)
            self._append_input()  # after the replayed results: a tool result must follow its call
            if blocked is not None:
                return blocked
            if self.suspended_calls():
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
            await cancel_suspended(self, SUPERSEDED)
        decisions = [(t, d) for t, d in a.decisions if d.decision_id not in stale]
        if decisions:
            targets = await self._apply_decisions(decisions)
            if targets:
                return targets
        self._append_input()
        return []

    def _append_input(self) -> None:
        """Append the activation's messages (once)."""
        if not self.input_appended:
            self.input_appended = True
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
                await commit_call(self, CallResult(call, result), resumed=True)
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
            await suspend_call(self, call, ticket, message, {"unknown_after_crash": True})
            self.reasked = True
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
        suspended = bool(self.suspended_calls())
        if suspended and blocked is None:
            await set_waiting(self)
        await self._complete_step()
        if blocked is not None:
            return blocked
        return TerminationReason.suspended() if suspended else None

    async def _complete_step(self) -> None:
        self.steps += 1
        await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.step_completed()))
        await self.engine.run_phase(Phase.STEP_END, self.ctx(Phase.STEP_END))
        await checkpoint(self)
        await self.emit_state()
        await self.emit(StepEnd(self.steps))

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
        if self.compactor_for is None or self.compaction_tried:
            return
        compactor = self.compactors.get(self.agent.id)  # one per agent for the run: it caches estimates
        if compactor is None:
            compactor = self.compactors[self.agent.id] = self.compactor_for(self.agent)
        view = model_view(self.messages)
        if not compactor.needed(view, self.agent.spec.system_prompt, self.agent.tool_json):
            return
        self.compaction_tried = True
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
        if self.tools_for is None or self.tools_for[0] is not agent:
            extra = self.extra_descriptors
            tool_json = agent.tool_json
            if extra:
                tool_json = tool_json + [
                    {"name": d.name, "description": d.description, "input_schema": d.parameters} for d in extra
                ]
            offered = {n: t.descriptor for n, t in agent.tools.items()}
            offered.update((d.name, d) for d in extra)
            self.tools_for = (agent, tool_json, offered)
        return self.tools_for[1], self.tools_for[2]

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
            done = await executor.execute(
                todo, self._invoke, lambda outcome: commit_call(self, outcome), self.state.snapshot()
            )
            return done and self.fatal is None

        for i, call in enumerate(calls):
            tool = self.tool(call.name)
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
                await commit_call(self, _rejected(call, decision))
                await self._interrupt(calls[i + 1 :])
                return TerminationReason.blocked(decision.reason)
            elif isinstance(decision, Suspend):
                await suspend_call(self, call, decision.ticket, AWAITING_APPROVAL.format(call.name))
            else:
                await commit_call(self, await self._after_tool(call, tool, decision.result, StateCommand()))
        await flush()
        return self._fatal_end()

    def _fatal_end(self) -> TerminationReason | None:
        return TerminationReason.error(self.fatal) if self.fatal is not None else None

    async def _interrupt(self, calls: tuple[ToolCall, ...] | list[ToolCall]) -> None:
        for call in calls:
            await commit_call(self, CallResult(call, ToolResult.error(call.name, INTERRUPTED)))

    async def _invoke(
        self, call: ToolCall, snapshot: Snapshot | None, state: ToolCallState | None = None
    ) -> CallResult:
        tool = self.tool(call.name)
        if tool is None:
            return _not_found(call)
        resume = state.resume_input if state else None
        before = await self.engine.collect_commands(
            Phase.BEFORE_TOOL_EXECUTE, self.tool_ctx(Phase.BEFORE_TOOL_EXECUTE, call, tool, resume_input=resume)
        )
        await self.commit(before)
        ctx = self.call_context(call, snapshot or self.state.snapshot(), state)
        command = StateCommand()
        started = executing = False
        fatal: str | None = None
        try:
            # a stored conversation (message_from_json) may hold any JSON value there
            args = call.arguments if isinstance(call.arguments, dict) else {}  # pyright: ignore[reportUnnecessaryIsInstance]
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

    # -- suspension and resume ----------------------------------------------------------------------------------

    async def _suspend_and_wait(self) -> TerminationReason | None:
        """Report the suspension; then either end the run (no live channel) or wait for decisions.

        Returns ``None`` when every suspended call is resolved and the loop should infer again.
        """
        while True:
            if self.record.waiting is None or self.state.snapshot().get(RUN_LIFECYCLE).status != "waiting":
                await set_waiting(self)
                await checkpoint(self)
                await self.emit_state()
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
                raise StopRun(blocked)
            if not self.suspended_calls():
                return None

    async def _receive_decisions(
        self, decisions: MemoryObjectReceiveStream[list[tuple[str, ToolCallResume]]]
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
            tool = self.tool(call.name)
            if tool is None:
                await commit_call(self, _not_found(call), resumed=True)
                continue
            decision = await self._gate(call, tool, state.resume_input)
            if isinstance(decision, Block):
                await commit_call(self, _rejected(call, decision), resumed=True)
                return TerminationReason.blocked(decision.reason)
            if isinstance(decision, Suspend):
                await suspend_call(self, call, decision.ticket, AWAITING_APPROVAL.format(call.name))
                continue
            if isinstance(decision, SetResult):
                outcome = await self._after_tool(call, tool, decision.result, StateCommand(), state.resume_input)
            else:
                outcome = await self._invoke(call, None, state)
            await commit_call(self, outcome, resumed=True)
            if self.fatal is not None:
                return TerminationReason.error(self.fatal)
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
            new_agent = self.resolve(target)
        except Exception as exc:
            raise StopRun(TerminationReason.blocked(f"handoff resolve failed: {exc}")) from exc
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


def _valid_call(call: ToolCall) -> ToolCall:
    name, arguments = valid_text(call.name), valid_value(call.arguments)
    return call if name is call.name and arguments is call.arguments else ToolCall(call.id, name, arguments)


def _not_found(call: ToolCall) -> CallResult:
    return CallResult(call, ToolResult.error(call.name, f"tool '{call.name}' not found"))


def _rejected(call: ToolCall, block: Block) -> CallResult:
    """A call a gate blocked: an error result marked ``rejected``."""
    result = ToolResult.error(call.name, block.reason)
    result.metadata["rejected"] = True
    return CallResult(call, result)


def _decision_target(states: dict[str, ToolCallState], target: str) -> ToolCallState | None:
    """The call a decision targets, by call id or suspension id, if it is (or was just) waiting for one."""
    state = states.get(target) or next((s for s in states.values() if s.suspension_id == target), None)
    if state is None or state.status not in ("suspended", "resuming", "cancelled"):
        return None
    return state


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
