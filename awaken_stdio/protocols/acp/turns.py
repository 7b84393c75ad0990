"""Prompt turns of an ACP session: the run through the mailbox, its events as updates, the approvals it waits for.

A turn first re-offers the approvals an earlier process (or a run before ``session/load``) left waiting, then runs
a slash command or the prompt. A run that suspends is asked about once the mailbox holds it waiting, beside it, so
a decision from another surface (the CLI, an MCP client) reaches it meanwhile and withdraws the open question. An
editor that cannot ask (an error answer) ends the turn at once, telling the person how to decide elsewhere: the run
stays waiting in the store.
What the turn needs of its connection (the peer, updates, the editor's environment, slash commands) is ``TurnHost``,
which ``AcpServer`` is; this module never imports the server.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from awaken_stdio.contract.errors import InvalidResume
from awaken_stdio.contract.events import AgentEvent, RunFinish, ToolCallDone
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.suspension import OUTCOME_UNKNOWN_ACTION, Decisions
from awaken_stdio.protocols.acp import commands
from awaken_stdio.protocols.acp.encoder import DescriptorLookup, TurnEncoder, stop_reason, tool_call
from awaken_stdio.protocols.acp.permissions import Question, Unanswered, ask_permission
from awaken_stdio.protocols.acp.sessions import Ask, Session, Turn, session_info
from awaken_stdio.protocols.acp.tracing import trace_meta
from awaken_stdio.protocols.jsonrpc import INTERNAL_ERROR, JsonRpcError, JsonRpcPeer

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.contract.activation import RunActivation
    from awaken_stdio.contract.messages import Message
    from awaken_stdio.contract.tools import ToolDescriptor
    from awaken_stdio.protocols.acp.wire import ClientCapabilities

__all__ = ["CANCEL_GRACE_S", "TurnHost", "Turns", "descriptors"]

log = logging.getLogger(__name__)

_TITLE_CHARS = 60
_MAX_PENDING_ROUNDS = 16  # a resumed run that keeps asking: stop re-offering after this many rounds
_WATCH_S = 0.25  # how often a re-offered question checks whether its run was decided elsewhere
CANCEL_GRACE_S = 1.0  # how long a cancelled turn may take to end before its prompt is answered without it
_DECIDED = "Decided outside this editor."
_DECIDED_TITLE = "An approval was decided elsewhere"
_STILL_STOPPING = (
    "The store did not answer in time (another process holds it, or its disk is slow): the run stops at its next "
    "safe point and keeps what it has."
)


class TurnHost(Protocol):
    """What a turn needs of its connection."""

    peer: JsonRpcPeer
    client: ClientCapabilities

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        """Send one ``session/update``."""
        ...

    async def notice(self, session_id: str, severity: str, title: str, description: str | None = None) -> bool:
        """Send a ``notice`` when the client takes them; whether it did."""
        ...

    def host_context(self, session: Session) -> RunActivation:
        """Where the session's runs run: the editor's environment, the session's MCP tools, the client's system
        prompt (an activation carrying only those)."""
        ...

    async def command(self, app: App, session: Session, name: str, argument: str) -> None:
        """Answer a slash command."""
        ...

    def background(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` in the connection's background: it may outlive the request that started it."""
        ...


class _Answer:
    """A prompt's answer: its turn's stop reason or error once ``done``; ``scope`` is its wait, whose deadline a
    cancel brings forward, ``work`` the turn's; ``gone`` once answered (a turn not started by then never starts)."""

    __slots__ = ("done", "epoch", "error", "gone", "message_id", "reason", "scope", "turn", "work")

    def __init__(self, epoch: int, message_id: str | None = None) -> None:
        self.epoch = epoch  # the session's cancel epoch when the prompt came: a cancel since means it never runs
        self.message_id = message_id  # the id the prompt's message gets (v2 tells it when the prompt is accepted)
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()
        self.work = anyio.CancelScope()
        self.turn: Turn | None = None
        self.reason = "cancelled"
        self.error: Exception | None = None
        self.gone = False


def descriptors(app: App) -> DescriptorLookup:
    """Tool name -> its descriptor in the app's runtime (how a call is shown), ``None`` for one it does not know."""
    tools = app.runtime.tools

    def lookup(name: str) -> ToolDescriptor | None:
        tool = tools.get(name)
        return tool.descriptor if tool is not None else None

    return lookup


