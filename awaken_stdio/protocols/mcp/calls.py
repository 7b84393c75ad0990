"""``tools/call``: running a published tool, an agent (``agent_<id>``) or ``resume_run``, and shaping the result.

Failures the model can fix or should know about are results with ``isError`` (bad arguments, a tool that raised, a
refused approval, an unknown run); only protocol faults are JSON-RPC errors (an unknown tool, a forged
``requestState``), raised by the caller in ``server.py``.

Approvals. An agent run whose tool call needs a person's approval is never kept waiting in memory: the runtime ends
it ``waiting`` with its tickets committed to the store, and the decision resumes it through ``App.decide`` (from the
store, exactly once, in this process or any other). So the three ways to answer are one path: a handshake-era client
with form elicitation is asked at once by ``elicitation/create``; a 2026-era client gets an ``InputRequiredResult``
and retries with the answers, or, when it declares the Tasks extension, a task it answers with ``tasks/update``
(``tasks.py``); any client can call ``resume_run`` later, even after this process was killed.

The client's model. A 2026-era call sets its ``Round`` for the ``mcp_sampling`` models of the runs it drives: a
turn the round cannot answer leaves the run waiting in the store, and the call ends ``input_required`` with that
sampling request; the retry brings the answer and resumes the run, one round per model turn.

Progress. With a ``progressToken``, the run's start, each step and each tool call become ``notifications/progress``
(counting up by one), with a heartbeat at least every ``heartbeat_s``; a call stops reporting before its result is
returned, so nothing follows the response. Run events at or above the client's log level also go out as
``notifications/message``.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import anyio

from awaken_stdio.app.claims import DecisionSuperseded
from awaken_stdio.contract.activation import AgentRunResult, RunActivation
from awaken_stdio.contract.content import to_wire
from awaken_stdio.contract.environment import RunEnvironment
from awaken_stdio.contract.errors import AwakenError, InvalidResume, OutcomeUnknown, ThreadAlreadyRunning
from awaken_stdio.contract.events import (
    ActivitySnapshot,
    AgentEvent,
    ErrorEvent,
    RunFinish,
    RunStart,
    StepStart,
    ToolCallDone,
    ToolCallReady,
)
from awaken_stdio.contract.messages import Message
from awaken_stdio.contract.suspension import Decisions, ToolCallResume
from awaken_stdio.contract.tools import CancelToken, Tool, ToolCallContext, ToolResult, preview_call
from awaken_stdio.protocols.jsonrpc import ConnectionClosedError, JsonRpcError, JsonRpcPeer
from awaken_stdio.protocols.mcp.approvals import (
    approval_message,
    can_elicit,
    decision_from_answer,
    elicitation_params,
)
from awaken_stdio.protocols.mcp.channel import CURRENT_ROUND, InputRequired, McpChannel, Round, digest
from awaken_stdio.protocols.mcp.tasks import created, declares_tasks
from awaken_stdio.protocols.mcp.wire import HEARTBEAT_S, LOG_LEVELS, LogLevel, Request, text_block

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.contract.stores import RunRecord, WaitingTicket
    from awaken_stdio.protocols.mcp.approvals import StateSeal
    from awaken_stdio.protocols.mcp.catalog import Entry
    from awaken_stdio.protocols.mcp.params import CallToolParams

__all__ = ["MAX_RESULT_CHARS", "CallRunner", "Refusal", "ToolCall"]

log = logging.getLogger(__name__)

MAX_RESULT_CHARS = 100_000  # ~25k tokens, where hosts start cutting results themselves
ELICITATION_TIMEOUT_S = 600.0


class Refusal(Exception):
    """Ends a call with an ``isError`` result carrying this text (something the model or the user can act on)."""


class ToolCall:
    """One ``tools/call`` in flight: its progress, its log messages and whether the client cancelled it."""

    def __init__(self, peer: JsonRpcPeer, request: Request, *, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.peer = peer
        self.request = request
        self.heartbeat_s = heartbeat_s
        self.cancel = CancelToken()
        self._progress: float = 0
        self._open = True
        level = request.log_level
        self._log_from = len(LOG_LEVELS) if level is None else LOG_LEVELS.index(level)  # LOG_LEVELS index
        # on_event runs per event (every text delta): a call that reports nothing skips it in one test
        self._reports = request.progress_token is not None or level is not None

    def close(self) -> None:
        """Nothing more is reported: the result (or nothing, when cancelled) comes next."""
        self._open = False

    def cancelled_by_client(self) -> None:
        self._open = False
        self.cancel.cancel()

    async def progress(self, message: str) -> None:
        if self.request.progress_token is None or not self._open:
            return
        self._progress += 1
        params = {"progressToken": self.request.progress_token, "progress": self._progress, "message": message}
        await self._notify("notifications/progress", params)

    async def report(self, done: float, total: float | None, message: str | None) -> None:
        """Progress a tool reports itself (``ctx.progress``); a value that does not go up is not sent."""
        if self.request.progress_token is None or not self._open or done <= self._progress:
            return
        self._progress = done
        params: dict[str, Any] = {"progressToken": self.request.progress_token, "progress": done}
        if total is not None:
            params["total"] = total
        if message:
            params["message"] = message
        await self._notify("notifications/progress", params)

    async def log(self, level: LogLevel, text: str, *, unset: LogLevel | None = None) -> None:
        """A log message at or above the client's level; ``unset``: the level to assume when it set none."""
        threshold = self._log_from if unset is None or self.request.log_level else LOG_LEVELS.index(unset)
        if not self._open or LOG_LEVELS.index(level) < threshold:
            return
        await self._notify("notifications/message", {"level": level, "logger": "awaken-stdio", "data": text})

    async def heartbeat(self) -> None:
        """Progress at least every ``heartbeat_s`` while a run works: clients reset their timeouts on it."""
        if self.request.progress_token is None:
            return
        started = anyio.current_time()
        while True:
            await anyio.sleep(self.heartbeat_s)
            await self.progress(f"working ({anyio.current_time() - started:.0f} s)")

    async def on_event(self, event: AgentEvent) -> None:
        """The event sink of the agent runs this call drives."""
        if not (self._reports and self._open):
            return
        if isinstance(event, RunStart):
            await self.progress(f"run {event.run_id} started")
            await self.log("info", f"run {event.run_id} of agent {event.agent_id} started")
        elif isinstance(event, StepStart):
            await self.progress(f"step {event.step}")
        elif isinstance(event, ToolCallReady):
            await self.progress(f"calling {event.name}")
            await self.log("debug", f"calling {event.name} ({event.id})")
        elif isinstance(event, ToolCallDone):
            name = event.result.tool_name
            await self.progress(f"{name} {event.outcome}")
            if event.outcome == "failed":
                await self.log("warning", f"{name} failed: {_clip(event.result.text_for_model(), 300)}")
        elif isinstance(event, ActivitySnapshot) and isinstance(event.content, dict):
            if event.content.get("message"):
                await self.progress(str(event.content["message"]))
        elif isinstance(event, RunFinish):
            status = event.result.status if event.result else event.termination.type
            await self.log("info", f"run {event.run_id} {status}")
        elif isinstance(event, ErrorEvent):
            await self.log("error", f"run failed: {event.message}")

    async def _notify(self, method: str, params: dict[str, Any]) -> None:
        try:
            await self.peer.notify(method, params)
        except ConnectionClosedError:
            self._open = False


