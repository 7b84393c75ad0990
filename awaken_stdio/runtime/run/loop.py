"""The agent loop: one run of one agent on one thread.

``RunStart -> [StepStart -> BeforeInference -> inference -> AfterInference -> tools -> StepEnd]* -> RunEnd``.
State is committed through the run's :class:`StateStore`; the conversation and the run record reach the durable
store only at checkpoints (every step end, before anyone is asked anything, at the end), never per event.
"""

from __future__ import annotations

import time
from dataclasses import replace

import anyio

from awaken_stdio.contract.activation import AgentRunResult
from awaken_stdio.contract.errors import ModelAnswerPending
from awaken_stdio.contract.events import RunStart, StepEnd, StepStart
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.inference import StreamResult
from awaken_stdio.contract.lifecycle import TerminationReason
from awaken_stdio.contract.messages import Message, TextBlock
from awaken_stdio.contract.state import MutationBatch, StateCommand
from awaken_stdio.runtime.handoff import ACTIVE_AGENT_ID
from awaken_stdio.runtime.plugins import Phase
from awaken_stdio.runtime.run.calls import cancel_suspended, set_waiting
from awaken_stdio.runtime.run.finish import checkpoint, checkpoint_soon, fail, finish_or_fail, result, write_behind
from awaken_stdio.runtime.run.inference import compact_if_needed, infer
from awaken_stdio.runtime.run.recovery import recover_effects
from awaken_stdio.runtime.run.state import RunState, StopRun
from awaken_stdio.runtime.run.suspension import apply_decisions, replay, suspend_and_wait
from awaken_stdio.runtime.run.tools import run_tools
from awaken_stdio.runtime.runtime_keys import RUN_LIFECYCLE, TOOL_CALL_STATES, LifecycleUpdate, ToolCallStatesUpdate

__all__ = ["SUPERSEDED", "AgentLoop"]

SUPERSEDED = "[tool call superseded by a new user message]"