class Turns:
    """The prompt turns of one connection's sessions: one at a time per session, each cancellable."""

    def __init__(self, host: TurnHost) -> None:
        self.host = host
        self._answers: dict[str, list[_Answer]] = {}  # session id -> its prompts not yet answered

    async def answer(self, app: App, session: Session, blocks: list[Any] | None, message_id: str | None = None) -> str:
        """Take the prompt once the session's previous turn is over; the stop reason. ``None`` blocks: a turn that
        only re-offers the approvals left waiting (v2 asks at ``session/resume``, not at the next prompt).

        The turn runs in the connection's background, holding the session (``_hold``), so that a cancel is answered
        even when the run cannot stop yet (its store stalled by another process's lock or a frozen disk): the prompt
        is answered ``cancelled`` once the turn is over or ``CANCEL_GRACE_S`` after the cancel, whichever is first.
        The run then stops at its next safe point and stores what it has; nothing of it follows the answer."""
        answer = _Answer(session.cancel_epoch, message_id)
        waiting = self._answers.setdefault(session.id, [])
        waiting.append(answer)
        self.host.background(lambda: self._hold(app, session, blocks, answer))
        try:
            with answer.scope:
                await answer.done.wait()
        except anyio.get_cancelled_exc_class():
            answer.work.cancel()  # the request itself is cancelled (the connection closes): so is its turn
            raise
        finally:
            waiting.remove(answer)
            if not waiting:
                del self._answers[session.id]
            answer.gone = True
            if answer.turn is not None and not answer.done.is_set():
                answer.turn.answered = True  # nothing of it follows the answer on the wire
        if not answer.done.is_set():
            if answer.turn is not None:  # its run could not stop in time: the store is slow or held
                await self.host.notice(session.id, "warning", "The cancelled run is still stopping",
                                       _STILL_STOPPING)  # fmt: skip
            return "cancelled"
        if answer.error is not None:
            raise answer.error
        return answer.reason

    async def _hold(self, app: App, session: Session, blocks: list[Any] | None, answer: _Answer) -> None:
        """The turn of ``answer``, once the session's previous turn is over; its outcome goes to ``answer``."""
        try:
            with answer.work:
                async with session.lock:  # a second prompt waits for the first: turns never interleave
                    if session.cancel_epoch != answer.epoch or answer.gone:
                        return
                    turn = answer.turn = session.turn = Turn(message_id=answer.message_id)
                    try:
                        answer.reason = await self._turn(app, session, turn, blocks)
                    except Exception as exc:
                        answer.error = exc
                    finally:
                        session.turn = None
        finally:
            answer.done.set()

    async def _turn(self, app: App, session: Session, turn: Turn, blocks: list[Any] | None) -> str:
        failure: Exception | None = None
        reason = "end_turn"
        async with anyio.create_task_group() as tasks:  # the questions asked while a run of this turn waits
            turn.tasks = tasks
            try:
                reason = await self._turn_steps(app, session, turn, blocks)
            except Exception as exc:
                failure = exc
            finally:
                if turn.ask is not None:  # the turn is over: no question about its runs stays open
                    turn.ask.withdraw("The run ended before this was answered.", failed=True)
        if failure is not None:
            if turn.cancelled:
                return "cancelled"
            raise _turn_error(failure) from failure
        return reason

    async def _turn_steps(self, app: App, session: Session, turn: Turn, blocks: list[Any] | None) -> str:
        with turn.scope:
            if not await self._offer_pending(app, session, turn):
                return "end_turn"  # the editor could not ask: the person was told how to decide elsewhere
        if turn.cancelled:
            return "cancelled"
        if blocks is None:
            return "end_turn"
        command = commands.parse_command(blocks)
        if command is not None:
            await self.host.command(app, session, *command)
            return "end_turn"
        from awaken_stdio.contract.messages import Message

        turn.run_id = new_id()
        message = Message.user(blocks)
        if turn.message_id is not None:
            message = dataclasses.replace(message, id=turn.message_id)
        activation = self._context(session, [message], run_id=turn.run_id, run_id_is_new=True)
        # through the mailbox: the run holds its thread's claim, so a decision from any surface of any process (the
        # CLI, an MCP client) resumes it here, exactly once; a run of this thread resumed elsewhere (after a restart,
        # by such a decision) is waited for, as a second prompt waits for the first
        result = await app.run(
            activation, self._sink(app, session, turn), lambda: turn.cancelled, self._asker(app, session, turn)
        )
        if result.termination.type == "error" and not turn.cancelled:  # a fatal tool error ended the run
            reason = result.status_reason or "the run failed"
            data = {"type": "RunFailed", "message": reason, "runId": result.run_id}
            raise JsonRpcError(INTERNAL_ERROR, f"Internal error: {reason}", data)
        await self._after_turn(app, session, blocks)
        return "cancelled" if turn.cancelled else stop_reason(result.termination)

    def _sink(self, app: App, session: Session, turn: Turn) -> Callable[[AgentEvent], Awaitable[None]]:
        """Events to updates. A run that suspends leaves its calls in ``turn.to_ask``: they are asked about once the
        mailbox holds the run waiting (``_asker``), so a decision from another surface reaches it meanwhile; the
        run's next event withdraws an open question (someone else decided)."""
        runtime = app.runtime
        model = runtime.models.get(runtime.agents[session.agent_id].model)
        window = model[0].capabilities(model[1]).context_window if model else 0
        client = self.host.client
        encoder = TurnEncoder(descriptors(app), window, show_thoughts=session.show_thoughts,
                              compaction=client.compaction, notices=client.notices)  # fmt: skip
        suspended: list[Question] = []
        notify = self.host.peer.notify  # not host.update: this runs per event, one coroutine frame fewer per update
        session_id = session.id

        async def sink(event: AgentEvent) -> None:
            if turn.cancelled:  # a run that started after the cancel (its store was stalled) stops at its next step
                await runtime.cancel(session.record.thread_id)
                if turn.answered:
                    return
            if turn.ask is not None and not turn.ask.answered:
                turn.ask.withdraw(_DECIDED)  # the run moved on: someone else decided
            for update in encoder.encode(event):
                await notify("session/update", {"sessionId": session_id, "update": update})
            if type(event) is ToolCallDone and event.outcome == "suspended":
                name, args = encoder.call(event.id) or (event.result.tool_name, None)
                ticket = event.result.suspension
                asked = ticket.suspension if ticket else None
                unknown = (asked.message or "") if asked and asked.action == OUTCOME_UNKNOWN_ACTION else None
                preview = asked.preview if asked else None
                suspended.append(
                    Question(call_id=event.id, tool_name=name, arguments=args, unknown=unknown, preview=preview)
                )
            elif type(event) is RunFinish and event.termination.type == "suspended" and suspended:
                turn.to_ask = (event.run_id, list(suspended))
                suspended.clear()

        return sink

    def _asker(self, app: App, session: Session, turn: Turn) -> Callable[[], Awaitable[None]]:
        """What the mailbox calls when a run of this turn waits for a decision: ask about its calls, beside it."""

        async def ask_now() -> None:
            if turn.to_ask is None:
                return
            (run_id, calls), turn.to_ask = turn.to_ask, None
            turn.ask = ask = Ask(run_id=run_id, call_ids=[c.call_id for c in calls])
            assert turn.tasks is not None
            turn.tasks.start_soon(
                partial(self._ask_live, app, session, turn=turn, ask=ask, calls=calls, lookup=descriptors(app))
            )

        return ask_now

    async def _ask_live(
        self, app: App, session: Session, turn: Turn, ask: Ask, calls: list[Question], lookup: DescriptorLookup
    ) -> None:
        """Ask about a run waiting in this process; the answer goes to the mailbox, which hands it to the run.

        A dismissed question cancels the run, unless a decision recorded elsewhere got there first: then that
        decision stands and the turn goes on.
        """
        try:
            try:
                decisions = await self._ask(session, turn, ask=ask, calls=calls, lookup=lookup)
            except Unanswered as exc:
                if await app.release(ask.run_id):  # the turn's run returns, waiting; else a decision got there first
                    await self._tell_unanswered(session, ask.run_id, exc)
                return
            if ask.withdrawn:
                return
            with anyio.CancelScope(shield=True):
                if decisions is not None:
                    await app.decide(ask.run_id, decisions, origin="acp")
                elif await app.dismiss(ask.run_id):
                    turn.cancelled = True
        except InvalidResume as exc:  # another surface decided first: its decision stands
            await self._tell_calls(session, ask.call_ids, str(exc))
            await self.host.notice(session.id, "info", _DECIDED_TITLE, str(exc))
        except Exception:
            log.exception("session %s: asking about run %s failed", session.id, ask.run_id)

    async def _ask(
        self, session: Session, turn: Turn, ask: Ask, calls: list[Question], lookup: DescriptorLookup
    ) -> Decisions | None:
        """``_ask_all`` until ``ask`` is withdrawn; a withdrawn question is told in its calls and gives ``None``."""
        with ask.scope:
            decisions = await self._ask_all(session, turn, calls, lookup)
            ask.answered = True
            return decisions
        if ask.note:
            await self._tell_calls(session, ask.call_ids, ask.note, failed=ask.failed)
            title = _DECIDED_TITLE if ask.note == _DECIDED else "An approval is no longer needed"
            await self.host.notice(session.id, "warning" if ask.failed else "info", title, ask.note)
        return None

    async def _tell_calls(self, session: Session, call_ids: list[str], text: str, *, failed: bool = False) -> None:
        for call_id in call_ids:
            content = [{"type": "content", "content": {"type": "text", "text": text}}]
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "content": content}
            if failed:
                update["status"] = "failed"
            await self.host.update(session.id, update)

    async def _tell_unanswered(self, session: Session, run_id: str, why: Unanswered) -> None:
        """The person hears that nothing was decided, and how to decide: the run waits for them in the store."""
        text = (
            f"The editor could not show the approval this run needs ({why}). Run {run_id} waits for your decision: "
            f"`awaken-stdio runs approve {run_id}` or `awaken-stdio runs reject {run_id}` in a terminal, an MCP "
            "client's `resume_run`, or send a message here to be asked again."
        )
        message = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        await self.host.update(session.id, message)

    async def _ask_all(
        self, session: Session, turn: Turn, calls: list[Question], lookup: DescriptorLookup
    ) -> Decisions | None:
        """Ask about each call in order; ``None`` when the person cancelled (the turn is then cancelled)."""
        decisions: Decisions = []
        for question in calls:
            if question.unknown is not None:
                detail = f"{question.tool_name} ({question.call_id}): {question.unknown or 'it was interrupted.'} "
                await self.host.notice(session.id, "warning", "A tool call's outcome is unknown",
                                       detail + "Choose whether to run it again.")  # fmt: skip
            meta = trace_meta(session.trace)
            decision = await ask_permission(
                self.host.peer, session.id, question=question, descriptor=lookup(question.tool_name), meta=meta
            )
            if decision is None or turn.cancelled:
                return None
            decisions.append((question.call_id, decision))
            if decision.action == "resume":
                await self.host.update(session.id, {"sessionUpdate": "tool_call_update", "toolCallId": question.call_id,
                                               "status": "in_progress"})  # fmt: skip
        return decisions

    async def _offer_pending(self, app: App, session: Session, turn: Turn) -> bool:
        """Approvals an earlier process (or a run before ``session/load``) left waiting are asked again first.

        Each waiting run of the session's thread gets its decisions through ``App.decide``, which resumes it
        exactly once; its updates stream into this turn. A question the run no longer needs (decided from another
        surface meanwhile) is withdrawn; a cancelled answer cancels the turn and leaves the run waiting. False when
        the editor could not ask (the person is told how to decide elsewhere): the turn ends, the run still waits.
        """
        lookup = descriptors(app)
        for _ in range(_MAX_PENDING_ROUNDS):
            page = await app.sessions.runs(session.record, statuses=["waiting"], limit=1)
            if not page.items:
                return True
            run = page.items[0]
            tickets = run.waiting.tickets if run.waiting else ()
            for ticket in tickets:  # the client may never have seen these calls (a restart, a load)
                await self.host.update(session.id, tool_call(ticket.tool_call_id, ticket.tool_name, ticket.arguments,
                                                        lookup(ticket.tool_name)))  # fmt: skip
            host = self.host.host_context(session)  # the file as it is now, through this editor
            unknown = set(await app.unknown_calls(run))  # the rule every decider reads, before anyone is asked
            calls = [
                Question.of(t, await app.preview(run, t, host), unknown=t.tool_call_id in unknown) for t in tickets
            ]
            ask = Ask(run_id=run.run_id, call_ids=[t.tool_call_id for t in tickets])
            decisions: Decisions | None = None
            unanswered: Unanswered | None = None
            async with anyio.create_task_group() as watch:
                watch.start_soon(self._watch_waiting, app, ask)
                try:
                    decisions = await self._ask(session, turn, ask=ask, calls=calls, lookup=lookup)
                except Unanswered as exc:
                    unanswered = exc
                watch.cancel_scope.cancel()
            if unanswered is not None:  # nobody else holds the run: it simply stays waiting
                await self._tell_unanswered(session, run.run_id, unanswered)
                return False
            if ask.withdrawn:
                continue  # decided elsewhere: the next waiting run, if any
            if decisions is None:
                turn.cancelled = True
                return True
            try:
                sink, context = self._sink(app, session, turn), self._context(session, [])
                await app.decide(
                    run.run_id,
                    decisions,
                    sink=sink,
                    context=context,
                    origin="acp",
                    on_waiting=self._asker(app, session, turn),
                )
            except InvalidResume as exc:  # decided elsewhere between the answer and now: that decision stands
                await self._tell_calls(session, ask.call_ids, str(exc))
                await self.host.notice(session.id, "info", _DECIDED_TITLE, str(exc))
            except Exception as exc:
                if turn.cancelled:
                    return True
                raise _turn_error(exc) from exc
            if turn.cancelled:
                return True
        return True

    async def _watch_waiting(self, app: App, ask: Ask) -> None:
        """Withdraw ``ask`` once its run (held by nobody here) stops waiting: decided or ended from elsewhere."""
        while True:
            await anyio.sleep(_WATCH_S)
            record = await app.store.load_run(ask.run_id)
            if record is None or record.status != "waiting":
                ended = record is None or record.status == "done"
                ask.withdraw(_DECIDED if not ended else "The run ended outside this editor.")
                return

    async def cancel(self, app: App, session: Session) -> None:
        """Cancel the session's turn and the prompts queued behind it, without waiting for the store: each prompt is
        answered within ``CANCEL_GRACE_S``, and a run waiting for a decision is cancelled in the background."""
        session.cancel_epoch += 1
        deadline = anyio.current_time() + CANCEL_GRACE_S
        for answer in self._answers.get(session.id, ()):
            answer.scope.deadline = min(answer.scope.deadline, deadline)
        turn = session.turn
        if turn is None:
            return
        turn.cancelled = True
        turn.scope.cancel()
        if turn.ask is not None:
            turn.ask.withdraw()
        run_id = turn.run_id
        if not await app.runtime.cancel(session.record.thread_id) and run_id is not None:
            self.host.background(lambda: self._cancel_held(app, run_id))  # not running here right now

    async def _cancel_held(self, app: App, run_id: str) -> None:
        """Cancel a run the mailbox holds waiting for a decision (a store write, however long the store takes)."""
        try:
            await app.cancel(run_id)
        except InvalidResume:
            pass  # it never started, or already finished
        except Exception:
            log.exception("cancelling run %s failed", run_id)

    def _context(self, session: Session, messages: list[Message], **fields: Any) -> RunActivation:
        """An activation carrying the session's agent, the editor's environment and the session's MCP tools."""
        return dataclasses.replace(
            self.host.host_context(session),
            messages=messages,
            thread_id=session.record.thread_id,
            agent_id=session.agent_id,
            session_id=session.id,
            origin="acp",
            wait_for_decisions=True,
            **fields,
        )

    async def _after_turn(self, app: App, session: Session, blocks: list[Any]) -> None:
        """Touch the session (it sorts first in ``session/list``) and give it a title after the first exchange."""
        record = session.record
        record.updated_at = now_ms()
        info: dict[str, Any] | None = None
        if not record.title:
            from awaken_stdio.contract.messages import text_of

            text = " ".join(text_of(blocks).split()) or "Untitled"
            record.title = text if len(text) <= _TITLE_CHARS else text[: _TITLE_CHARS - 1] + "…"
            info = {"sessionUpdate": "session_info_update", "title": record.title}
        await app.sessions.save(record)
        if info is not None:
            await self.host.update(session.id, info | {"updatedAt": session_info(record)["updatedAt"]})


def _turn_error(exc: Exception) -> JsonRpcError:
    """A run that failed (not one that stopped): -32603 with what went wrong in ``data``."""
    if isinstance(exc, JsonRpcError):
        return exc
    data: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
    kind = getattr(exc, "kind", None)
    if isinstance(kind, str):
        data["kind"] = kind
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return JsonRpcError(INTERNAL_ERROR, f"Internal error: {first}", data)