class CallRunner:
    """Runs published entries for ``server.py`` once the app is open."""

    def __init__(self, app: App, seal: StateSeal, peer: JsonRpcPeer, *, permission: str = "allow") -> None:
        self.app = app
        self.seal = seal
        self.peer = peer
        self.permission = permission

    # -- entry points -------------------------------------------------------------------------------------------

    async def call(self, entry: Entry, params: CallToolParams, call: ToolCall, state: dict[str, Any] | None) -> Any:
        """The ``tools/call`` result for ``entry``; ``state`` is the unsealed ``requestState`` of a retry."""
        args = params.arguments or {}
        resuming = state is not None and state.get("k") in ("run", "sample")
        if entry.kind == "tool" and not resuming:
            try:
                return await self._run_tool(entry, args, params=params, call=call, state=state)
            except Refusal as refusal:
                return error_result(str(refusal))
        outcome: dict[str, Any] = {}
        model_round = _round(call.request, state, params)
        token = CURRENT_ROUND.set(model_round)  # this call's round of an mcp_sampling model (2026 era)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(call.heartbeat)
                try:
                    if resuming and state is not None and state["k"] == "sample":
                        result = await self._decide(state["run"], [], call)  # the model's answer is in the round
                    elif resuming:
                        assert state is not None
                        result = await self._decide_answers(state, params, call)
                    elif entry.kind == "agent":
                        result = await self._start_agent(entry, args, call)
                    else:
                        result = await self._resume(args, call)
                    run_id = state["run"] if state is not None and resuming else args.get("run_id")
                    outcome = await self._settle(result, params, call=call, run_id=run_id, model_round=model_round)
                except Refusal as refusal:
                    outcome = error_result(str(refusal))
                tg.cancel_scope.cancel()
        finally:
            CURRENT_ROUND.reset(token)
        return outcome

    # -- plain tools --------------------------------------------------------------------------------------------

    async def _run_tool(
        self, entry: Entry, args: dict[str, Any], params: CallToolParams, call: ToolCall, state: dict[str, Any] | None
    ) -> dict[str, Any]:
        tool = self.app.runtime.tools.get(entry.target)
        if tool is None:
            raise Refusal(f"The tool {entry.name} is no longer available; list the tools again.")
        talking = state is not None and state.get("k") == "tool"  # a retry with answers: permitted already
        answers = {**state.get("answers", {}), **(params.input_responses or {})} if state and talking else None
        channel = McpChannel(self.peer, call, tool.name, answers)
        ctx = self.app.direct_context(tool, cancel=call.cancel, channel=channel, emit=call.on_event)
        if entry.guarded and self.permission == "ask" and not talking:
            asked = await self._permit(tool, args, params=params, call=call, state=state, tool_ctx=ctx)
            if asked is not None:
                return asked
        try:
            result = await self.app.call_tool(tool, args, ctx, passing=(InputRequired,))
        except InputRequired as asked:  # the 2026 era's way to ask: the retry runs the tool again with the answers
            return self._input_requests(asked.requests, params, {"k": "tool", "answers": asked.answers})
        if result.is_pending:
            return error_result(f"{tool.name} is waiting for a decision this server cannot make: {result.message}")
        return tool_result(result, structured_ok=entry.output_schema is None or isinstance(result.data, dict))

    async def _permit(
        self,
        tool: Tool,
        args: dict[str, Any],
        params: CallToolParams,
        call: ToolCall,
        state: dict[str, Any] | None,
        tool_ctx: ToolCallContext,
    ) -> dict[str, Any] | None:
        """The ``[mcp] permission = "ask"`` policy: None to run the call, else the result to answer with.

        The app judges the call as the permission rules judge an agent's without rules (read-only tools run,
        everything else asks; remembered answers of this workspace apply) and remembers ``always`` answers the
        same way. The question shows what the call would do (its preview), worked out before asking.
        """
        verdict = await self.app.check_direct_call(tool.descriptor, args)
        if verdict == "deny":
            raise Refusal(f"The call to {params.name} is refused: a remembered answer rejects it in this workspace.")
        if verdict != "ask":
            return None
        if state is not None and state.get("k") == "permit":
            answer = (params.input_responses or {}).get("decision")
        elif not can_elicit(call.request.client_capabilities):
            raise Refusal(
                f'{params.name} needs the user\'s approval ([mcp] permission = "ask"), but this client cannot ask '
                '(no form elicitation). Set [mcp] permission = "allow" to let the client\'s own confirmation decide.'
            )
        else:
            preview = await preview_call(tool, args, tool_ctx)
            message = approval_message(params.name, args, "The MCP client", preview)
            if call.request.era == "modern":
                return self._input_required({"decision": (message, False)}, params, {"k": "permit"})
            answer = await self._elicit(message)
            if answer is None:
                raise Refusal(f"{params.name} needs the user's approval, and the client did not answer.")
        decision = decision_from_answer(answer)
        await self.app.remember(tool.descriptor, args, decision)
        if decision.action != "resume":
            raise Refusal(f"The user rejected the call to {params.name}.")
        return None

    # -- agent runs ---------------------------------------------------------------------------------------------

    async def _start_agent(self, entry: Entry, args: dict[str, Any], call: ToolCall) -> AgentRunResult | None:
        thread_id, session_id = await self._thread_for(args.get("session_id"))
        channel = McpChannel(self.peer, call, entry.name, in_run=True)  # its tools talk back
        activation = RunActivation(
            messages=[Message.user(args["message"])],
            thread_id=thread_id,
            agent_id=entry.target,
            session_id=session_id,
            origin="mcp",
            env=RunEnvironment(cwd=self.app.settings.cwd, channel=channel, sampling=self.app.sampling),
        )
        try:
            return await self.app.run(activation, call.on_event)  # holds the thread: exactly once across processes
        except ThreadAlreadyRunning:
            raise Refusal(
                f"The conversation {args.get('session_id')} is busy with another run; wait for it to finish, or "
                "leave session_id out to start a new conversation."
            ) from None
        except AwakenError as exc:
            raise Refusal(f"The run failed: {exc}") from exc

    async def _thread_for(self, session_id: str | None) -> tuple[str | None, str | None]:
        """An ACP session's thread (and the session), or a thread an earlier result named; (None, None): new."""
        if not session_id:
            return None, None
        store = self.app.store
        session = await store.load_session(session_id)
        if session is not None:
            return session.thread_id, session.session_id
        if await store.latest_run(session_id) is not None:
            return session_id, None
        raise Refusal(
            f"Unknown session_id {session_id!r}: pass the thread_id of an earlier result or an ACP session id, "
            "or leave session_id out to start a new conversation."
        )

    async def _resume(self, args: dict[str, Any], call: ToolCall) -> AgentRunResult | None:
        run_id = args["run_id"]
        try:
            record = await self.app.waiting_run(run_id)
        except DecisionSuperseded as exc:
            raise Refusal(
                f"Run {run_id} is not waiting for approval: {exc}. There is nothing to resume; call the agent tool "
                "again (with session_id set to its thread_id to continue the conversation)."
            ) from None
        except InvalidResume:
            raise Refusal(
                f"No run {run_id!r} exists. Use the run_id of an agent result whose status is waiting "
                "(`awaken-stdio runs list --status waiting` lists them)."
            ) from None
        pending = {t.tool_call_id for t in record.waiting.tickets} if record.waiting else set[str]()
        decisions: Decisions = []
        for item in args["decisions"]:
            if item["tool_call_id"] not in pending:
                waiting = ", ".join(sorted(pending))
                raise Refusal(f"Run {run_id} has no pending tool call {item['tool_call_id']!r}; pending: {waiting}.")
            always = bool(item.get("always"))
            decision = (
                ToolCallResume.approve(always=always, unknown=item.get("if_unknown"))
                if item["approve"]
                else ToolCallResume.reject(item.get("reason") or "rejected by the user", always=always)
            )
            decisions.append((item["tool_call_id"], decision))
        return await self._decide(run_id, decisions, call)

    async def _decide_answers(
        self, state: dict[str, Any], params: CallToolParams, call: ToolCall
    ) -> AgentRunResult | None:
        """The retry of an ``InputRequiredResult``: the client's answers resume the waiting run."""
        responses = params.input_responses or {}
        decisions = [(cid, decision_from_answer(responses[cid])) for cid in state["calls"] if cid in responses]
        if not decisions:
            raise Refusal(f"No answer for the pending calls of run {state['run']}; call resume_run to decide them.")
        return await self._decide(state["run"], decisions, call)

    async def _decide(self, run_id: str, decisions: Decisions, call: ToolCall) -> AgentRunResult | None:
        try:
            # a run held in this process (its worker's, after a restart) is followed to where it goes next
            return await self.app.decide(run_id, decisions, call.on_event, origin="mcp", follow=True)
        except OutcomeUnknown as exc:
            raise Refusal(
                f'{exc}. Nothing ran. Call resume_run again with if_unknown: "rerun" to run it again, or '
                '"done" to record it as done without running it (approve: false skips it).'
            ) from None
        except InvalidResume as exc:
            raise Refusal(f"Cannot resume run {run_id}: {exc}. It was probably decided already; nothing ran.") from None
        except ThreadAlreadyRunning:
            raise Refusal(f"Run {run_id} is being resumed by someone else; nothing was done.") from None
        except AwakenError as exc:
            raise Refusal(f"The run failed: {exc}") from exc

    async def _settle(
        self,
        result: AgentRunResult | None,
        params: CallToolParams,
        call: ToolCall,
        run_id: str | None = None,
        model_round: Round | None = None,
    ) -> dict[str, Any]:
        """Ask the client's model or the client's user while the client can answer (a task, for a 2026-era client
        declaring Tasks); a run still waiting is returned as ``waiting``."""
        asked = model_round.asked if model_round is not None else None
        if result is not None and result.status == "waiting" and not result.pending and asked is not None:
            key = f"model-{digest(asked)}"  # a turn of the client's model: this round's question
            state = {"k": "sample", "run": result.run_id, "key": key}
            return self._input_requests({key: {"method": "sampling/createMessage", "params": asked}}, params, state)
        while result is not None and result.status == "waiting" and result.pending:
            if not can_elicit(call.request.client_capabilities):
                break
            if call.request.era == "modern" and declares_tasks(call.request.client_capabilities):
                record = await self.app.store.load_run(result.run_id)
                assert record is not None  # it waits: stored before anyone is asked
                return created(record)
            if call.request.era == "modern":
                questions = {t.tool_call_id: (_ticket_question(t, result), t.outcome_unknown) for t in result.pending}
                state = {"k": "run", "run": result.run_id, "calls": list(questions)}
                return self._input_required(questions, params, state)
            decisions = []
            for ticket in result.pending:
                answer = await self._elicit(_ticket_question(ticket, result), unknown=ticket.outcome_unknown)
                if answer is None:
                    break
                decisions.append((ticket.tool_call_id, decision_from_answer(answer)))
            if not decisions:
                break
            result = await self._decide(result.run_id, decisions, call)
        if result is None:  # delivered to a run alive in this process: it goes on there
            record = await self.app.store.load_run(run_id) if run_id else None
            return delivered_result(record)
        return run_result(result)

    async def _elicit(self, message: str, *, unknown: bool = False) -> Any:
        """A handshake-era ``elicitation/create``; None when the client fails to answer."""
        try:
            return await self.peer.request(
                "elicitation/create", elicitation_params(message, unknown=unknown), timeout=ELICITATION_TIMEOUT_S
            )
        except JsonRpcError as exc:
            log.info("elicitation failed (%s); the run stays waiting", exc.message)
            return None

    def _input_required(
        self, questions: dict[str, tuple[str, bool]], params: CallToolParams, state: dict[str, Any]
    ) -> dict[str, Any]:
        requests = {
            key: {"method": "elicitation/create", "params": elicitation_params(message, unknown=unknown)}
            for key, (message, unknown) in questions.items()
        }
        return self._input_requests(requests, params, state)

    def _input_requests(
        self, requests: dict[str, dict[str, Any]], params: CallToolParams, state: dict[str, Any]
    ) -> dict[str, Any]:
        return {
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": self.seal.seal(params.name, params.arguments, state),
        }


