"""``awaken-stdio acp``: the Agent Client Protocol (stable v1) agent over stdio.

Start-up is built around the first answer: ``front.py`` answers ``initialize`` from the raw config and loads this
module (pydantic, the validated settings) after it; ``AcpServer.run`` then opens the app (store drivers, runtime,
tools, the permission plugin), and session requests wait for that. Provider SDKs load at the first model call, MCP
client code at the first session with MCP servers.

What this module owns: the handler of every method but ``initialize``, sessions in memory, prompt turns (queueing,
cancellation, permission round trips, the re-offer of approvals left pending by an earlier process), and the order
of messages a client sees. It reaches the runtime only through its public API (``run``, ``cancel``,
``send_decisions``, the store's session and run records) and ``App.decide``; events become updates in
``encoder.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from awaken_stdio.app.app import Settings, load_settings, open_app
from awaken_stdio.app.startup import model_problem
from awaken_stdio.contract.errors import AwakenError, ConfigError, InvalidResume, ThreadAlreadyRunning
from awaken_stdio.contract.events import AgentEvent, RunFinish, ToolCallDone
from awaken_stdio.contract.ids import new_id, now_ms
from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.contract.suspension import ToolCallResume
from awaken_stdio.protocols.acp import commands
from awaken_stdio.protocols.acp.codes import RESOURCE_NOT_FOUND, auth_required
from awaken_stdio.protocols.acp.encoder import DescriptorLookup, TurnEncoder, replay, stop_reason, tool_call
from awaken_stdio.protocols.acp.permissions import Question, ask_permission
from awaken_stdio.protocols.acp.sessions import (
    MODES,
    THOUGHTS_OPTION,
    Ask,
    Session,
    Turn,
    check_choice,
    config_options,
    modes_state,
    session_info,
)
from awaken_stdio.protocols.acp.wire import (
    AuthenticateParams,
    ClientCapabilities,
    ListSessionsParams,
    LoadSessionParams,
    PromptCapabilities,
    PromptParams,
    SessionIdParams,
    SessionSetupParams,
    SetConfigOptionParams,
    SetModeParams,
    prompt_to_blocks,
)
from awaken_stdio.protocols.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, JsonRpcError, JsonRpcPeer

if TYPE_CHECKING:
    from awaken_stdio.app.app import App
    from awaken_stdio.contract.messages import Message
    from awaken_stdio.contract.tools import ToolDescriptor
    from awaken_stdio.runtime.activation import RunActivation

__all__ = ["RESOURCE_NOT_FOUND", "AcpServer"]

log = logging.getLogger(__name__)

_APP_OPEN_TIMEOUT_S = 60.0
_MCP_TIMEOUT_S = 30.0
_LIST_PAGE = 50
_TITLE_CHARS = 60
_MAX_PENDING_ROUNDS = 16  # a resumed run that keeps asking: stop re-offering after this many rounds
_WATCH_S = 0.25  # how often a re-offered question checks whether its run was decided elsewhere


class AcpServer:
    """One client connection: the handlers of the ACP methods ``front.py`` forwards, and the sessions it opened."""

    def __init__(
        self, settings: Settings, peer: JsonRpcPeer, client: dict[str, Any], prompt_caps: dict[str, bool]
    ) -> None:
        self.settings = settings
        self.peer = peer
        self.adopt_client(client, prompt_caps)
        self.sessions: dict[str, Session] = {}
        self._app: App | None = None
        self._app_error: BaseException | None = None
        self._app_ready = anyio.Event()
        self._tg: anyio.abc.TaskGroup | None = None

    def adopt_client(self, client: dict[str, Any], prompt_caps: dict[str, bool]) -> None:
        """What the last ``initialize`` said (``clientCapabilities``) and was told (``promptCapabilities``)."""
        self.client = ClientCapabilities.model_validate(client)
        self.prompt_caps = PromptCapabilities.model_validate(prompt_caps)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Own the background tasks and the app, opened at once (this server loads after the first answer)."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            task_status.started()
            try:
                async with open_app(self.settings) as app:
                    self._app = app
                    self._app_ready.set()
                    await anyio.sleep_forever()
            except Exception as exc:
                log.exception("could not open the app")
                self._app_error = exc
                self._app_ready.set()
            finally:
                self._app = None

    async def _ready(self) -> App:
        with anyio.fail_after(_APP_OPEN_TIMEOUT_S):
            await self._app_ready.wait()
        if self._app is None:
            raise JsonRpcError(INTERNAL_ERROR, f"the agent could not start: {self._app_error}")
        return self._app

    async def _app_with_model(self) -> App:
        problem = model_problem(self.settings.loaded.file)
        if problem is not None:
            raise auth_required(problem)
        return await self._ready()

    def _after_response(self, send: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``send`` after the current request's answer is queued (zed#60199: updates before it are dropped).

        A handler's answer is queued synchronously when it returns, and a task started here first runs after the
        handler's task yields, so whatever ``send`` writes follows the answer on the wire.
        """
        assert self._tg is not None
        self._tg.start_soon(send)

    # -- authenticate ---------------------------------------------------------------------------------------------

    async def authenticate(self, params: Any) -> dict[str, Any]:
        """Re-read the configuration (a key or config file set since start-up) and adopt its agents and models."""
        AuthenticateParams.model_validate(params or {})
        settings = load_settings(str(self.settings.loaded.path) if self.settings.loaded.path else None,
                                 self.settings.store_url, self.settings.cwd)  # fmt: skip
        problem = model_problem(settings.loaded.file)
        if problem is not None:
            raise auth_required(problem)
        (await self._ready()).reload(settings)
        self.settings = settings
        return {}

    # -- sessions -----------------------------------------------------------------------------------------------

    def _models(self) -> list[str]:
        return list(self.settings.loaded.config.models)

    def _setup_result(self, session: Session) -> dict[str, Any]:
        result: dict[str, Any] = {
            "modes": modes_state(session.mode),
            "configOptions": config_options(session, self._models(), boolean=self.client.boolean_config),
        }
        if session.mcp_status:
            result["_meta"] = {"awaken-stdio": {"mcpServers": session.mcp_status}}
        return result

    async def _open(
        self, app: App, record: SessionRecord, mcp_servers: list[dict[str, Any]], *, known: bool = False
    ) -> Session:
        """Open the session here; what the client is told about it goes before the response when the client
        already ``known``s the session (load/resume: ACP-LOAD-002), else right after it (zed#60199)."""
        old = self.sessions.pop(record.session_id, None)
        if old is not None:
            await self._shut(app, old)
        session = Session(record, app.agent_for(record))
        self.sessions[record.session_id] = session
        app.session_hosts[session.id] = lambda: self._host_context(session)
        if mcp_servers:
            await self._connect_mcp(app, session, mcp_servers)
        if known:
            await self._describe(session)
        else:
            self._after_response(lambda: self._send_commands(session))
        return session

    def _host_context(self, session: Session) -> dict[str, Any]:
        """What a run of this session resumes with in this process, whoever decided: this editor's services."""
        return {"cwd": session.record.cwd, "services": self._services(session), "tools": list(session.mcp_tools)}

    async def _send_commands(self, session: Session) -> None:
        await self.update(session.id, {"sessionUpdate": "available_commands_update",
                                       "availableCommands": commands.available_commands()})  # fmt: skip

    async def _describe(self, session: Session) -> None:
        """Everything about a reopened session besides its history: commands, mode, options, title."""
        await self._send_commands(session)
        await self.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": session.mode})
        await self._config_changed(session)
        if session.record.title:
            await self.update(session.id, {"sessionUpdate": "session_info_update", "title": session.record.title,
                                           "updatedAt": session_info(session.record)["updatedAt"]})  # fmt: skip

    async def new_session(self, params: Any) -> dict[str, Any]:
        p = SessionSetupParams.model_validate(params)
        app = await self._app_with_model()
        runtime = app.runtime
        agent_id = runtime.default_agent_id()
        record = SessionRecord(
            new_id("sess_"),
            new_id(),
            p.cwd,
            agent_id=agent_id,
            mode="default",
            model=runtime.agents[agent_id].model,
            additional_directories=p.additional_directories,
            mcp_servers=_stored_servers(p.mcp_servers),
        )
        await app.sessions.save(record)
        session = await self._open(app, record, p.mcp_servers)
        return {"sessionId": record.session_id, **self._setup_result(session)}

    async def _stored(self, app: App, session_id: str) -> SessionRecord:
        record = await app.sessions.load(session_id)
        if record is None:
            raise _not_found(session_id)
        return record

    async def _reopen(self, params: Any, *, history: bool) -> dict[str, Any]:
        p = LoadSessionParams.model_validate(params)
        app = await self._app_with_model()
        record = await self._stored(app, p.session_id)
        record.cwd = p.cwd
        if p.additional_directories:
            record.additional_directories = p.additional_directories
        if "mcpServers" in (params or {}):
            record.mcp_servers = _stored_servers(p.mcp_servers)
        await app.sessions.save(record)
        if history:
            for update in replay(await app.sessions.history(record), self._lookup(app)):
                await self.update(record.session_id, update)
        servers = p.mcp_servers if "mcpServers" in (params or {}) else record.mcp_servers
        session = await self._open(app, record, servers, known=True)
        return self._setup_result(session)

    async def load_session(self, params: Any) -> dict[str, Any]:
        return await self._reopen(params, history=True)

    async def resume_session(self, params: Any) -> dict[str, Any]:
        return await self._reopen(params, history=False)

    async def list_sessions(self, params: Any) -> dict[str, Any]:
        p = ListSessionsParams.model_validate(params or {})
        app = await self._ready()
        try:
            page = await app.sessions.list(cwd=p.cwd, limit=_LIST_PAGE, cursor=p.cursor)
        except ValueError:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unknown cursor {p.cursor!r}") from None
        result: dict[str, Any] = {"sessions": [session_info(r) for r in page.items]}
        if page.next_cursor:
            result["nextCursor"] = page.next_cursor
        return result

    async def _shut(self, app: App, session: Session) -> None:
        """Stop the session's turn and MCP servers (its record stays)."""
        app.session_hosts.pop(session.id, None)
        session.cancel_epoch += 1
        if session.turn is not None:
            await self._cancel_turn(app, session, session.turn)
            async with session.lock:  # the turn has answered
                pass
        if session.mcp_scope is not None:
            session.mcp_scope.cancel()
            session.mcp_tools = []

    async def close_session(self, params: Any) -> dict[str, Any]:
        p = SessionIdParams.model_validate(params)
        session = self.sessions.pop(p.session_id, None)
        if session is not None:
            await self._shut(await self._ready(), session)
        return {}

    async def delete_session(self, params: Any) -> dict[str, Any]:
        p = SessionIdParams.model_validate(params)
        app = await self._ready()
        session = self.sessions.pop(p.session_id, None)
        if session is not None:
            await self._shut(app, session)
        await app.sessions.delete(p.session_id)
        return {}

    def _session(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise _not_found(session_id, " is not open (session/load or session/resume it)")
        return session

    async def _set_mode(self, app: App, session: Session, mode: str) -> None:
        session.record.mode = check_choice(mode, MODES, "mode")
        if session.services is not None:
            from awaken_stdio.runtime.permission import MODE_SERVICE

            session.services[MODE_SERVICE] = mode  # the running turn's next gate sees it
        await app.sessions.save(session.record)
        await self.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})

    async def _set_model(self, app: App, session: Session, model: str) -> None:
        session.record.model = check_choice(model, self._models(), "model")
        session.agent_id = app.agent_for(session.record)
        await app.sessions.save(session.record)

    async def _config_changed(self, session: Session) -> None:
        options = config_options(session, self._models(), boolean=self.client.boolean_config)
        await self.update(session.id, {"sessionUpdate": "config_option_update", "configOptions": options})

    async def set_mode(self, params: Any) -> dict[str, Any]:
        p = SetModeParams.model_validate(params)
        session = self._session(p.session_id)
        await self._set_mode(await self._ready(), session, p.mode_id)
        await self._config_changed(session)
        return {}

    async def set_config_option(self, params: Any) -> dict[str, Any]:
        p = SetConfigOptionParams.model_validate(params)
        session = self._session(p.session_id)
        app = await self._ready()
        if p.config_id == "mode":
            await self._set_mode(app, session, str(p.value))
        elif p.config_id == "model":
            await self._set_model(app, session, str(p.value))
        elif p.config_id == THOUGHTS_OPTION and self.client.boolean_config and isinstance(p.value, bool):
            session.show_thoughts = p.value
        else:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unknown config option {p.config_id!r} or bad value")
        return {"configOptions": config_options(session, self._models(), boolean=self.client.boolean_config)}

    # -- MCP ----------------------------------------------------------------------------------------------------

    async def _connect_mcp(self, app: App, session: Session, entries: list[dict[str, Any]]) -> None:
        """Connect the session's MCP servers concurrently, each bounded; a failure is reported, never fatal.

        Their tools are offered to this session's runs only (``RunActivation.tools``).
        """
        from awaken_stdio.tools.mcp import McpServerSpec, McpToolsets

        try:
            specs = [McpServerSpec.from_acp(e, cwd=session.record.cwd, timeout_s=_MCP_TIMEOUT_S) for e in entries]
        except ConfigError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None

        async def publish(_: object = None) -> None:
            session.mcp_tools = list(toolsets.tools())
            session.mcp_status = [s.to_json() for s in toolsets.statuses()]

        toolsets = McpToolsets(specs, on_change=publish)

        async def supervise(*, task_status: anyio.abc.TaskStatus[McpToolsets]) -> None:
            with anyio.CancelScope() as scope:
                session.mcp_scope = scope
                await toolsets.run(task_status=task_status)

        assert self._tg is not None
        await self._tg.start(supervise)
        await publish()
        for status in toolsets.statuses():
            if status.state != "ready":
                log.warning("session %s: MCP server %s: %s", session.id, status.name, status.error)

    # -- prompt turns -------------------------------------------------------------------------------------------

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.peer.notify("session/update", {"sessionId": session_id, "update": update})

    def _lookup(self, app: App) -> DescriptorLookup:
        tools = app.runtime.tools

        def lookup(name: str) -> ToolDescriptor | None:
            tool = tools.get(name)
            return tool.descriptor if tool is not None else None

        return lookup

    def _services(self, session: Session) -> dict[str, Any]:
        if session.services is None:
            from awaken_stdio.contract.channel import CLIENT_CHANNEL
            from awaken_stdio.protocols.acp.channel import AcpChannel
            from awaken_stdio.protocols.acp.client_fs import AcpFileSystem, AcpProcessRunner
            from awaken_stdio.runtime.permission import MODE_SERVICE
            from awaken_stdio.tools.workspace import ADDITIONAL_DIRECTORIES, FILE_SYSTEM, PROCESS_RUNNER

            fs = self.client.fs
            services: dict[str, Any] = {
                MODE_SERVICE: session.mode,
                ADDITIONAL_DIRECTORIES: list(session.record.additional_directories),
            }
            if fs.read_text_file or fs.write_text_file:
                services[FILE_SYSTEM] = AcpFileSystem(
                    self.peer, session.id, read=fs.read_text_file, write=fs.write_text_file
                )
            if self.client.terminal:
                services[PROCESS_RUNNER] = AcpProcessRunner(self.peer, session.id)
            services[CLIENT_CHANNEL] = AcpChannel(self.peer, session.id, forms=self.client.forms)
            session.services = services
        return session.services

    async def prompt(self, params: Any) -> dict[str, Any]:
        p = PromptParams.model_validate(params)
        session = self._session(p.session_id)
        blocks = prompt_to_blocks(p.prompt, self.prompt_caps)
        app = await self._ready()
        epoch = session.cancel_epoch
        async with session.lock:  # a second prompt waits for the first: turns never interleave
            if session.cancel_epoch != epoch:
                return {"stopReason": "cancelled"}
            turn = session.turn = Turn()
            try:
                reason = await self._turn(app, session, turn, blocks)
            finally:
                session.turn = None
        return {"stopReason": reason}

    async def _turn(self, app: App, session: Session, turn: Turn, blocks: list[Any]) -> str:
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

    async def _turn_steps(self, app: App, session: Session, turn: Turn, blocks: list[Any]) -> str:
        with turn.scope:
            await self._offer_pending(app, session, turn)
        if turn.cancelled:
            return "cancelled"
        command = commands.parse_command(blocks)
        if command is not None:
            await self._command(app, session, *command)
            return "end_turn"
        from awaken_stdio.contract.messages import Message

        turn.run_id = new_id()
        activation = self._context(session, [Message.user(blocks)], run_id=turn.run_id)
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
        encoder = TurnEncoder(self._lookup(app), window, show_thoughts=session.show_thoughts)
        suspended: list[Question] = []
        notify = self.peer.notify  # not self.update: this runs per event, one coroutine frame fewer per update
        session_id = session.id

        async def sink(event: AgentEvent) -> None:
            if turn.ask is not None and not turn.ask.answered:
                turn.ask.withdraw("Decided outside this editor.")  # the run moved on: someone else decided
            for update in encoder.encode(event):
                await notify("session/update", {"sessionId": session_id, "update": update})
            if type(event) is ToolCallDone and event.outcome == "suspended":
                name, args = encoder.call(event.id) or (event.result.tool_name, None)
                result = event.result
                unknown = (result.message or "") if result.metadata.get("unknown_after_crash") else None
                preview = result.suspension.suspension.preview if result.suspension else None
                suspended.append(Question(event.id, name, args, unknown, preview))
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
            turn.ask = ask = Ask(run_id, [c.call_id for c in calls])
            assert turn.tasks is not None
            turn.tasks.start_soon(self._ask_live, app, session, turn, ask, calls, self._lookup(app))

        return ask_now

    async def _ask_live(
        self, app: App, session: Session, turn: Turn, ask: Ask, calls: list[Question], lookup: DescriptorLookup
    ) -> None:
        """Ask about a run waiting in this process; the answer goes to the mailbox, which hands it to the run.

        A dismissed question cancels the run, unless a decision recorded elsewhere got there first: then that
        decision stands and the turn goes on.
        """
        try:
            decisions = await self._ask(session, turn, ask, calls, lookup)
            if ask.withdrawn:
                return
            with anyio.CancelScope(shield=True):
                if decisions is not None:
                    await app.decide(ask.run_id, decisions, origin="acp")
                elif await app.dismiss(ask.run_id):
                    turn.cancelled = True
        except InvalidResume as exc:  # another surface decided first: its decision stands
            await self._tell_calls(session, ask.call_ids, str(exc))
        except Exception:
            log.exception("session %s: asking about run %s failed", session.id, ask.run_id)

    async def _ask(
        self, session: Session, turn: Turn, ask: Ask, calls: list[Question], lookup: DescriptorLookup
    ) -> list[tuple[str, ToolCallResume]] | None:
        """``_ask_all`` until ``ask`` is withdrawn; a withdrawn question is told in its calls and gives ``None``."""
        with ask.scope:
            decisions = await self._ask_all(session, turn, calls, lookup)
            ask.answered = True
            return decisions
        if ask.note:
            await self._tell_calls(session, ask.call_ids, ask.note, failed=ask.failed)
        return None

    async def _tell_calls(self, session: Session, call_ids: list[str], text: str, *, failed: bool = False) -> None:
        for call_id in call_ids:
            content = [{"type": "content", "content": {"type": "text", "text": text}}]
            update: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "content": content}
            if failed:
                update["status"] = "failed"
            await self.update(session.id, update)

    async def _ask_all(
        self, session: Session, turn: Turn, calls: list[Question], lookup: DescriptorLookup
    ) -> list[tuple[str, ToolCallResume]] | None:
        """Ask about each call in order; ``None`` when the person cancelled (the turn is then cancelled)."""
        decisions: list[tuple[str, ToolCallResume]] = []
        for question in calls:
            decision = await ask_permission(self.peer, session.id, question, lookup(question.tool_name))
            if decision is None or turn.cancelled:
                return None
            decisions.append((question.call_id, decision))
            if decision.action == "resume":
                await self.update(session.id, {"sessionUpdate": "tool_call_update", "toolCallId": question.call_id,
                                               "status": "in_progress"})  # fmt: skip
        return decisions

    async def _offer_pending(self, app: App, session: Session, turn: Turn) -> None:
        """Approvals an earlier process (or a run before ``session/load``) left waiting are asked again first.

        Each waiting run of the session's thread gets its decisions through ``App.decide``, which resumes it
        exactly once; its updates stream into this turn. A question the run no longer needs (decided from another
        surface meanwhile) is withdrawn; a cancelled answer cancels the turn and leaves the run waiting.
        """
        lookup = self._lookup(app)
        for _ in range(_MAX_PENDING_ROUNDS):
            page = await app.sessions.runs(session.record, statuses=["waiting"], limit=1)
            if not page.items:
                return
            run = page.items[0]
            tickets = run.waiting.tickets if run.waiting else ()
            for ticket in tickets:  # the client may never have seen these calls (a restart, a load)
                await self.update(session.id, tool_call(ticket.tool_call_id, ticket.tool_name, ticket.arguments,
                                                        lookup(ticket.tool_name)))  # fmt: skip
            host = self._host_context(session)  # the file as it is now, through this editor
            calls = [Question.of(t, await app.preview(run, t, host)) for t in tickets]
            ask = Ask(run.run_id, [t.tool_call_id for t in tickets])
            decisions: list[tuple[str, ToolCallResume]] | None = None
            async with anyio.create_task_group() as watch:
                watch.start_soon(self._watch_waiting, app, ask)
                decisions = await self._ask(session, turn, ask, calls, lookup)
                watch.cancel_scope.cancel()
            if ask.withdrawn:
                continue  # decided elsewhere: the next waiting run, if any
            if decisions is None:
                turn.cancelled = True
                return
            try:
                sink, context = self._sink(app, session, turn), self._context(session, [])
                await app.decide(run.run_id, decisions, sink, context, "acp", self._asker(app, session, turn))
            except InvalidResume as exc:  # decided elsewhere between the answer and now: that decision stands
                await self._tell_calls(session, ask.call_ids, str(exc))
            except Exception as exc:
                if turn.cancelled:
                    return
                raise _turn_error(exc) from exc
            if turn.cancelled:
                return

    async def _watch_waiting(self, app: App, ask: Ask) -> None:
        """Withdraw ``ask`` once its run (held by nobody here) stops waiting: decided or ended from elsewhere."""
        while True:
            await anyio.sleep(_WATCH_S)
            record = await app.store.load_run(ask.run_id)
            if record is None or record.status != "waiting":
                ended = record is None or record.status == "done"
                ask.withdraw("Decided outside this editor." if not ended else "The run ended outside this editor.")
                return

    async def _cancel_turn(self, app: App, session: Session, turn: Turn) -> None:
        turn.cancelled = True
        turn.scope.cancel()
        if turn.ask is not None:
            turn.ask.withdraw()
        if not await app.runtime.cancel(session.record.thread_id) and turn.run_id is not None:
            try:  # not running here right now: it waits for a decision, held by the mailbox
                await app.cancel(turn.run_id)
            except InvalidResume:
                pass  # it never started, or already finished

    def _context(self, session: Session, messages: list[Message], **fields: Any) -> RunActivation:
        """An activation carrying the session's agent, working directory, editor services and MCP tools."""
        from awaken_stdio.runtime.activation import RunActivation

        return RunActivation(
            messages,
            thread_id=session.record.thread_id,
            agent_id=session.agent_id,
            session_id=session.id,
            origin="acp",
            wait_for_decisions=True,
            **self._host_context(session),
            **fields,
        )

    async def cancel(self, params: Any) -> None:
        p = SessionIdParams.model_validate(params)
        session = self.sessions.get(p.session_id)
        if session is None or self._app is None:
            return  # unknown or idle sessions: nothing to cancel (INFO-CANCEL-201)
        session.cancel_epoch += 1
        if session.turn is not None:
            await self._cancel_turn(self._app, session, session.turn)

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
            await self.update(session.id, info | {"updatedAt": session_info(record)["updatedAt"]})

    async def _command(self, app: App, session: Session, name: str, argument: str) -> None:
        text: str
        if name == "compact":
            text = await self._compact(app, session)
        elif name == "mode":
            if argument:
                await self._set_mode(app, session, argument)
                await self._config_changed(session)
            text = f"Mode: {session.mode}" + ("" if argument else f" (choose with /mode {'|'.join(MODES)})")
        elif name == "model":
            if argument:
                await self._set_model(app, session, argument)
                await self._config_changed(session)
            current = session.record.model
            text = "Models: " + ", ".join(f"**{m}**" if m == current else m for m in self._models())
        else:
            page = await app.sessions.runs(session.record)
            text = commands.format_runs(page.items)
        await self.update(session.id, {"sessionUpdate": "agent_message_chunk", "messageId": new_id(),
                                       "content": {"type": "text", "text": text}})  # fmt: skip

    async def _compact(self, app: App, session: Session) -> str:
        """Summarise the session's thread now; the outcome, or why it could not run, is the command's answer."""
        try:
            result = await app.runtime.compact(session.record.thread_id, session.agent_id)
        except ThreadAlreadyRunning:
            return "Cannot compact while a run of this session is in progress."
        except AwakenError as exc:
            return f"Compaction failed: {exc}"
        return result.describe()


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


def _not_found(session_id: str, why: str = "") -> JsonRpcError:
    return JsonRpcError(RESOURCE_NOT_FOUND, f"Resource not found: session {session_id}{why}", {"sessionId": session_id})


def _stored_servers(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What is kept of ``mcpServers`` in the store: how to reach each server, never its env or headers (secrets)."""
    keep = ("name", "type", "command", "args", "url")
    return [{k: e[k] for k in keep if k in e} for e in entries]