class AgentLoop(RunState):
    """Runs one activation to its end (or to a suspension). Built and driven by :class:`AgentRuntime`."""

    __slots__ = ()

    # -- the run ------------------------------------------------------------------------------------------------

    async def run(self) -> AgentRunResult:
        if self.deps.ledger is None:  # in memory: a checkpoint costs no more than noting it
            return await self._run_to_end()
        outcome: AgentRunResult | Exception | None = None  # None only were the group to swallow a cancellation
        async with anyio.create_task_group() as tasks:  # the writer behind the loop runs here, never past the run
            self.deps.behind = behind = write_behind(self, tasks)
            try:
                outcome = await self._run_to_end()
            except Exception as exc:  # raised as it is below, not in the task group's exception group
                outcome = exc
            finally:  # the final checkpoint has superseded what is scheduled; a write in flight ends first
                behind.unschedule()
                await behind.wait()
        if isinstance(outcome, Exception):
            raise outcome
        assert outcome is not None
        return outcome

    async def _run_to_end(self) -> AgentRunResult:
        termination: TerminationReason | None = None
        error: BaseException | None = None
        try:
            with self.deps.cancel_scope:
                try:
                    termination = await self._run()
                except StopRun as stop:
                    termination = stop.termination
                except Exception as exc:
                    error = exc
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside (the caller's scope, a delegating parent's tool task): record the run
            # cancelled like ``AgentRuntime.cancel`` does, then let the cancellation go on.
            self.deps.cancel.cancel()
            with anyio.CancelScope(shield=True):
                await finish_or_fail(self, TerminationReason.cancelled())
            raise
        cancelled_while_suspending = (
            self.deps.cancel.cancelled and termination is not None and termination.type == "suspended"
        )
        if (
            self.deps.cancel_scope.cancelled_caught
            or cancelled_while_suspending
            or (termination is None and error is None)
        ):
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
        if self.deps.sink is not None:  # an event is built only for someone who listens
            await self.emit(
                RunStart(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    agent_id=self.deps.agent.id,
                    parent_run_id=self.deps.activation.parent_run_id,
                )
            )
        resumed_targets = await self._prepare()
        if self.record.status == "waiting" or resumed_targets:
            await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.set_running()))
        if not resumed_targets and self.suspended_calls():  # still asked (an unknown outcome, a refused decision)
            self._append_input()
            outcome = await suspend_and_wait(self)
            if outcome is not None:
                return outcome
        elif resumed_targets:
            blocked = await replay(self, resumed_targets)
            self._append_input()  # after the replayed results: a tool result must follow its call
            if blocked is not None:
                return blocked
            if self.suspended_calls():
                outcome = await suspend_and_wait(self)
                if outcome is not None:
                    return outcome
        if not self.deps.engine.idle(Phase.RUN_START):
            await self.deps.engine.run_phase(Phase.RUN_START, self.ctx(Phase.RUN_START))
        while True:
            termination = await self._step()
            if termination is None:
                continue
            if termination.type != "suspended":
                return termination
            outcome = await suspend_and_wait(self)
            if outcome is not None:
                return outcome

    async def _prepare(self) -> list[str]:
        """Start the lifecycle, supersede stale suspensions, append the new messages, apply seeded decisions."""
        a = self.deps.activation
        lifecycle = StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.start(self.run_id))
        batch = MutationBatch()
        for plugin in self.deps.agent.plugins:
            plugin.on_activate(self.deps.agent.spec, batch)
        lifecycle.patch.extend(batch)
        await self.commit(lifecycle)
        stale = await recover_effects(self)
        if a.has_visible_user_message and not a.decisions:
            # a new message supersedes what waited, but not a call whose outcome is unknown: the person is asked
            # about it first (it may have had its effect), then the message is answered
            unknown = {s.call_id for s in self.suspended_calls() if s.outcome_unknown}
            await cancel_suspended(self, SUPERSEDED, keep=unknown)
        decisions = [(t, d) for t, d in a.decisions if d.decision_id not in stale]
        if decisions:
            targets = await apply_decisions(self, decisions)
            if targets:
                return targets
        self._append_input()
        return []

    def _append_input(self) -> None:
        """Append the activation's messages (once)."""
        if not self.input_appended:
            self.input_appended = True
            for m in self.deps.activation.messages:
                self.messages.append(m if m.run_id else replace(m, run_id=self.run_id))
                self.record.input_message_ids.append(m.id)

    # -- one step -----------------------------------------------------------------------------------------------

    async def _step(self) -> TerminationReason | None:
        if self.deps.cancel.cancelled:
            return TerminationReason.cancelled()
        await self._maybe_handoff()
        assistant_id = new_id()
        if self.deps.sink is not None:
            await self.emit(StepStart(message_id=assistant_id, step=self.steps + 1))
        await self.commit(StateCommand().update(TOOL_CALL_STATES, ToolCallStatesUpdate.clear()))
        engine = self.deps.engine  # a phase nobody hooks (and no action is due in) is skipped, its context unbuilt
        if not engine.idle(Phase.STEP_START):
            await engine.run_phase(Phase.STEP_START, self.ctx(Phase.STEP_START))
        if not engine.idle(Phase.BEFORE_INFERENCE):
            before = self.ctx(Phase.BEFORE_INFERENCE)
            await self.commit(await engine.collect_commands(Phase.BEFORE_INFERENCE, before))
            await engine.run_actions(Phase.BEFORE_INFERENCE, before)
        view = await compact_if_needed(self)

        try:
            response = await infer(self, assistant_id, view)
        except ModelAnswerPending as pending:
            return await self._wait_for_model(str(pending))
        if not engine.idle(Phase.AFTER_INFERENCE):
            await engine.run_phase(Phase.AFTER_INFERENCE, self.ctx(Phase.AFTER_INFERENCE, response=response))

        message = Message(
            role="assistant",
            content=(TextBlock(text=response.text),) if response.text else (),
            tool_calls=tuple(response.tool_calls),
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
            await self._complete_step(last=True)
            return stop
        if not response.tool_calls:
            await self._complete_step(last=True)
            if response.stop_reason in ("max_tokens", "refusal"):
                return TerminationReason.stopped(response.stop_reason, f"the model stopped: {response.stop_reason}")
            return TerminationReason.natural()

        blocked = await run_tools(self, response.tool_calls)
        asks = bool(self.suspended_calls()) and blocked is None
        if asks:
            await set_waiting(self)
        await self._complete_step(asks=asks)
        if blocked is not None:
            return blocked
        return TerminationReason.suspended() if asks else None

    async def _wait_for_model(self, why: str) -> TerminationReason:
        """The model's answer comes from outside the process: wait for it durably, with no call to decide (a resume
        without decisions runs this step again from its start, and the model then has its answer)."""
        self.partial_text = []
        await set_waiting(self)
        assert self.record.waiting is not None
        self.record.waiting = replace(self.record.waiting, reason="external_event", message=why)
        await checkpoint(self, settles=True)
        return TerminationReason.suspended()

    async def _complete_step(self, *, last: bool = False, asks: bool = False) -> None:
        """End the step; its checkpoint is the run's final one when it is the ``last`` (one write, not two), written
        now when the step ``asks`` somebody something (the question must find it stored), else behind the loop."""
        self.steps += 1
        await self.commit(StateCommand().update(RUN_LIFECYCLE, LifecycleUpdate.step_completed()))
        if not self.deps.engine.idle(Phase.STEP_END):
            await self.deps.engine.run_phase(Phase.STEP_END, self.ctx(Phase.STEP_END))
        if asks:
            await checkpoint(self, settles=True)
        elif not last:
            await checkpoint_soon(self)
        if self.deps.sink is not None:
            await self.emit_state()
            await self.emit(StepEnd(step=self.steps))

    def _stop_policy(self, response: StreamResult) -> TerminationReason | None:
        spec = self.deps.agent.spec
        if response.tool_calls and spec.max_rounds and self.inferences >= spec.max_rounds:
            return TerminationReason.stopped("max_rounds", f"reached {spec.max_rounds} rounds")
        if spec.max_tokens is not None and self.usage.total_tokens >= spec.max_tokens:
            return TerminationReason.stopped(
                "token_budget", f"used {self.usage.total_tokens} of {spec.max_tokens} tokens"
            )
        if spec.timeout_s is not None and time.monotonic() - self.started >= spec.timeout_s:
            return TerminationReason.stopped("timeout", f"ran longer than {spec.timeout_s:g} s")
        return None

    # -- handoff ------------------------------------------------------------------------------------------------

    async def _maybe_handoff(self) -> None:
        if self.state.key(ACTIVE_AGENT_ID.key) is None:
            return
        target = self.state.snapshot().get(ACTIVE_AGENT_ID)
        if not target or target == self.deps.agent.id:
            return
        try:
            new_agent = self.deps.resolve(target)
        except Exception as exc:
            raise StopRun(TerminationReason.blocked(f"handoff resolve failed: {exc}")) from exc
        batch = MutationBatch()
        for plugin in self.deps.agent.plugins:
            plugin.on_deactivate(batch)
        for plugin in new_agent.plugins:
            plugin.on_activate(new_agent.spec, batch)
        self.deps.agent = new_agent
        self.record.agent_id = new_agent.id
        self.cache.identity = self.record.identity()
        self.deps.engine.hooks = new_agent.hooks
        await self.commit(StateCommand(patch=batch))
