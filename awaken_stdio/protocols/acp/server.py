"""``awaken-stdio acp``: the Agent Client Protocol (stable v1) agent over stdio.

Start-up is built around the first answer: ``initialize.py`` answers ``initialize`` from the raw config; after it the
app opens (``app.deferred.DeferredApp``: pydantic, the validated settings, store drivers, runtime, tools, the
permission plugin) and this module loads with it, one ``AcpServer`` per open app; requests wait for that. Provider
SDKs load at the first model call, MCP client code at the first session with MCP servers.

What this module owns: the handler of every method but ``initialize``, sessions in memory (opening, reopening,
closing, their modes and config options, their MCP servers, the environment their runs get from the editor), slash
commands, and the order of messages a client sees. Prompt turns (queueing, cancellation, permission round trips,
the re-offer of approvals left pending by an earlier process) are ``turns.py``'s; events become updates in
``encoder.py``. It reaches the rest through the ``App`` facade (sessions, ``agent_for``, ``reload``, ``cancel``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from awaken_stdio.app.app import Settings, load_settings
from awaken_stdio.app.startup import model_problem
from awaken_stdio.contract.activation import RunActivation, SystemPrompt
from awaken_stdio.contract.environment import ModeRef, RunEnvironment
from awaken_stdio.contract.errors import AwakenError, ConfigError, ThreadAlreadyRunning
from awaken_stdio.contract.events import ActivitySnapshot, AgentEvent
from awaken_stdio.contract.ids import new_id
from awaken_stdio.contract.stores import SessionRecord
from awaken_stdio.protocols.acp import commands
from awaken_stdio.protocols.acp.codes import AUTH_METHODS, RESOURCE_NOT_FOUND, auth_required
from awaken_stdio.protocols.acp.encoder import compaction_updates
from awaken_stdio.protocols.acp.sessions import (
    MODES,
    THOUGHTS_OPTION,
    Session,
    check_choice,
    config_options,
    modes_state,
    replayed,
    session_info,
)
from awaken_stdio.protocols.acp.tracing import adopt_trace, trace_meta
from awaken_stdio.protocols.acp.turns import Turns, descriptors
from awaken_stdio.protocols.acp.wire import (
    AuthenticateParams,
    ClientCapabilities,
    ForkSessionParams,
    ListSessionsParams,
    LoadSessionParams,
    PromptCapabilities,
    PromptParams,
    SessionIdParams,
    SessionSetupParams,
    SetConfigOptionParams,
    SetModeParams,
    prompt_to_blocks,
    system_prompt,
)
from awaken_stdio.protocols.jsonrpc import INVALID_PARAMS, JsonRpcError, JsonRpcPeer, RequestContext

if TYPE_CHECKING:
    from awaken_stdio.app.app import App

__all__ = ["RESOURCE_NOT_FOUND", "AcpServer"]

log = logging.getLogger(__name__)

_MCP_TIMEOUT_S = 30.0
_LIST_PAGE = 50
_LIST_WAIT_S = 0.5  # session/list waits this long for the store, then lists what this connection holds


class AcpServer:
    """One client connection: the handlers of the ACP methods ``front.py`` forwards, and the sessions it opened."""

    def __init__(
        self,
        settings: Settings,
        app: App,
        tasks: anyio.abc.TaskGroup,
        peer: JsonRpcPeer,
        client: dict[str, Any],
        prompt_caps: dict[str, bool],
    ) -> None:
        self.settings = settings
        self.app = app
        self.peer = peer
        self.adopt_client(client, prompt_caps)
        self.sessions: dict[str, Session] = {}
        self.turns = Turns(self)
        self._tg = tasks  # the background tasks (MCP connections, updates after an answer), cancelled on close

    def adopt_client(self, client: dict[str, Any], prompt_caps: dict[str, bool]) -> None:
        """What the last ``initialize`` said (``clientCapabilities``) and was told (``promptCapabilities``)."""
        self.client = ClientCapabilities.model_validate(client)
        self.prompt_caps = PromptCapabilities.model_validate(prompt_caps)

    def _app_with_model(self) -> App:
        problem = model_problem(self.settings.loaded.file)
        if problem is not None:
            raise auth_required(problem)
        return self.app

    def _after_response(self, send: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``send`` after the current request's answer is queued (zed#60199: updates before it are dropped).

        A handler's answer is queued synchronously when it returns, and a task started here first runs after the
        handler's task yields, so whatever ``send`` writes follows the answer on the wire.
        """
        self.background(send)

    def background(self, work: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run ``work`` beside the requests (a turn, a cancel's store write): it may outlive the one that started
        it, and ends when the connection closes."""
        self._tg.start_soon(work)

    # -- authenticate ---------------------------------------------------------------------------------------------

    async def authenticate(self, p: AuthenticateParams, request: RequestContext) -> dict[str, Any]:
        """Re-read the configuration and the keys ``awaken-stdio login`` saved (set since start-up) and adopt its
        agents and models; an error that says to log in while no model can answer."""
        if p.method_id not in AUTH_METHODS:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unknown auth method {p.method_id!r}; "
                                               f"expected one of {', '.join(AUTH_METHODS)}")  # fmt: skip
        settings = load_settings(str(self.settings.loaded.path) if self.settings.loaded.path else None,
                                 self.settings.store_url, self.settings.cwd)  # fmt: skip
        problem = model_problem(settings.loaded.file)
        if problem is not None:
            raise auth_required(f"{problem}; then authenticate again")
        self.app.reload(settings)
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
        session = Session(record=record, agent_id=app.agent_for(record))
        self.sessions[record.session_id] = session
        app.session_hosts[session.id] = lambda: self.host_context(session)
        if mcp_servers:
            await self._connect_mcp(app, session, mcp_servers)
        if known:
            await self._describe(session)
            await self._tell_mcp(session)
        else:

            async def after() -> None:
                await self._send_commands(session)
                await self._tell_mcp(session)

            self._after_response(after)
        return session

    def host_context(self, session: Session) -> RunActivation:
        """Where a run of this session runs in this process, whoever decided: this editor's environment, the
        session's MCP tools and the client's system prompt (composed with the agent's own)."""
        return RunActivation(
            env=replace(self._env(session), trace=session.trace),
            tools=list(session.mcp_tools),
            system_prompt=SystemPrompt.of(session.record.system_prompt),
        )

    async def notice(self, session_id: str, severity: str, title: str, description: str | None = None) -> bool:
        """A ``notice`` (advisory, not conversation history) for clients that opted in (``session.notices``);
        False when the client did not, so the caller can say it another way if it must be said."""
        if not self.client.notices:
            return False
        update: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
        if description:
            update["description"] = description
        await self.update(session_id, update)
        return True

    async def _tell_mcp(self, session: Session) -> None:
        """The session's MCP servers that failed to start or are still connecting, as notices."""
        for status in session.mcp_status:
            name, state, error = status.get("name"), status.get("state"), status.get("error")
            if state == "failed":
                await self.notice(session.id, "warning", f"MCP server {name} failed to start", error)
            elif state == "connecting":
                detail = f"Its tools are offered once it is ready (last error: {error})" if error else None
                await self.notice(session.id, "info", f"MCP server {name} is still connecting", detail)

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

    async def new_session(self, p: SessionSetupParams, request: RequestContext) -> dict[str, Any]:
        prompt = system_prompt(p.system_prompt)
        app = self._app_with_model()
        runtime = app.runtime
        agent_id = runtime.default_agent_id()
        record = SessionRecord(
            session_id=new_id("sess_"),
            thread_id=new_id(),
            cwd=p.cwd,
            agent_id=agent_id,
            mode="default",
            model=runtime.agents[agent_id].model,
            additional_directories=p.additional_directories,
            mcp_servers=_stored_servers(p.mcp_servers),
            system_prompt=prompt,
        )
        await app.sessions.save(record)
        session = await self._open(app, record, p.mcp_servers)
        return {"sessionId": record.session_id, **self._setup_result(session)}

    async def fork_session(self, p: ForkSessionParams, request: RequestContext) -> dict[str, Any]:
        """``session/fork`` (unstable): a new session whose thread is a copy of the source's, whole or up to the
        message ``_meta["awaken-stdio"]["messageId"]``, independent afterwards and durable like any session. It keeps
        the source's agent, mode, model and system prompt (unless this request gives one)."""
        prompt = system_prompt(p.system_prompt)
        extension = (p.meta or {}).get("awaken-stdio")
        up_to = extension.get("messageId") if isinstance(extension, dict) else None
        if up_to is not None and not isinstance(up_to, str):
            raise JsonRpcError(INVALID_PARAMS, "Invalid params: _meta.awaken-stdio.messageId must be a string")
        app = self._app_with_model()
        source = await self._stored(app, p.session_id)
        record = SessionRecord(
            session_id=new_id("sess_"),
            thread_id=new_id(),
            cwd=p.cwd,
            agent_id=source.agent_id,
            title=f"{source.title} (fork)" if source.title else None,
            mode=source.mode,
            model=source.model,
            additional_directories=p.additional_directories,  # the complete list, as the schema says (none: none)
            mcp_servers=_stored_servers(p.mcp_servers),
            system_prompt=prompt if prompt is not None else source.system_prompt,
        )
        try:
            await app.sessions.fork(source, record, up_to=up_to)
        except LookupError as exc:
            raise JsonRpcError(INVALID_PARAMS, f"Invalid params: {exc}") from None
        session = await self._open(app, record, p.mcp_servers)
        return {"sessionId": record.session_id, **self._setup_result(session)}

    async def _stored(self, app: App, session_id: str) -> SessionRecord:
        record = await app.sessions.load(session_id)
        if record is None:
            raise _not_found(session_id)
        return record

    async def _reopen(self, p: LoadSessionParams, *, history: bool) -> dict[str, Any]:
        servers_given = "mcp_servers" in p.model_fields_set
        prompt = system_prompt(p.system_prompt)
        app = self._app_with_model()
        record = await self._stored(app, p.session_id)
        record.cwd = p.cwd
        if prompt is not None:  # else the one the session was created with, restored from the store
            record.system_prompt = prompt
        if p.additional_directories:
            record.additional_directories = p.additional_directories
        if servers_given:
            record.mcp_servers = _stored_servers(p.mcp_servers)
        await app.sessions.save(record)
        if history:
            for update in await replayed(app, record, descriptors(app)):
                await self.update(record.session_id, update)
        servers = p.mcp_servers if servers_given else record.mcp_servers
        session = await self._open(app, record, servers, known=True)
        return self._setup_result(session)

    async def load_session(self, p: LoadSessionParams, request: RequestContext) -> dict[str, Any]:
        return await self._reopen(p, history=True)

    async def resume_session(self, p: LoadSessionParams, request: RequestContext) -> dict[str, Any]:
        return await self._reopen(p, history=False)

    async def list_sessions(self, p: ListSessionsParams, request: RequestContext) -> dict[str, Any]:
        """The store's sessions; when the store does not answer within ``_LIST_WAIT_S`` (another process's lock, a
        frozen disk), the sessions open here, said to be partial, rather than no answer."""
        app = self.app
        with anyio.move_on_after(_LIST_WAIT_S):
            try:
                page = await app.sessions.list(cwd=p.cwd, limit=_LIST_PAGE, cursor=p.cursor)
            except ValueError:
                raise JsonRpcError(INVALID_PARAMS, f"Invalid params: unknown cursor {p.cursor!r}") from None
            result: dict[str, Any] = {"sessions": [session_info(r) for r in page.items]}
            if page.next_cursor:
                result["nextCursor"] = page.next_cursor
            return result
        log.warning("session/list: the store did not answer within %s s; listing the sessions open here", _LIST_WAIT_S)
        held = [s.record for s in self.sessions.values() if p.cwd is None or s.record.cwd == p.cwd]
        held.sort(key=lambda r: (r.updated_at, r.session_id), reverse=True)
        partial = "the store did not answer in time: only the sessions open in this connection"
        return {"sessions": [session_info(r) for r in held], "_meta": {"awaken-stdio": {"partial": partial}}}

    async def _shut(self, app: App, session: Session) -> None:
        """Stop the session's turn and MCP servers (its record stays)."""
        app.session_hosts.pop(session.id, None)
        await self.turns.cancel(app, session)
        async with session.lock:  # the turn is over
            pass
        if session.mcp_scope is not None:
            session.mcp_scope.cancel()
            session.mcp_tools = []

    async def close_session(self, p: SessionIdParams, request: RequestContext) -> dict[str, Any]:
        session = self.sessions.pop(p.session_id, None)
        if session is not None:
            await self._shut(self.app, session)
        return {}

    async def delete_session(self, p: SessionIdParams, request: RequestContext) -> dict[str, Any]:
        app = self.app
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
        if session.env is not None:
            session.env.mode.set(mode)  # the running turn's next gate sees it
        await app.sessions.save(session.record)
        await self.update(session.id, {"sessionUpdate": "current_mode_update", "currentModeId": mode})

    async def _set_model(self, app: App, session: Session, model: str) -> None:
        session.record.model = check_choice(model, self._models(), "model")
        session.agent_id = app.agent_for(session.record)
        await app.sessions.save(session.record)

    async def _config_changed(self, session: Session) -> None:
        options = config_options(session, self._models(), boolean=self.client.boolean_config)
        await self.update(session.id, {"sessionUpdate": "config_option_update", "configOptions": options})

    async def set_mode(self, p: SetModeParams, request: RequestContext) -> dict[str, Any]:
        session = self._session(p.session_id)
        await self._set_mode(self.app, session, p.mode_id)
        await self._config_changed(session)
        return {}

    async def set_config_option(self, p: SetConfigOptionParams, request: RequestContext) -> dict[str, Any]:
        session = self._session(p.session_id)
        app = self.app
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
        from awaken_stdio.app.tooling import McpServerSpec, McpToolsets

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

        await self._tg.start(supervise)
        await publish()
        for status in toolsets.statuses():
            if status.state != "ready":
                log.warning("session %s: MCP server %s: %s", session.id, status.name, status.error)

    # -- the editor, prompts and commands ---------------------------------------------------------------------------

    async def update(self, session_id: str, update: dict[str, Any]) -> None:
        await self.peer.notify("session/update", {"sessionId": session_id, "update": update})

    def _env(self, session: Session) -> RunEnvironment:
        """What the session's runs get from this editor (its ``fs/*`` and ``terminal/*`` when it offers them, its
        forms), built once; each run's is this with the trace context of the prompt that started it."""
        if session.env is None:
            from awaken_stdio.protocols.acp.channel import AcpChannel
            from awaken_stdio.protocols.acp.client_fs import AcpFileSystem, AcpProcessRunner

            fs = self.client.fs
            meta = lambda: trace_meta(session.trace)  # noqa: E731  # the trace context of the session's run, as it is then
            session.env = RunEnvironment(
                cwd=session.record.cwd,
                roots=tuple(session.record.additional_directories),
                fs=AcpFileSystem(self.peer, session.id, read=fs.read_text_file, write=fs.write_text_file, meta=meta)
                if fs.read_text_file or fs.write_text_file
                else None,
                runner=AcpProcessRunner(self.peer, session.id, meta) if self.client.terminal else None,
                channel=AcpChannel(self.peer, session.id, forms=self.client.forms),
                mode=ModeRef(session.mode),
            )
        return session.env

    async def prompt(self, p: PromptParams, request: RequestContext) -> dict[str, Any]:
        session, blocks = self.take_prompt(p)
        return {"stopReason": await self.run_turn(session, blocks)}

    def take_prompt(self, p: PromptParams) -> tuple[Session, list[Any]]:
        """A prompt's open session and content, checked (-32602, -32002) before the prompt is accepted."""
        session = self._session(p.session_id)
        blocks = prompt_to_blocks(p.prompt, self.prompt_caps)
        session.trace = adopt_trace({"_meta": p.meta})  # the client's trace context parents this turn's run
        return session, blocks

    async def run_turn(self, session: Session, blocks: list[Any] | None, message_id: str | None = None) -> str:
        """The turn of a prompt (``Turns.answer``), after what did not load is told; its stop reason."""
        app = self.app
        await self._tell_loading_problems(app, session)
        return await self.turns.answer(app, session, blocks, message_id)

    async def _tell_loading_problems(self, app: App, session: Session) -> None:
        """What did not load (a tool module that failed or hangs, an MCP server that failed or is silent), told to
        the person once per session, before the turn that would have used it."""
        await app.loading.settle()
        problems = app.loading.problems[session.problems_told :]
        session.problems_told += len(problems)
        if problems and self.client.notices:
            for problem in problems:
                await self.notice(session.id, "warning", "A tool is not available", problem)
        elif problems:
            text = "Some tools are not available:\n" + "\n".join(f"- {p}" for p in problems) + "\n\n"
            await self.update(session.id, {"sessionUpdate": "agent_message_chunk", "messageId": new_id(),
                                           "content": {"type": "text", "text": text}})  # fmt: skip

    async def cancel(self, p: SessionIdParams, request: RequestContext) -> None:
        session = self.sessions.get(p.session_id)
        if session is None:
            return  # unknown or idle sessions: nothing to cancel (INFO-CANCEL-201)
        await self.turns.cancel(self.app, session)

    async def command(self, app: App, session: Session, name: str, argument: str) -> None:
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

        async def shown(event: AgentEvent) -> None:  # as it happens: compaction_update, compaction_summary_chunk
            if type(event) is ActivitySnapshot:
                for update in compaction_updates(event, compaction=True, notices=False):
                    await self.update(session.id, update)

        sink = shown if self.client.compaction else None
        try:
            result = await app.runtime.compact(session.record.thread_id, session.agent_id, sink)
        except ThreadAlreadyRunning:
            return "Cannot compact while a run of this session is in progress."
        except AwakenError as exc:
            return f"Compaction failed: {exc}"
        return result.describe()


def _not_found(session_id: str, why: str = "") -> JsonRpcError:
    return JsonRpcError(RESOURCE_NOT_FOUND, f"Resource not found: session {session_id}{why}", {"sessionId": session_id})


def _stored_servers(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What is kept of ``mcpServers`` in the store: how to reach each server, never its env or headers (secrets)."""
    keep = ("name", "type", "command", "args", "url")
    return [{k: e[k] for k in keep if k in e} for e in entries]