def _round(request: Request, state: dict[str, Any] | None, params: CallToolParams) -> Round | None:
    """A 2026-era call's round for ``mcp_sampling`` models: the client's sampling capability, and the model's
    answer it brings when it retries a model turn (sealed ``key``: ``model-<digest of the request answered>``)."""
    if request.era != "modern":
        return None
    sampling = request.client_capabilities.get("sampling")
    model_round = Round(sampling=sampling if isinstance(sampling, dict) else None)
    if state is not None and state.get("k") == "sample":
        answer = (params.input_responses or {}).get(state["key"])
        if isinstance(answer, dict):
            model_round.answers[str(state["key"]).removeprefix("model-")] = answer
    return model_round


def _ticket_question(ticket: WaitingTicket, result: AgentRunResult) -> str:
    """The elicitation message; a call asked again after a crash says first that its earlier outcome is unknown."""
    who = f"Agent {result.agent_id} (run {result.run_id})"
    question = approval_message(ticket.tool_name, ticket.arguments, who, ticket.preview)
    return f"Outcome unknown: {ticket.message}. {question}" if ticket.outcome_unknown else question


# -- results --------------------------------------------------------------------------------------------------------


def error_result(text: str) -> dict[str, Any]:
    return {"content": [text_block(text)], "isError": True}


def delivered_result(record: RunRecord | None) -> dict[str, Any]:
    """The decisions went to the run alive in this process, which goes on there: its state now, in the shape of the
    agent tools' output schema (a result without ``structuredContent`` would break a client that checks it)."""
    text = "The decisions were delivered to the running run."
    if record is None:
        return {"content": [text_block(text)], "isError": False}
    structured = {
        "run_id": record.run_id,
        "thread_id": record.thread_id,
        "status": record.display_status,
        "response": record.response or "",
    }
    return {
        "content": [text_block(text), text_block(_json(structured))],
        "structuredContent": structured,
        "isError": False,
    }


def run_result(result: AgentRunResult) -> dict[str, Any]:
    """The answer first (what the model reads), then the ids as a JSON twin of ``structuredContent``."""
    structured: dict[str, Any] = {
        "run_id": result.run_id,
        "thread_id": result.thread_id,
        "status": result.status,
        "response": result.response,
    }
    text = result.response or f"(the run ended {result.status} without an answer)"
    if result.status_reason and result.status == "failed":  # why: a fatal tool error, a stop policy, a block
        structured["reason"] = result.status_reason
        text = f"{text}\n\nThe run failed: {result.status_reason}"
    if result.status == "waiting":
        structured["pending"] = [
            {
                "tool_call_id": t.tool_call_id,
                "tool": t.tool_name,
                "arguments": t.arguments if isinstance(t.arguments, dict) else {"value": t.arguments},
                "reason": t.message or t.reason,
                **({"outcome": "unknown"} if t.outcome_unknown else {}),
            }
            for t in result.pending
        ]
        pending = structured["pending"]
        unknown = any(t.outcome_unknown for t in result.pending)
        lines = [
            f"- {p['tool_call_id']}: {p['tool']} {_clip(_json(p['arguments']), 300)}"
            + (f" ({t.message})" if t.outcome_unknown else "")
            for p, t in zip(pending, result.pending, strict=True)
        ]
        decisions = [
            {"tool_call_id": p["tool_call_id"], "approve": True, **({"if_unknown": "rerun"} if "outcome" in p else {})}
            for p in pending
        ]
        example = {"run_id": result.run_id, "decisions": decisions}
        text = (
            (result.response + "\n\n" if result.response else "")
            + "The run is waiting for approval of these tool calls:\n"
            + "\n".join(lines)
            + f"\nTo continue, call resume_run with {_json(example)} (approve: false rejects a call"
            + ("; a call whose outcome is unknown needs if_unknown: rerun or done)." if unknown else ").")
        )
    ids = {k: v for k, v in structured.items() if k != "response"}
    content = [text_block(_cap(text)), text_block(_json(ids))]
    return {"content": content, "structuredContent": structured, "isError": result.status == "failed"}


def tool_result(result: ToolResult, *, structured_ok: bool = True) -> dict[str, Any]:
    """A tool's result: its text for the model, and its data as ``structuredContent`` when it is an object."""
    # rich blocks as they are (their text stand-ins are for models)
    blocks = [to_wire(b) for b in result.content] or [text_block(_cap(result.text_for_model()))]
    out: dict[str, Any] = {"content": blocks, "isError": result.is_error}
    structured = isinstance(result.data, dict) and structured_ok and not result.is_error
    if structured and len(_json(result.data)) <= MAX_RESULT_CHARS:
        out["structuredContent"] = result.data
    return out


def _cap(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    return (
        text[:MAX_RESULT_CHARS]
        + f"\n\n[truncated: showing {MAX_RESULT_CHARS} of {len(text)} characters. Ask for less at a time (a "
        "narrower path or pattern, a line range, a limit) to see the rest.]"
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
